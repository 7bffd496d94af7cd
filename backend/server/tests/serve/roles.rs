//! The two links: the instructor's launches and cancels; the viewer's, handed to the room,
//! reads and follows everything and is refused every launch, cancel and Slurm preview.

use std::collections::BTreeMap;
use std::time::Duration;

use scalebook_server::auth::Token;
use scalebook_shared::protocol::{ClientMessage, ErrorCode, ErrorReport, PROTOCOL_VERSION, Role, RunId, RunState, ServerMessage};

use crate::harness::{Client, Server, assert_all_points, follow_to_end, http_get, http_request, tiny_overrides};

const WAIT: Duration = Duration::from_secs(60);

/// The role `welcome` announces to `client`.
pub async fn role(client: &mut Client) -> Role {
    client.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None }).await;
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Welcome { server, .. } => Some(server.role),
            _ => None,
        })
        .await
}

/// The answer to `text`: the error it got, or `None` when it was accepted without one (a ping
/// sent after it is answered first).
pub async fn refusal<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(client: &mut Client<S>, text: &str) -> Option<ErrorReport> {
    client.send_text(text).await;
    client.send(&ClientMessage::Ping { nonce: 77 }).await;
    let mut refused = None;
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Error(e) => {
                refused = Some(e.clone());
                None
            }
            ServerMessage::Pong { nonce: 77 } => Some(()),
            _ => None,
        })
        .await;
    refused
}

fn assert_forbidden(refused: Option<ErrorReport>, what: &str) {
    let e = refused.unwrap_or_else(|| panic!("a viewer's {what} was accepted"));
    assert_eq!(e.code, ErrorCode::Forbidden, "{e:?}");
    assert!(e.message.contains("only the instructor's link can; ask your instructor"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_follows_and_reads_a_run_but_cannot_launch_cancel_or_submit() {
    let server = Server::start("roles", &[]);
    assert_eq!(server.viewer_token, Token::given(&server.token).unwrap().viewer().as_str());
    let mut instructor = server.connect().await;
    let mut viewer = server.connect_viewer().await;
    assert_eq!(role(&mut instructor).await, Role::Instructor);
    assert_eq!(role(&mut viewer).await, Role::Viewer);

    let launch = serde_json::json!({ "type": "launch", "config": "cpu_tiny", "overrides": tiny_overrides(&["num_iters=24"]) });
    assert_forbidden(refusal(&mut viewer, &launch.to_string()).await, "launch");
    let slurm =
        serde_json::json!({ "type": "preview_slurm", "config": "cpu_tiny", "executor": { "kind": "slurm", "cluster": "perlmutter" } });
    assert_forbidden(refusal(&mut viewer, &slurm.to_string()).await, "Slurm preview");
    let submit = serde_json::json!({ "type": "launch", "config": "cpu_tiny", "executor": { "kind": "slurm", "cluster": "perlmutter" } });
    assert_forbidden(refusal(&mut viewer, &submit.to_string()).await, "Slurm submission");
    assert!(std::fs::read_dir(&server.runs_dir).unwrap().next().is_none(), "a viewer's request created a run");

    // The instructor still launches; the viewer follows the run to its end, every point.
    let id = instructor.launch("cpu_tiny", tiny_overrides(&["num_iters=24"])).await;
    let cancel = serde_json::json!({ "type": "cancel", "run": id });
    let refused = refusal(&mut viewer, &cancel.to_string()).await;
    assert_eq!(refused.as_ref().and_then(|e| e.run.clone()), Some(id.clone()));
    assert_forbidden(refused, "cancel");
    assert_eq!(refusal(&mut viewer, &serde_json::json!({ "type": "subscribe", "run": id }).to_string()).await, None);
    let run_dir = server.runs_dir.join(id.as_str());
    let mut seen = BTreeMap::new();
    let followed = follow_to_end(&mut viewer, &id, &run_dir, &mut seen).await;
    assert_eq!(followed.state, RunState::Completed, "the viewer's cancel stopped the run");
    assert_all_points(&seen, &run_dir);
    viewer.send(&ClientMessage::ListRuns { before: None }).await;
    let listed = viewer.recv_until(WAIT, |m| matches!(m, ServerMessage::Runs { .. }).then(|| m.clone())).await;
    assert!(matches!(listed, ServerMessage::Runs { ref runs, .. } if runs.iter().any(|r| r.id == id)), "{listed:?}");
    assert_eq!(refusal(&mut viewer, &serde_json::json!({ "type": "unsubscribe", "run": id }).to_string()).await, None);
    assert_reads_but_writes_nothing_over_http(&server, &id);
}

/// Every GET of the API answers the viewer link as it answers the instructor's; a request of
/// another method is forbidden to the viewer (the instructor's gets the router's answer), and
/// a token that is neither is still unauthorized.
fn assert_reads_but_writes_nothing_over_http(server: &Server, id: &RunId) {
    let viewer = format!("Bearer {}", server.viewer_token);
    let reads = [
        "/api/health".to_owned(),
        "/api/configs".to_owned(),
        "/api/configs.yaml".to_owned(),
        "/api/configs.json".to_owned(),
        "/api/clusters.json".to_owned(),
        "/api/runs".to_owned(),
        format!("/api/runs/{id}"),
        format!("/api/runs/{id}/files/metrics.jsonl"),
        format!("/api/runs/{id}/files/job.log"),
        "/api/code?path=shared/src/protocol/role.rs&item=Role".to_owned(),
    ];
    for path in &reads {
        let (as_viewer, as_instructor) = (http_get(server.addr(), path, &[("Authorization", &viewer)]), server.get(path));
        assert_eq!((as_viewer.status, &as_viewer.body), (as_instructor.status, &as_instructor.body), "{path}");
    }
    assert_eq!(http_get(server.addr(), &format!("/api/runs?token={}", server.viewer_token), &[]).status, 200);
    let connect = || std::net::TcpStream::connect(server.addr()).unwrap();
    for method in ["POST", "PUT", "DELETE"] {
        let refused = http_request(connect(), method, &format!("/api/runs/{id}"), &[("Authorization", &viewer)]);
        assert_eq!((refused.status, refused.json()["code"].as_str()), (403, Some("forbidden")), "{method}");
        let instructor = format!("Bearer {}", server.token);
        assert_eq!(http_request(connect(), method, &format!("/api/runs/{id}"), &[("Authorization", &instructor)]).status, 405);
    }
    let wrong = format!("{}0", server.viewer_token);
    assert_eq!(http_get(server.addr(), &format!("/api/runs?token={wrong}"), &[]).status, 401);
}

#[tokio::test]
async fn a_wrong_token_is_refused_before_any_role() {
    let server = Server::start("roles-wrong", &[]);
    let addr = server.addr();
    for token in [&server.viewer_token[1..], "not-the-token-0123456789abcdef"] {
        let refused = Client::connect(&format!("ws://{addr}/api/ws?token={token}")).await.err().expect("connected with a wrong token");
        assert!(refused.to_string().contains("401"), "{refused}");
    }
}

#[test]
fn the_viewer_token_follows_a_fixed_instructor_token_or_is_given() {
    let secret = "classroom-instructor-0123456789";
    let first = Server::start_with_env("viewer-derived", &[], &[("SCALEBOOK_TOKEN", secret)]);
    let again = Server::start_with_env("viewer-derived-again", &[], &[("SCALEBOOK_TOKEN", secret)]);
    // A restart with the same instructor token hands out the same viewer link.
    assert_eq!(first.viewer_token, again.viewer_token);
    assert_ne!(first.viewer_token, secret);
    let room = "the-room-token-0123456789";
    let given = Server::start_with_env("viewer-given", &[], &[("SCALEBOOK_TOKEN", secret), ("SCALEBOOK_VIEWER_TOKEN", room)]);
    assert_eq!(given.viewer_token, room);
    let flag = Server::start_with_env("viewer-flag", &["--viewer-token", "from-the-flag-0123456789"], &[("SCALEBOOK_VIEWER_TOKEN", room)]);
    assert_eq!(flag.viewer_token, "from-the-flag-0123456789");
    assert_eq!(http_get(given.addr(), &format!("/api/health?token={room}"), &[]).status, 200);
}
