//! The router: the page, the built front-end and chapter files ([`static_files`]), the JSON API and the
//! WebSocket under `/api`, the token check in front of the API, and the optional base path in
//! front of everything.
//!
//! Every URL the page uses is relative, so the same router works at `/` and behind
//! jupyter-server-proxy, which strips its `{base}/proxy/PORT` prefix before forwarding.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;
use tower::ServiceExt as _;
use tower::util::MapRequest;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

use crate::auth::{self, Token};
use crate::base_path::BasePath;
use crate::runs::RunManager;
use crate::{Error, api, static_files, ws};

/// The training configs the notebook offers and launches run from.
#[derive(Debug)]
pub struct Configs {
    /// The parsed `config/ViT.yaml`; the browser and the launcher must agree on it.
    pub file: ConfigFile,
    /// The raw text of that file, served to the browser's editor unchanged.
    pub yaml: String,
    /// Where it is (absolute).
    pub path: PathBuf,
}

impl Configs {
    /// Loads the config file once at start-up, so a typo in it stops the server with a clear
    /// message instead of failing later in the middle of a demo.
    pub fn load(config_path: &Path) -> Result<Configs, Error> {
        let wrap = |source: Box<dyn std::error::Error + Send + Sync>| Error::ConfigFile { path: config_path.to_owned(), source };
        let yaml = std::fs::read_to_string(config_path).map_err(|e| wrap(Box::new(e)))?;
        let file = ConfigFile::parse(&yaml).map_err(|e| wrap(Box::new(e)))?;
        let path = std::fs::canonicalize(config_path).map_err(|e| wrap(Box::new(e)))?;
        Ok(Configs { file, yaml, path })
    }
}

/// The clusters file (`config/clusters.yaml` by default): where Slurm runs may go.
#[derive(Debug)]
pub struct ClustersFile {
    pub path: PathBuf,
    /// `None` when there is no such file: the server then runs local runs only.
    pub clusters: Option<Clusters>,
}

impl ClustersFile {
    /// Loads the file once at start-up; a broken one stops the server with its problems,
    /// a missing one only disables Slurm launches.
    pub fn load(path: &Path) -> Result<ClustersFile, Error> {
        let wrap = |source: Box<dyn std::error::Error + Send + Sync>| Error::ConfigFile { path: path.to_owned(), source };
        let clusters = match std::fs::read_to_string(path) {
            Ok(text) => Some(Clusters::parse(&text).map_err(|e| wrap(Box::new(e)))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(wrap(Box::new(e))),
        };
        Ok(ClustersFile { path: path.to_owned(), clusters })
    }
}

/// Limits and timings of the WebSocket.
#[derive(Debug, Clone)]
pub struct WsSettings {
    /// The largest message read; larger ones are refused with an error.
    pub max_message_bytes: usize,
    pub heartbeat: Duration,
    /// Messages per second a connection may send on average...
    pub messages_per_sec: f64,
    /// ...and in a burst.
    pub burst: f64,
}

impl Default for WsSettings {
    fn default() -> Self {
        WsSettings { max_message_bytes: 64 << 10, heartbeat: Duration::from_secs(20), messages_per_sec: 20.0, burst: 40.0 }
    }
}

/// What every request handler may read.
pub struct AppState {
    pub configs: Configs,
    pub clusters: ClustersFile,
    pub runs: Arc<RunManager>,
    pub ws: WsSettings,
}

/// The app at the root. `token: None` serves the API to anyone who can connect (only for a
/// private Unix socket).
pub fn router(state: Arc<AppState>, static_dir: PathBuf, token: Option<Token>) -> Router {
    let api = Router::new()
        .route("/health", get(api::health))
        .route("/configs", get(api::configs))
        .route("/configs.yaml", get(api::configs_yaml))
        .route("/clusters.json", get(api::clusters))
        .route("/runs", get(api::list_runs))
        .route("/runs/{id}", get(api::get_run))
        .route("/runs/{id}/files/{name}", get(api::run_file))
        .route("/ws", get(ws::upgrade))
        .layer(from_fn_with_state(token.map(Arc::new), auth::require_token));
    // One line per request: method, path, status and latency. The span holds the path only,
    // never the query or the headers, so neither the token (`?token=`, `Authorization`) nor a
    // cookie reaches the log.
    let request_log = TraceLayer::new_for_http()
        .make_span_with(|request: &Request| tracing::info_span!("http", method = %request.method(), path = %request.uri().path()))
        .on_request(())
        .on_response(DefaultOnResponse::new().level(tracing::Level::INFO));
    Router::new().nest("/api", api).merge(static_files::router(static_dir)).layer(request_log).with_state(state)
}

/// The app as served: under `base` when there is one (and at the root too, see
/// [`crate::base_path`]).
pub fn service(router: Router, base: Option<BasePath>) -> MapRequest<Router, impl FnMut(Request) -> Request + Clone + Send + 'static> {
    router.map_request(move |request| match &base {
        Some(base) => base.rewrite(request),
        None => request,
    })
}
