//! The data and maps blocks' requests, answered into the block's own signals. A resource read
//! under the chapter's `Suspense` would send the whole chapter back to its fallback on every new
//! request (rebuilding every block and dropping the keyboard focus mid-typing); a task that
//! writes a signal touches only the block that asked.

use serde::de::DeserializeOwned;

use crate::net::fetch;

/// Fetches `url` and hands `answer` the parsed body, or the server's message.
pub fn fetch_json<T: DeserializeOwned + 'static>(url: String, answer: impl FnOnce(Result<T, String>) + 'static) {
    leptos::task::spawn_local(async move {
        let text = fetch::text(&url).await;
        answer(text.and_then(|t| serde_json::from_str(&t).map_err(|e| format!("the server's answer does not parse: {e}"))));
    });
}
