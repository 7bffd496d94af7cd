//! The token, the base path, the Unix socket, and bad requests of every kind: each gets a clear
//! refusal and the server goes on serving.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use scalebook_shared::protocol::{
    ClientMessage, ErrorCode, ErrorReport, PROTOCOL_VERSION, RunId, RunState, Secret, ServerMessage, TOKEN_HEADER,
};

use crate::harness::{Client, Server, assert_private, http_get, http_over, temp_dir, tiny_overrides};

const WAIT: Duration = Duration::from_secs(60);

async fn error(client: &mut Client) -> ErrorReport {
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Error(e) => Some(e.clone()),
            _ => None,
        })
        .await
}

pub(crate) async fn still_serving(client: &mut Client, nonce: u64) {
    client.send(&ClientMessage::Ping { nonce }).await;
    let pong = client.recv_until(WAIT, |m| matches!(m, ServerMessage::Pong { .. }).then(|| m.clone())).await;
    assert_eq!(pong, ServerMessage::Pong { nonce });
}

#[test]
fn the_token_can_come_from_the_environment_and_stay_off_the_command_line() {
    let secret = "from-the-environment-0123456789";
    let server = Server::start_with_env("env-token", &[], &[("SCALEBOOK_TOKEN", secret)]);
    assert_eq!(server.token, secret);
    assert_eq!(http_get(server.addr(), &format!("/api/health?token={secret}"), &[]).status, 200);
    // `--token` wins over the variable, for a one-off start.
    let flag = "from-the-command-line-0123456789";
    let server = Server::start_with_env("flag-token", &["--token", flag], &[("SCALEBOOK_TOKEN", secret)]);
    assert_eq!(server.token, flag);
}

#[test]
fn the_api_and_the_websocket_need_the_token_and_the_page_does_not() {
    let server = Server::start("token", &[]);
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.contains("/#token="), "{}", server.url);
    assert_eq!(server.token.len(), 64);
    let addr = server.addr();
    let token = server.token.as_str();

    let missing = http_get(addr, "/api/health", &[]);
    assert_eq!(missing.status, 401);
    assert!(missing.json()["message"].as_str().unwrap().contains("missing token"));
    let wrong = http_get(addr, "/api/runs?token=0000", &[]);
    assert_eq!(wrong.status, 401);
    assert!(wrong.json()["message"].as_str().unwrap().contains("wrong token"));
    // Cookies are what the proxy forwards from the user's other tabs: never a credential.
    assert_eq!(http_get(addr, "/api/runs", &[("Cookie", &format!("token={token}"))]).status, 401);

    assert_eq!(http_get(addr, &format!("/api/runs?token={token}"), &[]).status, 200);
    assert_eq!(http_get(addr, "/api/configs", &[("Authorization", &format!("Bearer {token}"))]).status, 200);
    // The page's way: a header of Scalebook's own, which a proxy in front leaves alone.
    assert_eq!(http_get(addr, "/api/configs", &[(TOKEN_HEADER, token)]).status, 200);
    assert_eq!(http_get(addr, "/api/configs", &[(TOKEN_HEADER, "wrong-token-0123456789")]).status, 401);
    let page = http_get(addr, "/", &[]);
    assert_eq!(page.status, 200);
    // Every response, the page's and a refusal alike, carries the security headers.
    for response in [&page, &missing] {
        let header = |name: &str| response.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let csp = header("content-security-policy").expect("no Content-Security-Policy");
        assert!(csp.contains("frame-ancestors 'self'") && csp.contains("'wasm-unsafe-eval'"), "{csp}");
        assert_eq!(header("referrer-policy").as_deref(), Some("no-referrer"));
        assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    }
    assert_eq!(http_get(addr, &format!("/?token={token}"), &[]).status, 200);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let refused = Client::connect(&format!("ws://{addr}/api/ws?token=nope")).await.err().expect("connected with a wrong token");
        assert!(refused.to_string().contains("401"), "{refused}");
        // A socket opened without a token (as the page opens it: no URL carries the token)
        // must show one in its first message; anything else is refused, and nothing is sent.
        for first in [
            ClientMessage::ListRuns { before: None },
            ClientMessage::Hello { version: PROTOCOL_VERSION, token: Some(Secret("nope".into())), learner_key: None },
        ] {
            let mut stranger = Client::connect(&format!("ws://{addr}/api/ws")).await.unwrap();
            stranger.send(&first).await;
            match stranger.recv(WAIT).await {
                ServerMessage::Error(report) => assert_eq!(report.code, ErrorCode::Unauthorized),
                other => panic!("a stranger was sent {other:?}"),
            }
        }
        let mut page = Client::connect(&format!("ws://{addr}/api/ws")).await.unwrap();
        page.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token: Some(Secret(token.into())), learner_key: None }).await;
        page.recv_until(WAIT, |m| matches!(m, ServerMessage::Welcome { .. }).then_some(())).await;
        let mut client = server.connect().await;
        client.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None }).await;
        // The presentation as it stands comes as the connection opens, in any order with this.
        let (version, info) = client
            .recv_until(WAIT, |m| match m {
                ServerMessage::Welcome { version, server } => Some((*version, server.clone())),
                _ => None,
            })
            .await;
        assert_eq!(version, PROTOCOL_VERSION);
        assert!(info.configs.iter().any(|c| c == "cpu_tiny"));
        assert_eq!((info.max_message_bytes, info.max_local_ranks), (65536, 1));
        client.send(&ClientMessage::Hello { version: PROTOCOL_VERSION + 1, token: None, learner_key: None }).await;
        assert_eq!(error(&mut client).await.code, ErrorCode::VersionMismatch);
    });
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_the_server_keeps_serving() {
    // A trainer that does not exist: launches are accepted and then fail to start.
    let server = Server::start("bad", &["--trainer", "/nonexistent/scalebook-train"]);
    let mut client = server.connect().await;

    client.send_text("{not json").await;
    let e = error(&mut client).await;
    assert_eq!(e.code, ErrorCode::BadMessage);
    assert!(e.message.contains(&format!("not a message of protocol version {PROTOCOL_VERSION}")), "{}", e.message);

    client.send_text(r#"{"type": "format_disk"}"#).await;
    assert!(error(&mut client).await.message.contains("unknown variant `format_disk`"));

    client.send_text(r#"{"type": "launch", "config": "no_such_config"}"#).await;
    let e = error(&mut client).await;
    assert_eq!(e.code, ErrorCode::InvalidLaunch);
    assert!(e.message.contains("unknown config `no_such_config`"), "{}", e.message);
    assert_eq!(e.problems.0[0].field, "config");

    client.send_text(r#"{"type": "launch", "config": "cpu_tiny", "overrides": ["num_heads=7", "embed_dim=abc", "no_such_key=1"]}"#).await;
    let e = error(&mut client).await;
    assert_eq!(e.code, ErrorCode::InvalidLaunch);
    for field in ["embed_dim", "no_such_key"] {
        assert!(e.problems.for_field(field).next().is_some(), "no problem for {field}: {:?}", e.problems);
    }

    client.send_text(&format!(r#"{{"type": "ping", "pad": "{}"}}"#, "x".repeat(100 << 10))).await;
    let e = error(&mut client).await;
    assert_eq!(e.code, ErrorCode::TooLarge);
    assert!(e.message.contains("the limit is 65536 bytes"), "{}", e.message);

    client.send_binary(vec![0; 16]).await;
    assert!(error(&mut client).await.message.contains("binary messages"));

    for trick in ["../x", "..%2Fx", "/etc/passwd"] {
        client.send_text(&serde_json::json!({"type": "subscribe", "run": trick}).to_string()).await;
        let e = error(&mut client).await;
        assert_eq!(e.code, ErrorCode::BadMessage);
        assert!(e.message.contains("is not a run id"), "{}", e.message);
    }
    client.send(&ClientMessage::Cancel { run: RunId::parse("19990101-000000-1").unwrap() }).await;
    let e = error(&mut client).await;
    assert_eq!((e.code, e.run.unwrap().as_str()), (ErrorCode::UnknownRun, "19990101-000000-1"));

    // A run whose trainer cannot start fails at once with the reason, and leaves its record.
    let id = client.launch("cpu_tiny", vec![]).await;
    let record = server.wait_for(&id, |r| r.state().is_final().then(|| r.clone())).await;
    assert_eq!(record.state(), RunState::Failed);
    assert!(record.reason().unwrap().contains("/nonexistent/scalebook-train is not built"), "{:?}", record.reason());
    client.send(&ClientMessage::Cancel { run: id.clone() }).await;
    assert_eq!(error(&mut client).await.code, ErrorCode::NotCancellable);

    // The REST side: ids and file names from the URL never leave the run's directory.
    let history = server.get(&format!("/api/runs/{id}")).json()["history"].clone();
    assert_eq!(history.as_array().unwrap().last().unwrap()["state"], "failed", "{history}");
    assert_eq!(server.get(&format!("/api/runs/{id}/files/run.json")).json()["id"], id.as_str());
    assert_eq!(server.get("/api/runs/..%2F..%2Fetc/files/run.json").status, 400);
    for name in ["exit.json", "..%2F..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd"] {
        let response = server.get(&format!("/api/runs/{id}/files/{name}"));
        assert_eq!(response.status, 404, "{name}");
        assert_eq!(response.json()["code"], "not_found");
    }
    assert_eq!(server.get("/api/runs/19990101-000000-1").status, 404);

    // Flooding: limited, and felt by the flooder alone.
    let mut flooder = server.connect().await;
    let started = std::time::Instant::now();
    for nonce in 0..300 {
        flooder.send(&ClientMessage::Ping { nonce }).await;
    }
    assert_flood_was_limited(&mut flooder, started, 300).await;
    // Other connections were never affected.
    still_serving(&mut client, 8).await;
}

/// Reads the answers to a flood of `sent` messages sent since `started` (each answered by a
/// pong or an error of its own while under the limit): a burst of 40 passes, plus what refills
/// at 20 a second meanwhile, and the rest is dropped with one `rate_limited` error per flood.
/// The bounds follow from the time the flood took, so a slow, busy machine cannot break them.
async fn assert_flood_was_limited(flooder: &mut Client, started: std::time::Instant, sent: u64) {
    // A sentinel, sent until one passes the limiter: its pong comes after every answer to
    // the flood.
    let (mut answered, mut limited) = (0u64, 0u64);
    let mut resend = tokio::time::interval(Duration::from_millis(250));
    'flood: loop {
        tokio::select! {
            _ = resend.tick() => flooder.send(&ClientMessage::Ping { nonce: 1_000_000 }).await,
            message = flooder.recv(WAIT) => match message {
                ServerMessage::Pong { nonce: 1_000_000 } => break 'flood,
                ServerMessage::Error(e) if e.code == ErrorCode::RateLimited => limited += 1,
                ServerMessage::Pong { .. } | ServerMessage::Error(_) => answered += 1,
                _ => {}
            },
        }
    }
    let refilled = (20.0 * started.elapsed().as_secs_f64()).ceil() as u64;
    assert!((40..=40 + refilled).contains(&answered) && answered < sent, "{answered} answers in {:?}", started.elapsed());
    // Told once per flood: again only after a refilled token let a message through.
    assert!((1..=1 + answered - 40).contains(&limited), "{limited} rate_limited errors for {answered} answers");
}

#[tokio::test]
async fn binary_floods_are_limited_like_text() {
    let server = Server::start("binary-flood", &[]);
    let mut flooder = server.connect().await;
    let started = std::time::Instant::now();
    for _ in 0..2_000 {
        flooder.send_binary(vec![0; 64]).await;
    }
    assert_flood_was_limited(&mut flooder, started, 2_000).await;
    still_serving(&mut server.connect().await, 1).await;
}

#[tokio::test]
async fn a_base_path_serves_the_page_and_api_under_it_and_at_the_root() {
    let base = "/user/ann/proxy/absolute/8080";
    let server = Server::start("base", &["--base-path", &format!("{base}/"), "--heartbeat-secs", "1"]);
    assert!(server.url.ends_with(&format!("{base}/#token={}", server.token)), "{}", server.url);
    assert_eq!(server.viewer_url, server.url.replace(&server.token, &server.viewer_token));
    let addr = server.addr();
    for page in [base.to_owned(), format!("{base}/"), format!("{base}/index.html"), "/".to_owned()] {
        let response = http_get(addr, &page, &[]);
        assert_eq!(response.status, 200, "{page}");
        assert!(response.body.contains("<title>Scalebook</title>"), "{page}");
    }
    assert_eq!(server.get(&format!("{base}/api/health")).json()["status"], "ok");
    assert_eq!(server.get("/api/health").json()["status"], "ok");
    assert_eq!(server.get(&format!("{base}/api/runs")).status, 200);
    assert_eq!(http_get(addr, &format!("{base}/api/runs"), &[]).status, 401);
    assert_eq!(server.get("/user/ann/proxy/absolute/80801/api/health").status, 404);

    let mut client = Client::connect(&format!("ws://{addr}{base}/api/ws?token={}", server.token)).await.unwrap();
    still_serving(&mut client, 1).await;
    // Heartbeats keep an idle socket alive through proxies (20 s by default, 1 s here).
    let beat = client.recv_until(Duration::from_secs(30), |m| matches!(m, ServerMessage::Heartbeat { .. }).then_some(())).await;
    assert_eq!(beat, ());
}

#[test]
fn a_private_unix_socket_needs_no_token() {
    let dir = temp_dir("unix-socket");
    let socket = dir.path().join("scalebook.sock");
    let server = Server::start("unix", &["--unix-socket", socket.to_str().unwrap()]);
    assert_eq!(server.url, format!("unix:{} (no token: only you can open it)", socket.display()));
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let connect = || std::os::unix::net::UnixStream::connect(&socket).unwrap();
    assert_eq!(http_over(connect(), "/api/health", &[]).json()["status"], "ok");
    assert_eq!(http_over(connect(), "/", &[]).status, 200);
}

#[tokio::test]
async fn slurm_fields_are_checked_before_any_script_is_written() {
    let server = Server::start("slurm-fields", &[]);
    let mut client = server.connect().await;
    let launch = |executor: serde_json::Value| serde_json::json!({ "type": "launch", "config": "cpu_tiny", "executor": executor });

    // Hostile values are refused field by field; nothing is created.
    let hostile = serde_json::json!({ "kind": "slurm", "cluster": "perlmutter", "account": "x; rm -rf /", "qos": "q\n#SBATCH --uid=0", "time": "$(reboot)" });
    client.send_text(&launch(hostile).to_string()).await;
    let refused = error(&mut client).await;
    assert_eq!(refused.code, ErrorCode::InvalidLaunch);
    let mut fields: Vec<&str> = refused.problems.0.iter().map(|p| p.field.as_str()).collect();
    fields.sort();
    assert_eq!(fields, ["slurm.account", "slurm.qos", "slurm.time"], "{refused:?}");
    let unknown_field = serde_json::json!({ "kind": "slurm", "cluster": "perlmutter", "script": "rm -rf /" });
    client.send_text(&launch(unknown_field).to_string()).await;
    assert_eq!(error(&mut client).await.code, ErrorCode::BadMessage);
    assert_eq!(server.get("/api/runs").json(), serde_json::json!([]));

    // A preview shows the script from the cluster file's defaults; only Slurm launches have one.
    let mut preview = launch(serde_json::json!({ "kind": "slurm", "cluster": "perlmutter", "gpu": "a100-80gb" }));
    preview["type"] = "preview_slurm".into();
    client.send_text(&preview.to_string()).await;
    let script = client
        .recv_until(WAIT, |m| match m {
            ServerMessage::SlurmScript { script } => Some(script.clone()),
            _ => None,
        })
        .await;
    for line in ["#SBATCH --account=trn011", "#SBATCH --qos=shared", "#SBATCH --constraint=gpu&hbm80g", "#SBATCH --gpus-per-node=1"] {
        assert!(script.lines().any(|l| l == line), "no {line:?} in:\n{script}");
    }
    let mut local = launch(serde_json::json!({ "kind": "local" }));
    local["type"] = "preview_slurm".into();
    client.send_text(&local.to_string()).await;
    let refused = error(&mut client).await;
    assert_eq!((refused.code, refused.problems.0[0].field.as_str()), (ErrorCode::InvalidLaunch, "executor"));
    assert_eq!(server.get("/api/runs").json(), serde_json::json!([]));
    still_serving(&mut client, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_id_of_its_request_through_a_flood() {
    let server = Server::start("request-ids", &["--max-local-ranks", "1"]);
    let mut client = server.connect().await;
    let launch = |id: &str, iters: &str| {
        let overrides = crate::harness::tiny_overrides(&[&format!("num_iters={iters}")]);
        serde_json::json!({ "id": id, "type": "launch", "config": "cpu_tiny", "overrides": overrides }).to_string()
    };
    client.send_text(&launch("first", "4")).await;
    client.send_text(&launch("second", "nonsense")).await;
    // A burst well past the limit, every message with its own id.
    for n in 0..120 {
        client.send_text(&serde_json::json!({ "id": format!("ping-{n}"), "type": "ping", "nonce": n }).to_string()).await;
    }
    let mut answers: BTreeMap<String, ServerMessage> = BTreeMap::new();
    while answers.len() < 122 {
        let reply = client.recv_reply(WAIT).await;
        let Some(id) = reply.id else { continue }; // run updates, heartbeats
        let again = answers.insert(id.as_str().to_owned(), reply.message);
        assert!(again.is_none(), "{id:?} was answered twice");
    }
    assert!(matches!(answers["first"], ServerMessage::Launched { .. }), "{:?}", answers["first"]);
    let ServerMessage::Error(refused) = &answers["second"] else { panic!("{:?}", answers["second"]) };
    assert_eq!((refused.code, refused.problems.0[0].field.as_str()), (ErrorCode::InvalidLaunch, "num_iters"));
    // Each ping got its own pong (same nonce) or its own rate_limited error, never another's.
    let mut limited = 0;
    for n in 0..120 {
        match &answers[&format!("ping-{n}")] {
            ServerMessage::Pong { nonce } => assert_eq!(*nonce, n),
            ServerMessage::Error(e) if e.code == ErrorCode::RateLimited => limited += 1,
            other => panic!("ping-{n}: {other:?}"),
        }
    }
    assert!(limited > 0, "the burst never tripped the limit");
}

#[tokio::test]
async fn the_request_log_names_methods_and_paths_but_never_the_token_or_a_cookie() {
    let server = Server::start_with_env("log", &[], &[("RUST_LOG", "info")]);
    let token = server.token.clone();
    let addr = server.addr();
    assert_eq!(http_get(addr, &format!("/api/runs?token={token}"), &[("Cookie", "jupyterhub-session=cookie-secret")]).status, 200);
    assert_eq!(server.get("/api/health").status, 200);
    let mut client = server.connect().await;
    still_serving(&mut client, 1).await;
    drop(client);
    let deadline = std::time::Instant::now() + WAIT;
    let log = loop {
        let log = std::fs::read_to_string(&server.log).unwrap();
        if log.contains("websocket closed") || std::time::Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for expected in ["path=/api/runs", "path=/api/health", "status=200", "websocket opened", "websocket closed"] {
        assert!(log.contains(expected), "no {expected:?} in the log:\n{log}");
    }
    assert!(!log.contains(&token) && !log.contains("cookie-secret"), "a secret reached the log:\n{log}");
}

/// The answer to request `id`, skipping everything else.
async fn answer_to(client: &mut Client, id: &str) -> ServerMessage {
    loop {
        let reply = client.recv_reply(WAIT).await;
        if reply.id.as_ref().is_some_and(|r| r.as_str() == id) {
            return reply.message;
        }
    }
}

/// The problems of a refused launch of `cpu_tiny` with `overrides`, and the answer's size.
async fn refused(client: &mut Client, id: &str, overrides: &[&str]) -> (Vec<(String, String)>, usize) {
    let launch = serde_json::json!({ "id": id, "type": "launch", "config": "cpu_tiny", "overrides": overrides });
    client.send_text(&launch.to_string()).await;
    let answer = answer_to(client, id).await;
    let size = serde_json::to_string(&answer).unwrap().len();
    let ServerMessage::Error(report) = answer else { panic!("{id} was not refused: {answer:?}") };
    (report.problems.0.into_iter().map(|p| (p.field, p.message)).collect(), size)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_launches_get_short_refusals_by_field_while_everyone_else_is_served() {
    let server = Server::start("hostile-launches", &[]);
    let mut attacker = server.connect().await;
    let mut learner = server.connect().await;
    // An alias bomb: 9 levels of 9 references each, a few hundred bytes that a YAML reader
    // without a budget expands into hundreds of millions of nodes.
    let mut bomb = String::from("img_size=[&a0 [x,x,x,x,x,x,x,x,x]");
    for level in 1..9 {
        bomb += &format!(", &a{level} [{}]", vec![format!("*a{}", level - 1); 9].join(","));
    }
    bomb.push(']');
    let (problems, size) = refused(&mut attacker, "bomb", &[&bomb]).await;
    assert_eq!(problems[0].0, "img_size", "{problems:?}");
    assert!(size < 2_000, "a {size}-byte answer to a {}-byte override", bomb.len());
    still_serving(&mut learner, 1).await;

    let (problems, _) = refused(&mut attacker, "newline", &["expdir=runs\n#SBATCH --uid=0"]).await;
    assert_eq!(problems[0].0, "expdir");
    assert!(problems[0].1.contains("control character"), "{problems:?}");

    let (problems, _) = refused(&mut attacker, "zero", &["global_means_path=/dev/zero"]).await;
    assert_eq!(problems[0].0, "global_means_path");
    assert!(problems[0].1.contains("outside the data directories"), "{problems:?}");

    let greedy = ["num_data_workers=1000000", "depth=1000000", "num_iters=4294967295"];
    let (problems, _) = refused(&mut attacker, "greedy", &greedy).await;
    let fields: Vec<&str> = problems.iter().map(|(field, _)| field.as_str()).collect();
    for field in ["num_data_workers", "depth", "num_iters"] {
        assert!(fields.contains(&field), "{field} not refused: {problems:?}");
    }
    let (problems, _) = refused(&mut attacker, "past a count", &["num_iters=18446744073709551615"]).await;
    assert_eq!(problems[0].0, "num_iters");
    assert!(problems[0].1.contains("at most 4294967295, got 18446744073709551615"), "{problems:?}");
    still_serving(&mut learner, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_silent_or_half_sent_connections_never_lock_the_owner_out() {
    use tokio::io::AsyncWriteExt;

    let server = Server::start("strangers", &[]);
    let mut strangers = Vec::new();
    for n in 0..1000 {
        let mut stranger = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        if n % 2 == 1 {
            // Headers begun, never finished.
            stranger.write_all(b"GET /api/health HTTP/1.1\r\nHost: scalebook\r\n").await.unwrap();
        }
        strangers.push(stranger);
    }
    // The owner's requests, on new connections, are answered.
    assert_eq!(server.get("/api/health").status, 200);
    let mut owner = server.connect().await;
    still_serving(&mut owner, 1).await;
    // The server kept only its share of strangers (256): the rest were closed, oldest first.
    until_closed(&strangers, 1000 - 256, std::time::Instant::now() + WAIT).await;
    still_serving(&mut owner, 2).await;
}

/// Waits until the server has closed at least `count` of `strangers` (each reads an end of
/// file or an error), failing at `deadline`.
pub(crate) async fn until_closed(strangers: &[tokio::net::TcpStream], count: usize, deadline: std::time::Instant) {
    loop {
        let closed = strangers
            .iter()
            .filter(|s| match s.try_read(&mut [0u8; 64]) {
                Ok(n) => n == 0,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            })
            .count();
        if closed >= count {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "only {closed} of {} strangers were closed", strangers.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_files_and_directories_are_its_owners_only() {
    use scalebook_shared::rundir::{EVENTS_DIR, JOB_LOG, MAPS_DIR, METRICS, PROFILE_DIR, RECORD};

    let server = Server::start("private-runs", &[]);
    let mut client = server.connect().await;
    let id = client.launch("cpu_tiny", tiny_overrides(&["profile=2:4"])).await;
    let state = server.wait_for(&id, |r| r.state().is_final().then(|| r.state())).await;
    assert_eq!(state, RunState::Completed);
    // The server's own summary of the profile, written when a page first asks for it.
    let summary = server.get(&format!("/api/runs/{id}/profile/summary"));
    assert_eq!(summary.status, 200, "{}", summary.body);
    let checked = assert_private(&server.runs_dir);
    let run = server.run_dir(&id);
    for file in [RECORD, METRICS, JOB_LOG] {
        assert!(checked.contains(&run.join(file)), "the run wrote no {file}: {checked:?}");
    }
    // The trainer's TensorBoard logdir, maps and traces, and the server's summary beside them.
    for dir in [EVENTS_DIR, MAPS_DIR, PROFILE_DIR] {
        assert!(checked.iter().any(|p| p.parent() == Some(run.join(dir).as_path())), "nothing in {dir}: {checked:?}");
    }
}
