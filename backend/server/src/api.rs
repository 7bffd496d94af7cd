//! The REST side of the API: the configs, the runs and their files. Everything live goes over
//! the WebSocket instead (jupyter-server-proxy buffers ordinary responses).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use scalebook_shared::cluster::Clusters;
use scalebook_shared::protocol::{RunId, RunRecord};
use scalebook_shared::rundir;
use serde_json::json;

use crate::Error;
use crate::code::{self, Snippet};
use crate::state::AppState;

/// An API failure as JSON: `{"code": ..., "message": ...}` with a fitting status.
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "code": self.code, "message": self.message }))).into_response()
    }
}

pub async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

pub async fn configs(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(json!({ "names": state.configs.file.names().collect::<Vec<_>>() }))
}

pub async fn configs_yaml(State(state): State<Arc<AppState>>) -> Response {
    (StatusCode::OK, [("content-type", "text/yaml; charset=utf-8")], state.configs.yaml.clone()).into_response()
}

/// The clusters file, read and validated on each request, for the browser's estimates: hardware
/// figures an instructor may tune while serving (Slurm submissions use the file as loaded at
/// start). Sent as JSON, so the browser needs no YAML reader for it.
pub async fn clusters(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let path = &state.clusters.path;
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "no_clusters", format!("cannot read {}: {e}", path.display())))?;
    let clusters = Clusters::parse(&text)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_clusters", format!("{}: {e}", path.display())))?;
    Ok(Json(clusters).into_response())
}

pub async fn list_runs(State(state): State<Arc<AppState>>) -> Json<Vec<RunRecord>> {
    Json(state.runs.list().await)
}

pub async fn get_run(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<RunRecord>, ApiError> {
    let id = run_id(&id)?;
    state.runs.record(&id).await.map(Json).ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown_run", format!("no run {id}")))
}

/// One of a run's files, from a fixed list (the log, the metrics, the record, the config).
pub async fn run_file(State(state): State<Arc<AppState>>, Path((id, name)): Path<(String, String)>) -> Result<Response, ApiError> {
    let id = run_id(&id)?;
    if state.runs.record(&id).await.is_none() {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "unknown_run", format!("no run {id}")));
    }
    let path = state.runs.store().served_file(&id, &name).ok_or_else(|| {
        let names = rundir::SERVED.join(", ");
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_file",
            format!("a run has no file `{}` to serve; these are: {names}", name.escape_debug()),
        )
    })?;
    let bytes = match tokio::fs::read(&path).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "no_file_yet", format!("run {id} has no {name} (yet)")));
        }
        Err(e) => return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("cannot read {name}: {e}"))),
    };
    let content_type = match name.rsplit('.').next() {
        Some("json") => "application/json",
        Some("jsonl") => "application/jsonl",
        Some("yaml") => "text/yaml; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    };
    Ok((StatusCode::OK, [("content-type", content_type)], bytes).into_response())
}

/// Which item of which file a code block shows.
#[derive(Debug, serde::Deserialize)]
pub struct CodeQuery {
    path: String,
    item: String,
}

/// One item of this project's sources, as the file on disk has it now (read off the async
/// workers).
pub async fn code(State(state): State<Arc<AppState>>, Query(query): Query<CodeQuery>) -> Result<Json<Snippet>, ApiError> {
    let root = state.source_root.clone();
    let found = tokio::task::spawn_blocking(move || code::snippet(&root, &query.path, &query.item))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    found.map(Json).map_err(|e| match e {
        Error::NotSource(_) => ApiError::new(StatusCode::BAD_REQUEST, "not_source", e.to_string()),
        _ => ApiError::new(StatusCode::NOT_FOUND, "no_item", e.to_string()),
    })
}

fn run_id(text: &str) -> Result<RunId, ApiError> {
    RunId::parse(text).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_run_id", e.to_string()))
}
