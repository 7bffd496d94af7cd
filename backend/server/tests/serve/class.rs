//! The class of many servers over the protocol: the class listener takes the follower token
//! only and refuses everything but reading and following; a follower server pins the class
//! listener's certificate, relays the presentation, copies the instructor's runs with every
//! point exactly once across a 10 s outage, and shows on the instructor's roster, where the
//! instructor charts a learner's run, copied from the learner's server; a follower is who the
//! listener finds (the account of its connection, or its invitation's learner), not the name it
//! gives: nobody writes into another's copy, Remove bars the person under any name, and a new
//! class link disconnects the old one's followers and ends its invitations.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use scalebook_server::class::tls::{self, Unreached, Wire};
use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::protocol::{
    ClassAddress, ClassLink, ClassState, ClientMessage, ErrorCode, Follower, FollowerIdentity, Introduction, MAX_SUMMARISED_RUNS,
    PROTOCOL_VERSION, Presentation, Role, RunId, RunSummary, Secret, ServerMessage, shared_copy_id,
};
use scalebook_shared::weather::MapIndex;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::harness::{Client, RUN_TIMEOUT, Server, assert_private, collect, serve_in, temp_dir, tiny_overrides, write_stub_page};
use crate::roles::refusal;

const WAIT: Duration = Duration::from_secs(60);

/// An instructor's server with a class listener on a free port (its certificate kept in a
/// directory of the test's).
fn instructor(name: &str, class_dir: &std::path::Path) -> (Server, ClassLink) {
    let dir = class_dir.display().to_string();
    let server = Server::start(name, &["--class-listen", "127.0.0.1:0", "--class-dir", &dir]);
    let link = ClassLink::parse(server.class_link.as_deref().expect("no class link printed")).unwrap();
    (server, link)
}

/// The Unix user these tests run as: who a follower on this host with the room's link is.
fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().unwrap().name
}

/// The instructor's page makes `name`'s invitation.
async fn invitation(instructor: &mut Client, name: &str) -> ClassLink {
    instructor.send(&ClientMessage::Invite { name: name.into() }).await;
    let text = instructor
        .recv_until(WAIT, |m| match m {
            ServerMessage::Invitation { name: invited, link: Secret(link) } if invited == name => Some(link.clone()),
            _ => None,
        })
        .await;
    ClassLink::parse(&text).unwrap()
}

/// Opens the class listener's WebSocket as a follower server does, presenting `token`.
async fn follower_socket(link: &ClassLink, token: &str) -> Result<Client<TlsStream<Wire>>, String> {
    let tls = tls::reach(link).await.map_err(|unreached| match unreached {
        Unreached::Refused(why) | Unreached::Away(why) => why,
    })?;
    let mut request = format!("wss://{}/api/ws", link.authority()).into_client_request().unwrap();
    request.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::client_async(request, tls).await.map_err(|e| e.to_string())?;
    Ok(Client::over(ws))
}

/// Where `client` is told its server stands with a class, until `pick` accepts it.
async fn class_state<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    client: &mut Client<S>,
    pick: impl Fn(&ClassState) -> bool,
) -> ClassState {
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Class(state) if pick(state) => Some(state.clone()),
            _ => None,
        })
        .await
}

/// Collects `client`'s points of run `id` into `seen` until it has as many as the (ended) run
/// in `run_dir` holds, then checks they are exactly its points, each once.
async fn collect_all(client: &mut Client, id: &RunId, seen: &mut BTreeMap<u64, MetricPoint>, run_dir: &std::path::Path) {
    let total = crate::harness::points_in_file(run_dir).len();
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    while seen.len() < total {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let ServerMessage::Points { run, points } = client.recv(left).await
            && run == *id
        {
            collect(seen, &points);
        }
    }
    crate::harness::assert_all_points(seen, run_dir);
}

/// Silent connections opened at once in the test below: more than the listener's share of a
/// usual limit of 1,024 open files could ever hold.
const SILENT: usize = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_to_the_class_listener_are_closed_past_its_share_and_within_seconds() {
    assert!(scalebook_server::gate::raise_descriptor_limit() > 2 * SILENT as u64, "this test holds {SILENT} connections");
    let class_dir = temp_dir("class-strangers");
    let (server, link) = instructor("class-strangers", class_dir.path());
    let ClassAddress::Tcp { host, port } = &link.address else { panic!("a TCP class link was expected: {link:?}") };
    let mut strangers = Vec::new();
    for _ in 0..SILENT {
        strangers.push(TcpStream::connect((host.as_str(), *port)).await.unwrap());
    }
    let opened = std::time::Instant::now();
    // The listener holds 256 strangers: the oldest are closed as newer ones arrive, well
    // before any stranger's deadline (5 s) could have closed them...
    crate::security::until_closed(&strangers, SILENT - 256, opened + Duration::from_secs(4)).await;
    // ...while the owner is answered on the main listener, its page and its requests...
    assert_eq!(server.get("/api/health").status, 200);
    let mut owner = server.connect().await;
    crate::security::still_serving(&mut owner, 1).await;
    // ...and no silent connection outlives its deadline.
    crate::security::until_closed(&strangers, SILENT, opened + Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_class_listener_takes_only_the_follower_token_and_refuses_all_but_reading() {
    let class_dir = temp_dir("class-keys");
    let (server, link) = instructor("class-listener", class_dir.path());
    // The instructor's and the viewer's tokens open nothing there.
    for token in [&server.token, &server.viewer_token] {
        let refused = follower_socket(&link, token).await.err().expect("the class listener took a page's token");
        assert!(refused.contains("401"), "{refused}");
    }
    // A client that does not pin the class listener's certificate is refused by its own TLS.
    let wrong = ClassLink { fingerprint: "00".repeat(32), ..link.clone() };
    let refused = follower_socket(&wrong, &link.token).await.err().expect("a wrong fingerprint was accepted");
    assert!(refused.to_lowercase().contains("fingerprint"), "{refused}");
    // A learner's server given such a link (or meeting someone else on the class port) says
    // so, and keeps trying: only the instructor's certificate ends the wait.
    let learner_keys = temp_dir("class-wrong-keys");
    let env = [("XDG_DATA_HOME", learner_keys.path().display().to_string())];
    let learner = Server::start_with_env("class-wrong", &["--follow", &wrong.to_string()], &[(env[0].0, env[0].1.as_str())]);
    let mut page = learner.connect().await;
    let retried = |s: &ClassState| match s {
        ClassState::Refused { .. } => panic!("a certificate not the link's ended the following: {s:?}"),
        ClassState::Connecting { attempt, warning: Some(_), .. } => *attempt >= 2,
        _ => false,
    };
    let ClassState::Connecting { warning: Some(warning), .. } = class_state(&mut page, retried).await else { unreachable!() };
    assert!(warning.contains("fingerprint") && warning.contains("not the instructor's class listener"), "{warning}");

    let mut follower = follower_socket(&link, &link.token).await.unwrap();
    follower.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None }).await;
    let role = follower.recv_until(WAIT, |m| if let ServerMessage::Welcome { server, .. } = m { Some(server.role) } else { None }).await;
    assert_eq!(role, Role::Follower);
    let forbidden = [
        serde_json::json!({"type": "launch", "config": "cpu_tiny"}),
        serde_json::json!({"type": "cancel", "run": "r1"}),
        serde_json::json!({"type": "preview_slurm", "config": "cpu_tiny", "executor": {"kind": "slurm", "cluster": "perlmutter"}}),
        serde_json::json!({"type": "present", "presentation": {"chapter": "intro"}}),
        serde_json::json!({"type": "stop_presenting"}),
        serde_json::json!({"type": "new_class_link"}),
        serde_json::json!({"type": "remove_follower", "follower": 1}),
        serde_json::json!({"type": "join_class", "link": link.to_string()}),
        serde_json::json!({"type": "leave_class"}),
        serde_json::json!({"type": "chart_shared_run", "follower": 1, "run": "r1"}),
        serde_json::json!({"type": "invite", "name": "learner9"}),
    ];
    for message in forbidden {
        let report = refusal(&mut follower, &message.to_string()).await.unwrap_or_else(|| panic!("{message} was accepted"));
        assert_eq!(report.code, ErrorCode::Forbidden, "{message}: {report:?}");
    }
    // Points of a run nobody asked for are refused.
    let unasked = serde_json::json!({"type": "shared_points", "run": "r1", "after": 0, "points": []}).to_string();
    assert_eq!(refusal(&mut follower, &unasked).await.map(|r| r.code), Some(ErrorCode::BadMessage));
    // A page may not pretend to be a follower server.
    let mut page = server.connect().await;
    let introduce = serde_json::json!({"type": "introduce", "name": "learner1"}).to_string();
    assert_eq!(refusal(&mut page, &introduce).await.map(|r| r.code), Some(ErrorCode::Forbidden));
    assert_eq!(refusal(&mut page, &unasked).await.map(|r| r.code), Some(ErrorCode::Forbidden));
    // Nothing but the WebSocket and the health check is there: no page, no run files.
    let Ok(mut tls) = tls::reach(&link).await else { panic!("the class listener was not reached") };
    let request = format!("GET /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n", link.token);
    tokio::io::AsyncWriteExt::write_all(&mut tls, request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut tls, &mut answer).await.unwrap_or_default();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_are_who_the_listener_finds_remove_bars_the_person_and_a_new_link_ends_the_old() {
    let class_dir = temp_dir("class-renew");
    let (server, link) = instructor("class-renew", class_dir.path());
    let mut instructor = server.connect().await;
    let shown = |m: &ServerMessage| match m {
        ServerMessage::ClassLink { link: Some(Secret(text)), .. } => Some(text.clone()),
        _ => None,
    };
    assert_eq!(instructor.recv_until(WAIT, shown).await, link.to_string(), "the page shows the class link to the instructor");

    // A follower with the room's link is the account its connection is, whatever name it
    // claims; an invited one is its invitation's learner. Both say they are learner2.
    let invited = invitation(&mut instructor, "learner2").await;
    assert_eq!(invited.invite.as_deref(), Some("learner2"));
    let mut first = follower_socket(&link, &link.bearer()).await.unwrap();
    let mut second = follower_socket(&invited, &invited.bearer()).await.unwrap();
    for client in [&mut first, &mut second] {
        client.send(&ClientMessage::Introduce(Introduction { name: "learner2".into(), runs: None })).await;
        client.send(&ClientMessage::Follow { following: true }).await;
    }
    let roster = instructor
        .recv_until(WAIT, |m| match m {
            ServerMessage::Roster { followers, .. } if followers.iter().filter(|f| f.following && f.name == "learner2").count() == 2 => {
                Some(followers.clone())
            }
            _ => None,
        })
        .await;
    // (In the order the server took the two upgrades, which need not be the order they were sent.)
    let mut identities: Vec<&FollowerIdentity> = roster.iter().map(|f| &f.identity).collect();
    identities.sort_by_key(|identity| identity.key());
    let learner2 = FollowerIdentity::Invited { name: "learner2".into() };
    let mut expected = [&FollowerIdentity::Account { user: me() }, &learner2];
    expected.sort_by_key(|identity| identity.key());
    assert_eq!(identities, expected);
    // An invitation's token under another name, and the room's token as an invitation, open nothing.
    for bearer in [format!("learner3~{}", invited.token), format!("learner2~{}", link.token)] {
        assert!(follower_socket(&link, &bearer).await.err().is_some_and(|e| e.contains("401")), "{bearer}");
    }

    // The instructor removes the invited learner2: its connection ends, saying why, and it
    // cannot come back under another name.
    let removed: &Follower = roster.iter().find(|f| f.identity == learner2).unwrap();
    instructor.send(&ClientMessage::RemoveFollower { follower: removed.id }).await;
    let frame = second.closed(WAIT).await.expect("no close frame");
    assert_eq!(u16::from(frame.code), 4403);
    assert!(frame.reason.contains("removed"), "{}", frame.reason);
    let mut again = follower_socket(&invited, &invited.bearer()).await.unwrap();
    again.send(&ClientMessage::Introduce(Introduction { name: "learner2 again".into(), runs: None })).await;
    let frame = again.closed(WAIT).await.expect("a removed learner came back");
    assert!(frame.reason.contains("removed"), "{}", frame.reason);
    // The other follower, who claimed the same name, stays.
    first.send(&ClientMessage::Ping { nonce: 7 }).await;
    first.recv_until(WAIT, |m| matches!(m, ServerMessage::Pong { nonce: 7 }).then_some(())).await;

    // A new class link: the old one's followers are disconnected, the old token no longer
    // opens anything, and the instructor's page gets the new link.
    instructor.send(&ClientMessage::NewClassLink).await;
    let frame = first.closed(Duration::from_secs(5)).await.expect("no close frame");
    assert!(frame.reason.contains("new class link"), "{}", frame.reason);
    let renewed = ClassLink::parse(&instructor.recv_until(WAIT, |m| shown(m).filter(|l| *l != link.to_string())).await).unwrap();
    assert_ne!(renewed.token, link.token);
    assert_eq!(renewed.fingerprint, link.fingerprint, "the certificate is kept");
    assert!(follower_socket(&link, &link.token).await.err().is_some_and(|e| e.contains("401")));
    assert!(follower_socket(&invited, &invited.bearer()).await.err().is_some_and(|e| e.contains("401")), "an old invitation");
    assert!(follower_socket(&renewed, &renewed.token).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_of_more_summaries_than_a_page_can_take_leaves_the_instructors_page_connected() {
    let class_dir = temp_dir("class-roster-bytes");
    let (server, link) = instructor("class-roster-bytes", class_dir.path());
    let mut instructor = server.connect().await;
    // 600 followers each summarising 32 runs of the longest ids and config names: about 6 MB of
    // summaries, more than an instructor's connection may have queued (4 MiB).
    let runs: Vec<RunSummary> = (0..MAX_SUMMARISED_RUNS)
        .map(|i| RunSummary {
            id: RunId::parse(&format!("{i:02}-{}", "r".repeat(61))).unwrap(),
            config: format!("{i:02}-{}", "c".repeat(61)),
            layout: Default::default(),
            state: scalebook_shared::protocol::RunState::Running,
            loss: Some(0.123_456_789),
            samples_per_sec: Some(12_345.678_9),
        })
        .collect();
    let mut followers = Vec::new();
    for i in 0..600 {
        let mut follower = follower_socket(&link, &link.bearer()).await.unwrap();
        follower.send(&ClientMessage::Introduce(Introduction { name: format!("learner{i}"), runs: Some(runs.clone()) })).await;
        followers.push(follower);
    }
    let (listed, withheld) = instructor
        .recv_until(WAIT, |m| match m {
            ServerMessage::Roster { followers, withheld } if followers.iter().filter(|f| f.name != "?").count() == 600 => {
                Some((followers.clone(), *withheld))
            }
            _ => None,
        })
        .await;
    let with_runs = listed.iter().filter(|f| f.runs.is_some()).count();
    assert_eq!(with_runs + withheld as usize, 600);
    assert!(withheld > 0 && with_runs > 0, "{with_runs} listed with their runs, {withheld} without");
    assert!(listed.iter().take(with_runs).all(|f| f.runs.is_some()), "the first to join keep their runs");
    // The instructor's page is still served.
    crate::security::still_serving(&mut instructor, 9).await;
}

/// A TCP relay in front of the class listener that the test can cut, as a network would.
struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    cut: Arc<tokio::sync::Notify>,
}

impl Relay {
    async fn start(target: ClassAddress) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (up, cut) = (Arc::new(AtomicBool::new(true)), Arc::new(tokio::sync::Notify::new()));
        let (up2, cut2) = (up.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(mut outbound) = tls::connect(&target).await else { continue };
                let cut = cut2.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        () = cut.notified() => {}
                    }
                });
            }
        });
        Relay { port, up, cut }
    }

    /// Drops every connection through the relay and refuses new ones until [`Relay::restore`].
    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.notify_waiters();
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_server_relays_the_class_and_copies_every_point_exactly_once_across_an_outage() {
    let keys = temp_dir("class-follow-keys");
    let (instructor_server, link) = instructor("class-follow", keys.path());
    let relay = Relay::start(link.address.clone()).await;
    let through_relay = ClassLink { address: ClassAddress::Tcp { host: "127.0.0.1".into(), port: relay.port }, ..link.clone() };

    // The learner's own server, joining with the class link from the environment.
    let learner_keys = temp_dir("class-learner-keys");
    let learner_env = [("SCALEBOOK_CLASS_LINK", through_relay.to_string()), ("XDG_DATA_HOME", learner_keys.path().display().to_string())];
    let env: Vec<(&str, &str)> = learner_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let learner_server = Server::start_with_env("class-learner", &["--class-name", "learner1", "--share-runs"], &env);
    let mut page = learner_server.connect().await;
    class_state(&mut page, |s| matches!(s, ClassState::Joined { .. })).await;
    page.send(&ClientMessage::Follow { following: true }).await;

    // The instructor sees learner1 following, and runs and presents.
    let mut instructor = instructor_server.connect().await;
    instructor
        .recv_until(WAIT, |m| {
            matches!(m, ServerMessage::Roster { followers, .. } if followers.iter().any(|f| f.name == "learner1" && f.following))
                .then_some(())
        })
        .await;
    let id = instructor.launch("cpu_tiny", tiny_overrides(&["num_iters=60"])).await;
    let local = RunId::parse(&format!("i-{id}")).unwrap();
    let presentation =
        Presentation { chapter: "data-parallel".into(), block: Some(1), element: Some(4), quiz: None, charts: Default::default() };
    let mut shown = presentation.clone();
    shown.charts.runs = vec![id.clone()];
    instructor.send(&ClientMessage::Present { presentation: shown }).await;
    let relayed = page
        .recv_until(WAIT, |m| match m {
            ServerMessage::Presenting { presentation: Some(p) } if p.chapter == "data-parallel" => Some(p.clone()),
            _ => None,
        })
        .await;
    assert_eq!(relayed.charts.runs, vec![local.clone()], "the charted run is the learner's copy");
    assert_eq!((relayed.block, relayed.element), (presentation.block, presentation.element));

    // The learner's page charts the instructor's run from its own server.
    page.recv_until(WAIT, |m| matches!(m, ServerMessage::RunUpdate { run } if run.id == local).then_some(())).await;
    page.send(&ClientMessage::Subscribe { run: local.clone(), after_seq: Some(0), after_log_seq: None }).await;
    let mut seen = BTreeMap::new();
    let first = page
        .recv_until(WAIT, |m| match m {
            ServerMessage::Points { run, points } if *run == local => Some(points.clone()),
            _ => None,
        })
        .await;
    collect(&mut seen, &first);
    // The learner runs a run of their own meanwhile: the copy of the instructor's run trains
    // elsewhere, and takes none of this server's slots. (The copy's points go on arriving
    // while the launch is answered.)
    let copied = |m: &ServerMessage| match m {
        ServerMessage::Points { run, points } if *run == local => collect(&mut seen, points),
        _ => {}
    };
    let own = page.launch_while("cpu_tiny", tiny_overrides(&["num_iters=4"]), copied).await;

    // The network between the two servers goes for 10 s while the run trains (the page keeps
    // what its server still had to send it).
    relay.cut();
    let mut outage = |m: &ServerMessage| match m {
        ServerMessage::Points { run, points } if *run == local => {
            collect(&mut seen, points);
            None
        }
        ServerMessage::Class(ClassState::Connecting { .. }) => Some(()),
        _ => None,
    };
    page.recv_until(WAIT, &mut outage).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    relay.restore();

    // Every point reaches the learner's page exactly once, and the copy is the run's file.
    let upstream = instructor_server.runs_dir.join(id.as_str());
    let copy = learner_server.runs_dir.join(local.as_str());
    instructor_server.wait_for(&id, |r| r.state().is_final().then_some(())).await;
    collect_all(&mut page, &local, &mut seen, &upstream).await;
    assert_eq!(crate::harness::points_in_file(&copy), crate::harness::points_in_file(&upstream));

    let state = learner_server.wait_for(&own, |r| r.state().is_final().then_some(r.state())).await;
    assert_eq!(state, scalebook_shared::protocol::RunState::Completed, "the learner's own run");

    // The instructor charts the learner's run from the roster: their server copies it from the
    // learner's, every point exactly once, and their page charts the copy.
    let follower = instructor
        .recv_until(WAIT, |m| match m {
            ServerMessage::Roster { followers, .. } => followers
                .iter()
                .find(|f| f.runs.as_ref().is_some_and(|runs| runs.iter().any(|r| r.id == own && r.state.is_final())))
                .map(|f| f.id),
            _ => None,
        })
        .await;
    instructor.send(&ClientMessage::ChartSharedRun { follower, run: own.clone() }).await;
    // The copy is the learner's account's (the name "learner1" is only a label).
    let copy = shared_copy_id(&me(), &own).unwrap();
    instructor.recv_until(WAIT, |m| matches!(m, ServerMessage::RunUpdate { run } if run.id == copy).then_some(())).await;
    instructor.send(&ClientMessage::Subscribe { run: copy.clone(), after_seq: Some(0), after_log_seq: None }).await;
    let learners_run = learner_server.runs_dir.join(own.as_str());
    collect_all(&mut instructor, &copy, &mut BTreeMap::new(), &learners_run).await;
    // Another learner, holding an invitation and knowing the run's id, cannot write into that
    // copy: it stays the learner's file, byte for byte.
    let intruder = invitation(&mut instructor, "learner2").await;
    let mut intruder = follower_socket(&intruder, &intruder.bearer()).await.unwrap();
    intruder.send(&ClientMessage::Introduce(Introduction { name: "learner1".into(), runs: None })).await;
    let lines = crate::harness::points_in_file(&learners_run).len() as u64;
    let forged = serde_json::json!({"type": "shared_points", "run": own, "after": lines,
        "points": [{"seq": lines + 1, "step": 100000, "epoch": 1, "wall": 0.0, "tag": "Loss/train", "value": 42.0}]});
    let refused = refusal(&mut intruder, &forged.to_string()).await.expect("points written into another learner's copy");
    let on_run = refused.problems.0.iter().find(|p| p.field == "run").map(|p| p.message.as_str()).unwrap_or_default();
    assert!(on_run.contains("not asked for"), "{refused:?}");
    let metrics = |dir: &std::path::Path| std::fs::read(dir.join(scalebook_shared::rundir::METRICS)).unwrap();
    assert_eq!(metrics(&instructor_server.run_dir(&copy)), metrics(&learners_run), "the copy is the learner's run, byte for byte");
    // Presented beside the instructor's run, the learner's copy reaches no follower (their
    // pages could never chart it): only the instructor's run does.
    let mut both = presentation.clone();
    both.element = Some(5);
    both.charts.runs = vec![id.clone(), copy.clone()];
    instructor.send(&ClientMessage::Present { presentation: both }).await;
    let relayed = page
        .recv_until(WAIT, |m| match m {
            ServerMessage::Presenting { presentation: Some(p) } if p.element == Some(5) => Some(p.clone()),
            _ => None,
        })
        .await;
    assert_eq!(relayed.charts.runs, vec![local.clone()], "a learner's copy reached a follower");
    let state = instructor_server.wait_for(&copy, |r| Some(r.state())).await;
    assert_eq!(state, scalebook_shared::protocol::RunState::Completed);
    let cancel = serde_json::json!({"type": "cancel", "run": copy}).to_string();
    let refused = refusal(&mut instructor, &cancel).await.expect("the instructor cancelled a learner's run");
    assert!(refused.message.contains("learner"), "{}", refused.message);

    // The maps and the config, which the socket does not carry, come from upstream when the
    // page asks, and stay readable once the instructor's server is gone.
    let index = learner_server.get(&format!("/api/runs/{local}/maps"));
    assert_eq!(index.status, 200, "{}", index.body);
    let index: MapIndex = serde_json::from_str(&index.body).unwrap();
    let map = &index.maps.last().expect("no maps upstream").file;
    let png = learner_server.get(&format!("/api/runs/{local}/maps/{map}"));
    assert!(png.status == 200 && png.bytes.starts_with(b"\x89PNG"), "{} {}", png.status, png.body);
    assert_eq!(learner_server.get(&format!("/api/runs/{local}/files/config.yaml")).status, 200);
    // The instructor's copy of the learner's run is the instructor's only.
    let private = assert_private(&instructor_server.runs_dir);
    assert!(private.iter().any(|p| p.starts_with(instructor_server.run_dir(&copy))), "{private:?}");
    instructor_server.kill();
    let kept = learner_server.get(&format!("/api/runs/{local}/maps/{map}"));
    assert_eq!((kept.status, kept.bytes), (200, png.bytes));
    // The learner's copies (with what was fetched from upstream) are the learner's only.
    assert_private(&learner_server.runs_dir);

    // The learner cannot stop the instructor's run from their server.
    let cancel = serde_json::json!({"type": "cancel", "run": local}).to_string();
    let refused = refusal(&mut page, &cancel).await.expect("the learner cancelled the instructor's run");
    assert_eq!(refused.code, ErrorCode::NotCancellable);
    assert!(refused.message.contains("instructor"), "{}", refused.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_joined_from_the_page_is_followed_again_after_a_restart_until_the_learner_leaves() {
    let keys = temp_dir("class-kept-keys");
    let (_instructor_server, link) = instructor("class-kept", keys.path());
    let runs = temp_dir("class-kept-runs");
    let runs_dir = runs.path().display().to_string();
    let start = || Server::start("class-kept-learner", &["--runs-dir", &runs_dir, "--class-name", "learner1"]);

    let learner = start();
    let mut page = learner.connect().await;
    page.send(&ClientMessage::JoinClass { link: Secret(link.to_string()) }).await;
    class_state(&mut page, |s| matches!(s, ClassState::Joined { .. })).await;
    let kept = runs.path().join(scalebook_server::class::follow::KEPT_LINK);
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kept).unwrap().permissions()) & 0o777, 0o600);
    learner.kill();

    let learner = start();
    let mut page = learner.connect().await;
    class_state(&mut page, |s| matches!(s, ClassState::Joined { .. })).await;
    page.send(&ClientMessage::LeaveClass).await;
    class_state(&mut page, |s| *s == ClassState::Alone).await;
    assert!(!kept.exists(), "the link is kept after leaving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_class_port_leaves_the_server_up_saying_so_and_the_class_comes_when_it_is_free() {
    // Someone else holds the class port as the instructor's Scalebook starts, and hangs up on
    // whoever connects.
    let squatter = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = squatter.local_addr().unwrap().to_string();
    let squatter = tokio::spawn(async move {
        while let Ok((hung_up, _)) = squatter.accept().await {
            drop(hung_up);
        }
    });
    let keys = temp_dir("class-squatted-keys");
    let dir = keys.path().display().to_string();
    let server = Server::start("class-squatted", &["--class-listen", &address, "--class-dir", &dir]);
    assert_eq!(server.get("/api/runs").status, 200, "the server answers without its class listener");
    let link = ClassLink::parse(server.class_link.as_deref().expect("no class link printed")).unwrap();
    let mut instructor = server.connect().await;
    let unbound = |m: &ServerMessage| match m {
        ServerMessage::ClassLink { link: Some(_), unbound } => Some(unbound.clone()),
        _ => None,
    };
    let why = instructor.recv_until(WAIT, unbound).await.expect("the page is not told the class listener does not listen");
    assert!(why.contains(&address) && why.contains("another program"), "{why}");

    // A learner joins meanwhile: their server keeps trying, saying what it meets.
    let learner_keys = temp_dir("class-squatted-learner-keys");
    let env = [("SCALEBOOK_CLASS_LINK", link.to_string()), ("XDG_DATA_HOME", learner_keys.path().display().to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let learner = Server::start_with_env("class-squatted-learner", &["--class-name", "learner1"], &env);
    let mut page = learner.connect().await;
    class_state(&mut page, |s| matches!(s, ClassState::Connecting { attempt: 2.., warning: Some(_), .. })).await;

    // The port comes free: the class listener listens, the page hears of it, the learner joins.
    squatter.abort();
    assert!(squatter.await.unwrap_err().is_cancelled());
    instructor.recv_until(WAIT, |m| unbound(m).filter(Option::is_none)).await;
    class_state(&mut page, |s| matches!(s, ClassState::Joined { .. })).await;
    instructor
        .recv_until(WAIT, |m| {
            matches!(m, ServerMessage::Roster { followers, .. } if followers.iter().any(|f| f.name == "learner1")).then_some(())
        })
        .await;
    // Said once in the log, however many times it was tried.
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert_eq!(log.matches("the class listener cannot listen").count(), 1, "{log}");
}

#[test]
fn a_class_link_file_others_can_read_is_refused_naming_the_rule() {
    use std::os::unix::fs::PermissionsExt;

    let dir = temp_dir("class-link-file");
    write_stub_page(&dir.path().join("static"));
    let file = dir.path().join("class-link");
    std::fs::write(&file, format!("scalebook-class://h:1/#token={}&sha256={}", "0".repeat(32), "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let follow = format!("@{}", file.display());
    let output =
        serve_in(dir.path(), &[]).env("SCALEBOOK_CLASS_LINK", &follow).command().stdin(std::process::Stdio::null()).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("mode 644") && stderr.contains("chmod 600"), "{stderr}");
    // Its owner's only, it is taken.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::start_with_env("class-link-file-private", &[], &[("SCALEBOOK_CLASS_LINK", &follow)]);
    assert_eq!(server.get("/api/runs").status, 200);
}
