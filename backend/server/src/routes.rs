//! The routes: the page, the built front-end and chapter files ([`static_files`]), the JSON API and the
//! WebSocket under `/api`, the token check (which also decides the request's role) in front of
//! the API, and the optional base path in front of everything.
//!
//! Every URL the page uses is relative, so the same router works at `/` and behind
//! jupyter-server-proxy, which strips its `{base}/proxy/PORT` prefix before forwarding.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use tower::ServiceExt as _;
use tower::util::MapRequest;
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::compression::CompressionLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

use crate::auth::{self, Keyring};
use crate::base_path::BasePath;
use crate::class::{ClassKey, upstream};
use crate::state::AppState;
use crate::{Error, api, headers, static_files, ws};

/// The app at the root, with the API for whoever the keyring admits (`Keyring::Private`: as
/// the instructor, to anyone who can connect, only for a private Unix socket). Every response
/// carries the security headers of [`headers`].
pub fn router(state: Arc<AppState>, static_dir: PathBuf, keyring: Keyring) -> Result<Router, Error> {
    let security = Arc::new(headers::for_page(&static_dir)?);
    let api = Router::new()
        .route("/health", get(api::health))
        .route("/configs", get(api::configs))
        .route("/configs.yaml", get(api::configs_yaml))
        // Every config with every key (about 18 kB): compressed, as the page reads it on the
        // first visit (jupyter-server-proxy passes compressed bodies through).
        .route("/configs.json", get(api::configs_json).layer(CompressionLayer::new().br(true).gzip(true)))
        .route("/clusters.json", get(api::clusters))
        .route("/machine.json", get(api::machine))
        .route("/runs", get(api::list_runs))
        .route("/runs/{id}", get(api::get_run))
        .route("/runs/{id}/files/{name}", get(api::run_file))
        .route("/runs/{id}/profile", get(api::run_profile))
        .route("/runs/{id}/profile/summary", get(api::run_profile_summary))
        .route("/runs/{id}/placement", get(api::run_placement))
        .route("/runs/{id}/profile/{rank}", get(api::run_profile_trace))
        .route("/runs/{id}/maps", get(api::run_maps))
        .route("/runs/{id}/maps/{file}", get(api::run_map))
        .route("/data/sample", get(api::data_sample))
        .route("/code", get(api::code))
        .route("/ws", get(ws::upgrade))
        .route_layer(from_fn_with_state(state.following.clone(), upstream::class_run_files))
        // Behind the token check too: a stranger learns nothing of the API, not even its routes.
        .fallback(api::no_route)
        .layer(from_fn_with_state(keyring, auth::authorize));
    Ok(Router::new()
        .nest("/api", api)
        .merge(static_files::router(static_dir))
        .layer(from_fn_with_state(security, headers::add))
        .layer(request_log())
        .with_state(state))
}

/// The class listener's app: the WebSocket a follower server joins through (the presentation
/// and the instructor's runs; every launch, cancel and submission refused by its role), the
/// files of the instructor's own runs, and the health check, for the follower token alone.
/// No page, no run list, no configs, nothing else.
pub fn class_router(state: Arc<AppState>, key: Arc<ClassKey>) -> Router {
    let api = Router::new()
        .route("/health", get(api::health))
        .route("/runs/{id}/files/{name}", get(api::run_file))
        .route("/runs/{id}/profile", get(api::run_profile))
        .route("/runs/{id}/profile/summary", get(api::run_profile_summary))
        .route("/runs/{id}/profile/{rank}", get(api::run_profile_trace))
        .route("/runs/{id}/maps", get(api::run_maps))
        .route("/runs/{id}/maps/{file}", get(api::run_map))
        .route("/ws", get(ws::upgrade))
        .route_layer(from_fn_with_state(state.runs.clone(), upstream::instructors_runs_only))
        .layer(from_fn_with_state(Keyring::Class(key), auth::authorize));
    Router::new().nest("/api", api).layer(request_log()).with_state(state)
}

/// The request log's layer (see [`request_log`]).
type RequestLog = TraceLayer<SharedClassifier<ServerErrorsAsFailures>, fn(&Request) -> tracing::Span, (), DefaultOnResponse>;

/// One line per request: method, path, status and latency. The span holds the path only,
/// never the query or the headers, so neither a token (`?token=`, `Authorization`) nor a
/// cookie reaches the log.
fn request_log() -> RequestLog {
    fn span(request: &Request) -> tracing::Span {
        tracing::info_span!("http", method = %request.method(), path = %request.uri().path())
    }
    TraceLayer::new_for_http()
        .make_span_with(span as fn(&Request) -> tracing::Span)
        .on_request(())
        .on_response(DefaultOnResponse::new().level(tracing::Level::INFO))
}

/// The app as served: under `base` when there is one (and at the root too, see
/// [`crate::base_path`]).
pub fn service(router: Router, base: Option<BasePath>) -> MapRequest<Router, impl FnMut(Request) -> Request + Clone + Send + 'static> {
    router.map_request(move |request| match &base {
        Some(base) => base.rewrite(request),
        None => request,
    })
}
