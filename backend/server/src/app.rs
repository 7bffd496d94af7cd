//! The router: the built front-end and chapter files as static files, plus a small JSON API.
//!
//! Every URL the page uses is relative, so the same router works at `/` and behind
//! jupyter-server-proxy, which strips its `{base}/proxy/PORT` prefix before forwarding.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use scalebook_shared::config::ConfigFile;
use serde_json::json;
use tower_http::services::ServeDir;

use crate::Error;

/// What every request handler may read.
#[derive(Debug)]
pub struct AppState {
    /// The parsed `config/ViT.yaml`; the browser and the launcher must agree on it.
    pub configs: ConfigFile,
    /// The raw text of that file, served to the browser's editor unchanged.
    pub configs_yaml: String,
}

impl AppState {
    /// Loads the config file once at start-up, so a typo in it stops the server with a clear
    /// message instead of failing later in the middle of a demo.
    pub fn load(config_path: &Path) -> Result<Self, Error> {
        let wrap = |source: Box<dyn std::error::Error + Send + Sync>| Error::ConfigFile { path: config_path.to_owned(), source };
        let configs_yaml = std::fs::read_to_string(config_path).map_err(|e| wrap(Box::new(e)))?;
        let configs = ConfigFile::parse(&configs_yaml).map_err(|e| wrap(Box::new(e)))?;
        Ok(AppState { configs, configs_yaml })
    }
}

/// Checks that `dir` holds what the page needs before the server starts.
pub fn check_static_dir(dir: &Path) -> Result<(), Error> {
    for missing in ["index.html", "dist/scalebook.js", "dist/scalebook_bg.wasm"] {
        if !dir.join(missing).is_file() {
            return Err(Error::FrontendNotBuilt { dir: dir.to_owned(), missing });
        }
    }
    Ok(())
}

pub fn router(state: AppState, static_dir: PathBuf) -> Router {
    let api = Router::new()
        .route("/health", get(|| async { Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") })) }))
        .route("/configs", get(configs))
        .route("/configs.yaml", get(configs_yaml));
    Router::new()
        .nest("/api", api)
        .fallback_service(ServeDir::new(static_dir))
        .with_state(Arc::new(state))
}

async fn configs(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(json!({ "names": state.configs.names().collect::<Vec<_>>() }))
}

async fn configs_yaml(State(state): State<Arc<AppState>>) -> Response {
    (StatusCode::OK, [("content-type", "text/yaml; charset=utf-8")], state.configs_yaml.clone()).into_response()
}
