//! What the page reads once from the server: the training configs (`config/ViT.yaml`, the
//! same file the launcher uses, typed by the server and sent as JSON), the clusters file for estimates, and the tutorial's baseline
//! curve (a TensorBoard event file, read with the same reader as a file dropped on a chart).
//! Each is a [`LocalResource`] provided as context by the app; blocks show "loading" (a
//! `Suspense`) until their part is here, and the reason (an `ErrorBoundary`) if it fails.

use std::future::Future;
use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::charts::parse_baseline_events;
use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;
use scalebook_shared::protocol::Series;

use crate::net::{fetch, urls};

/// Why a file the page needs did not load: the server's message, or why it does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("Cannot load the {what}: {message}")]
pub struct LoadError {
    what: &'static str,
    message: String,
}

/// A part of the module (`blocks::deferred`) that could not be fetched.
#[cfg(scalebook_split)]
impl From<leptos::wasm_split::SplitLoaderError> for LoadError {
    fn from(e: leptos::wasm_split::SplitLoaderError) -> LoadError {
        LoadError { what: "block's part of the module (reload the page to try again)", message: e.to_string() }
    }
}

/// A file being fetched and parsed once, shared by every block that reads it.
pub type Loading<T> = LocalResource<Result<Arc<T>, LoadError>>;

/// Fetches `url` (the `what` of the messages) and parses it as text.
pub fn load<T: 'static>(what: &'static str, url: String, parse: fn(&str) -> Result<T, String>) -> Loading<T> {
    // Decoded as `Response.text()` decodes: UTF-8, a byte-order mark dropped.
    load_bytes(what, url, move |bytes| parse(&String::from_utf8_lossy(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes))))
}

/// Fetches `url` (the `what` of the messages) and parses its bytes.
pub fn load_bytes<T: 'static>(what: &'static str, url: String, parse: impl Fn(&[u8]) -> Result<T, String> + Copy + 'static) -> Loading<T> {
    LocalResource::new(move || {
        let url = url.clone();
        async move {
            let bytes = fetch::bytes(&url).await.map_err(|message| LoadError { what, message })?;
            parse(&bytes).map(Arc::new).map_err(|message| LoadError { what, message })
        }
    })
}

/// The value of a [`Loading`] once it is here (a tracked read).
pub trait Ready<T> {
    fn ready(&self) -> Option<Arc<T>>;
}

impl<T: 'static> Ready<T> for Loading<T> {
    fn ready(&self) -> Option<Arc<T>> {
        self.get().and_then(Result::ok)
    }
}

#[derive(Clone, Copy)]
pub struct Library {
    pub configs: Loading<ConfigFile>,
    pub clusters: Loading<Clusters>,
    pub baseline: Loading<Vec<Series>>,
}

impl Library {
    /// Starts loading all three files.
    pub fn load() -> Library {
        Library {
            configs: load("training configs", urls::api("configs.json"), |text| serde_json::from_str(text).map_err(|e| e.to_string())),
            clusters: load("clusters", urls::api("clusters.json"), |text| serde_json::from_str(text).map_err(|e| e.to_string())),
            baseline: load_bytes("baseline", urls::resolve("reference/baseline-base-1gpu.tfevents"), |bytes| {
                parse_baseline_events(bytes).map_err(|e| e.to_string())
            }),
        }
    }
}

impl Library {
    /// Loads the server's files again where they failed (the page had no token, and has one
    /// now).
    pub fn retry_failed(&self) {
        if self.configs.get_untracked().is_some_and(|loaded| loaded.is_err()) {
            self.configs.refetch();
        }
        if self.clusters.get_untracked().is_some_and(|loaded| loaded.is_err()) {
            self.clusters.refetch();
        }
    }
}

/// Shows `children` with what `loaded` yields: "Loading the …" until it is here, and the
/// reason if it cannot be loaded.
pub fn when_loaded<T, F, V>(
    what: &'static str,
    loaded: impl Fn() -> F + Send + Sync + 'static,
    children: impl Fn(T) -> V + Send + Sync + 'static,
) -> impl IntoView
where
    F: Future<Output = Result<T, LoadError>> + Send + 'static,
    T: Send + 'static,
    V: IntoView + 'static,
{
    let children = Arc::new(children);
    let show = move || {
        let future = loaded();
        let children = children.clone();
        Suspend::new(async move { future.await.map(|value| children(value).into_view().into_any()) })
    };
    view! {
        <Suspense fallback=move || view! { <p class="muted">"Loading the " {what} "…"</p> }>
            <ErrorBoundary fallback=|errors| {
                view! {
                    <p class="error" role="alert">
                        {move || errors.get().into_iter().map(|(_, e)| e.to_string()).collect::<Vec<_>>().join(" ")}
                    </p>
                }
            }>{show}</ErrorBoundary>
        </Suspense>
    }
}
