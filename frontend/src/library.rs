//! What the page reads once from the server: the training configs (`config/ViT.yaml`, the
//! same file the launcher uses), the clusters file for estimates, and the tutorial's baseline
//! curve. Provided as context by the app; blocks show "loading" until their part is here.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::charts::parse_baseline;
use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;
use scalebook_shared::protocol::Series;

use crate::net::{fetch, urls};

/// A file being loaded, loaded and parsed, or failed (with the reason to show).
#[derive(Debug, Clone, PartialEq)]
pub enum Loaded<T> {
    Loading,
    Ready(T),
    Failed(String),
}

impl<T: Clone> Loaded<T> {
    pub fn ready(&self) -> Option<T> {
        match self {
            Loaded::Ready(value) => Some(value.clone()),
            _ => None,
        }
    }
}

#[derive(Clone, Copy)]
pub struct Library {
    pub configs: RwSignal<Loaded<Arc<ConfigFile>>>,
    pub clusters: RwSignal<Loaded<Arc<Clusters>>>,
    pub baseline: RwSignal<Loaded<Arc<Vec<Series>>>>,
}

impl Library {
    /// Starts loading all three files.
    pub fn load() -> Library {
        let library = Library {
            configs: RwSignal::new(Loaded::Loading),
            clusters: RwSignal::new(Loaded::Loading),
            baseline: RwSignal::new(Loaded::Loading),
        };
        fetch_into(urls::api("configs.yaml"), library.configs, |text| ConfigFile::parse(text).map_err(|e| e.to_string()));
        fetch_into(urls::api("clusters.json"), library.clusters, |text| serde_json::from_str::<Clusters>(text).map_err(|e| e.to_string()));
        fetch_into(urls::resolve("reference/baseline-base-1gpu.csv"), library.baseline, |text| {
            parse_baseline(text).map_err(|e| e.to_string())
        });
        library
    }
}

fn fetch_into<T: Send + Sync + 'static>(
    url: String,
    target: RwSignal<Loaded<Arc<T>>>,
    parse: impl FnOnce(&str) -> Result<T, String> + 'static,
) {
    leptos::task::spawn_local(async move {
        let loaded = match fetch::text(&url).await.and_then(|text| parse(&text)) {
            Ok(value) => Loaded::Ready(Arc::new(value)),
            Err(message) => Loaded::Failed(message),
        };
        target.set(loaded);
    });
}

/// Shows `children` with the loaded value, or a line saying what is missing.
pub fn when_ready<T, V>(what: &'static str, loaded: Loaded<T>, children: impl FnOnce(T) -> V) -> AnyView
where
    V: IntoView + 'static,
{
    match loaded {
        Loaded::Loading => view! { <p class="muted">"Loading the " {what} "…"</p> }.into_any(),
        Loaded::Failed(message) => view! { <p class="error" role="alert">"Cannot load the " {what} ": " {message}</p> }.into_any(),
        Loaded::Ready(value) => children(value).into_view().into_any(),
    }
}
