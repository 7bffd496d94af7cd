//! The routes in process (`Router::oneshot`, no socket, no server process): status codes, the
//! security headers on every answer, the token check in front of the whole API (so a stranger
//! learns nothing, not even which routes exist), and the typed refusal REST answers with.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use scalebook_server::auth::{Keyring, Token, Tokens};
use scalebook_server::class::follow::{Following, Me};
use scalebook_server::class::shared::SharedRuns;
use scalebook_server::classroom::Classroom;
use scalebook_server::executor::TrainerCommand;
use scalebook_server::executor::local::LocalExecutor;
use scalebook_server::executor::slurm::{SlurmCommands, SlurmExecutor};
use scalebook_server::limits::LaunchLimits;
use scalebook_server::predict::Predictor;
use scalebook_server::routes;
use scalebook_server::runs::{Executors, RunManager};
use scalebook_server::state::{AppState, ClustersFile, Configs, WsSettings};
use scalebook_server::store::RunStore;
use scalebook_shared::protocol::TOKEN_HEADER;
use tempfile::TempDir;
use tower::ServiceExt as _;

use crate::harness::{temp_dir, workspace, write_stub_page};

/// The app as `scalebook serve` routes it, over a runs directory and a page of the test's.
struct App {
    router: Router,
    tokens: Arc<Tokens>,
    _dir: TempDir,
}

fn app() -> App {
    let dir = temp_dir("routes");
    let static_dir = dir.path().join("static");
    write_stub_page(&static_dir);
    let configs = Configs::load(&workspace().join("config/ViT.yaml")).unwrap();
    let clusters = ClustersFile::load(&workspace().join("config/clusters.yaml")).unwrap();
    let command = TrainerCommand { trainer: "/nonexistent/scalebook-train".into(), workdir: workspace() };
    let executors = Executors {
        local: LocalExecutor { supervisor: "/nonexistent/scalebook".into(), command: command.clone() },
        max_local_ranks: 1,
        slurm: SlurmExecutor::new(command, SlurmCommands::new(None), Duration::from_secs(30)),
        predictor: Predictor::new(clusters.clusters.clone(), dir.path().join("machine.json"), "/nonexistent/scalebook-train".into()),
    };
    let runs = RunManager::open(RunStore::open(&dir.path().join("runs")).unwrap(), executors).unwrap();
    let classroom = Arc::<Classroom>::default();
    let state = Arc::new(AppState {
        source_root: configs.project_root(),
        configs,
        clusters,
        limits: LaunchLimits::of_this_machine(&workspace(), &[]).unwrap(),
        ws: WsSettings::default(),
        class: None,
        shared: SharedRuns::new(runs.clone()),
        following: Following::new(runs.clone(), classroom.clone(), Me::new(Some("tester"), false)),
        classroom,
        runs,
        identities: Default::default(),
        launch_rates: Default::default(),
    });
    let tokens = Arc::new(Tokens::new(Token::generate().unwrap(), None).unwrap());
    let router = routes::router(state, static_dir, Keyring::Links(tokens.clone())).unwrap();
    App { router, tokens, _dir: dir }
}

/// The answer to `method path` with `token` (in the page's header), and its body as JSON.
async fn ask(app: &App, method: &str, path: &str, token: Option<&str>) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header(TOKEN_HEADER, token);
    }
    let response = app.router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, serde_json::from_slice(&bytes).unwrap_or_default())
}

#[tokio::test]
async fn the_api_answers_strangers_nothing_but_unauthorized_and_every_answer_carries_the_security_headers() {
    let app = app();
    for path in ["/api/runs", "/api/no/such/route", "/api/runs/r1/files/run.json"] {
        let (status, headers, body) = ask(&app, "GET", path, None).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("unauthorized")), "{path}: {body}");
        assert_eq!(headers.get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]), "{path}");
    }
    let (status, headers, _) = ask(&app, "GET", "/", None).await;
    assert_eq!(status, StatusCode::OK, "the page itself needs no token");
    assert!(headers.contains_key("content-security-policy"), "{headers:?}");
}

#[tokio::test]
async fn refusals_are_the_websockets_typed_reports_with_a_fitting_status() {
    let app = app();
    let instructor = Some(app.tokens.instructor().as_str().to_owned());
    let token = instructor.as_deref();
    let (status, _, body) = ask(&app, "GET", "/api/runs/r1", token).await;
    assert_eq!((status, body["code"].as_str(), body["run"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_run"), Some("r1")));
    let (status, _, body) = ask(&app, "GET", "/api/runs/..%2Fetc", token).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_request")), "{body}");
    assert_eq!(body["problems"][0]["field"], "run", "{body}");
    let (status, _, body) = ask(&app, "GET", "/api/code?path=../../etc/passwd&item=x", token).await;
    assert_eq!((status, body["problems"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("path")), "{body}");
    let (status, _, body) = ask(&app, "GET", "/api/no/such/route", token).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{body}");
    let (status, _, body) = ask(&app, "GET", "/api/runs", token).await;
    assert_eq!((status, body), (StatusCode::OK, serde_json::json!([])));
}

#[tokio::test]
async fn the_viewer_link_only_reads_whatever_the_route() {
    let app = app();
    let viewer = app.tokens.viewer().as_str().to_owned();
    let (status, _, _) = ask(&app, "GET", "/api/configs", Some(&viewer)).await;
    assert_eq!(status, StatusCode::OK);
    for method in ["POST", "PUT", "DELETE"] {
        let (status, _, body) = ask(&app, method, "/api/runs", Some(&viewer)).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{method}: {body}");
    }
}

#[tokio::test]
async fn a_static_path_with_a_nul_byte_is_not_found_whatever_the_method() {
    let app = app();
    for method in ["HEAD", "GET"] {
        for path in ["/dist/%00", "/dist/a%00b.js", "/%00"] {
            let (status, _, _) = ask(&app, method, path, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        }
    }
}
