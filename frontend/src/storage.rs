//! The browser's localStorage, where the page keeps what a learner would not want to lose on a
//! reload (charted runs, run names, a chapter's edited config, the learner key). A browser
//! without storage (or one that refuses it) keeps nothing and loses nothing else.

use leptos::prelude::window;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The text kept under `key`.
pub fn load(key: &str) -> Option<String> {
    window().local_storage().ok().flatten()?.get_item(key).ok().flatten()
}

/// Keeps `text` under `key`.
pub fn keep(key: &str, text: &str) {
    if let Some(storage) = window().local_storage().ok().flatten() {
        let _ = storage.set_item(key, text);
    }
}

/// The value kept under `key` as JSON, if it reads.
pub fn load_json<T: DeserializeOwned>(key: &str) -> Option<T> {
    serde_json::from_str(&load(key)?).ok()
}

/// Keeps `value` under `key` as JSON.
pub fn keep_json(key: &str, value: &impl Serialize) {
    if let Ok(text) = serde_json::to_string(value) {
        keep(key, &text);
    }
}
