//! Learner runs over the protocol: off unless the instructor allows them; then each viewer
//! launches learner configs on this machine, at most N at once, cancels only their own runs,
//! keeps them across a reconnection by their key, and the room's runs take turns in the queue.

use std::process::Stdio;
use std::time::Duration;

use scalebook_shared::protocol::{
    ClientMessage, ErrorCode, ErrorReport, Learner, LearnerIdentity, LearnerKey, LearnerRuns, PROTOCOL_VERSION, RunId, RunRecord, RunState,
    ServerInfo, ServerMessage,
};

use crate::harness::{Client, Server, serve_in, temp_dir, tiny_overrides, write_stub_page};
use crate::roles::refusal;

const WAIT: Duration = Duration::from_secs(60);

/// What `welcome` tells `client`, after a `hello` with `key`.
async fn welcome(client: &mut Client, key: Option<LearnerKey>) -> ServerInfo {
    client.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: key }).await;
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Welcome { server, .. } => Some(server.clone()),
            _ => None,
        })
        .await
}

/// The identity `welcome` gives a fresh viewer connection.
async fn learner(client: &mut Client) -> LearnerIdentity {
    welcome(client, None).await.learner.expect("a viewer connection has a learner identity")
}

/// A tiny `cpu_tiny` launch (`extra` overrides added), as JSON with request id `id`.
fn launch(id: &str, extra: &[&str]) -> serde_json::Value {
    serde_json::json!({ "id": id, "type": "launch", "config": "cpu_tiny", "overrides": tiny_overrides(extra), "seed": 1 })
}

/// The answer to request `id`: the run it launched, or the error it got.
async fn answer(client: &mut Client, id: &str) -> Result<RunId, ErrorReport> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let reply = client.recv_reply(deadline.saturating_duration_since(tokio::time::Instant::now())).await;
        match (reply.id.as_ref().map(|i| i.as_str()), reply.message) {
            (Some(got), ServerMessage::Launched { run }) if got == id => return Ok(run),
            (Some(got), ServerMessage::Error(e)) if got == id => return Err(e),
            _ => {}
        }
    }
}

async fn launched(client: &mut Client, request: serde_json::Value) -> Result<RunId, ErrorReport> {
    let id = request["id"].as_str().unwrap().to_owned();
    client.send_text(&request.to_string()).await;
    answer(client, &id).await
}

fn fields(e: &ErrorReport) -> Vec<&str> {
    e.problems.0.iter().map(|p| p.field.as_str()).collect()
}

/// Waits until run `id` is gone: a learner's run cancelled before it started leaves no record
/// and no directory.
async fn gone(server: &Server, id: &RunId) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while server.get(&format!("/api/runs/{id}")).status != 404 || server.run_dir(id).exists() {
        assert!(tokio::time::Instant::now() < deadline, "run {id} is still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn record(server: &Server, id: &RunId) -> RunRecord {
    server.wait_for(id, |r| Some(r.clone())).await
}

/// Cancels every run still queued or running, from the instructor's link, and waits for each
/// to end (a learner's run that never started is then gone altogether): nothing trains on
/// after the test.
async fn cancel_all(server: &Server, instructor: &mut Client, ids: &[RunId]) {
    for id in ids {
        if !record(server, id).await.state().is_final() {
            instructor.send(&ClientMessage::Cancel { run: id.clone() }).await;
        }
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    for id in ids {
        loop {
            let answer = server.get(&format!("/api/runs/{id}"));
            if answer.status == 404 || serde_json::from_str::<RunRecord>(&answer.body).is_ok_and(|r| r.state().is_final()) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "run {id} never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_viewer_runs_a_learner_launches_nothing() {
    let server = Server::start("learners-off", &[]);
    let mut viewer = server.connect_viewer().await;
    let info = welcome(&mut viewer, None).await;
    assert_eq!(info.learner_runs, LearnerRuns::default());
    assert!(info.learner.is_some(), "a viewer is a learner even when learners launch nothing");
    let refused = refusal(&mut viewer, &launch("l1", &["num_iters=4"]).to_string()).await.expect("a viewer's launch was accepted");
    assert_eq!(refused.code, ErrorCode::Forbidden, "{refused:?}");
    assert!(std::fs::read_dir(&server.runs_dir).unwrap().next().is_none(), "a viewer's request created a run");
    // The instructor's link has no learner.
    let mut instructor = server.connect().await;
    assert_eq!(welcome(&mut instructor, None).await.learner, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_launch_over_its_memory_share_is_refused_naming_the_share() {
    let server = Server::start("learners-share", &["--viewer-runs", "1", "--learner-memory-share", "0.001"]);
    let mut viewer = server.connect_viewer().await;
    assert_eq!(welcome(&mut viewer, None).await.learner_runs.memory_share_bytes, Some(1_073_741));
    let refused = launched(&mut viewer, launch("over-share", &["num_iters=4"])).await.unwrap_err();
    assert_eq!((refused.code, fields(&refused)), (ErrorCode::InvalidLaunch, vec!["depth"]), "{refused:?}");
    let message = &refused.problems.0[0].message;
    assert!(message.starts_with("a learner's run may use 1.0 MiB of memory, its share of this machine"), "{message}");
    assert!(std::fs::read_dir(&server.runs_dir).unwrap().next().is_none(), "a refused launch created a run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_launches_at_a_bounded_rate_however_many_connections_it_opens() {
    let server = Server::start("learners-rate", &["--viewer-runs", "2"]);
    // Five connections, five fresh learners, each launching (and refused for its config: an
    // attempt costs as much as a launch).
    let started = std::time::Instant::now();
    let mut refusals = Vec::new();
    for n in 0..5 {
        let mut viewer = server.connect_viewer().await;
        learner(&mut viewer).await;
        for k in 0..30 {
            let mut wrong = launch(&format!("c{n}-{k}"), &[]);
            wrong["config"] = "short".into();
            refusals.push(launched(&mut viewer, wrong).await.unwrap_err());
        }
    }
    // The bucket refills a launch a second while the attempts go on, however slowly they go.
    let refilled = started.elapsed().as_secs() as usize + 1;
    let codes: Vec<ErrorCode> = refusals.iter().map(|e| e.code).collect();
    let planned = codes.iter().filter(|c| **c == ErrorCode::InvalidLaunch).count();
    assert_eq!(codes[..64], [ErrorCode::InvalidLaunch; 64], "the first 64 are planned: {codes:?}");
    assert!(planned <= 64 + refilled, "{planned} planned in {refilled} s: {codes:?}");
    // A refusal for the rate, not the quota: a sweep stops and says so, rather than waiting
    // for one of its learner's runs to end (none may be running).
    let limited: Vec<_> = refusals.iter().filter(|e| e.code == ErrorCode::RateLimited).collect();
    assert_eq!(planned + limited.len(), codes.len(), "{codes:?}");
    assert!(limited.first().is_some_and(|e| e.message.contains("launched 64 learner runs just now")), "{limited:?}");
}

#[test]
fn an_unknown_learner_config_stops_the_server_naming_the_flag() {
    let dir = temp_dir("learners-typo");
    write_stub_page(&dir.path().join("static"));
    let args = ["--viewer-runs", "2", "--learner-config", "cpu_tiny", "--learner-config", "cpu_tinny"];
    let output = serve_in(dir.path(), &args).command().stdin(Stdio::null()).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--learner-config cpu_tinny: the config file has no such config"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_launches_within_the_rules_and_cancels_only_their_own_runs() {
    let server = Server::start("learners-rules", &["--viewer-runs", "2", "--max-local-ranks", "1"]);
    let mut instructor = server.connect().await;
    // The instructor's long run holds the one slot: the learners' runs wait, queued.
    let blocker = launched(&mut instructor, launch("i1", &["num_iters=100000"])).await.unwrap();
    let (mut a, mut b) = (server.connect_viewer().await, server.connect_viewer().await);
    let info = welcome(&mut a, None).await;
    let configs = vec!["cpu_tiny".into(), "cpu_short".into()];
    let share = info.learner_runs.memory_share_bytes;
    assert!(share.is_some_and(|bytes| bytes > 1 << 30), "the machine's memory over one run at a time: {share:?}");
    assert_eq!(info.learner_runs, LearnerRuns { per_learner: 2, configs, time_limit_minutes: 30, ranks: 2, memory_share_bytes: share });
    let me = info.learner.unwrap();
    let other = learner(&mut b).await;
    assert_ne!(me.learner, other.learner);

    // Only learner configs, only on this machine: each refusal names its field.
    let mut wrong = launch("bad-config", &[]);
    wrong["config"] = "short".into();
    let refused = launched(&mut a, wrong).await.unwrap_err();
    assert_eq!((refused.code, fields(&refused)), (ErrorCode::InvalidLaunch, vec!["config"]));
    assert!(refused.problems.0[0].message.contains("learners may launch cpu_tiny, cpu_short"), "{refused:?}");
    let mut slurm = launch("bad-executor", &[]);
    slurm["executor"] = serde_json::json!({ "kind": "slurm", "cluster": "perlmutter" });
    let refused = launched(&mut a, slurm).await.unwrap_err();
    assert_eq!((refused.code, fields(&refused)), (ErrorCode::InvalidLaunch, vec!["executor"]));
    let preview =
        serde_json::json!({ "type": "preview_slurm", "config": "cpu_tiny", "executor": { "kind": "slurm", "cluster": "perlmutter" } });
    assert_eq!(refusal(&mut a, &preview.to_string()).await.map(|e| e.code), Some(ErrorCode::Forbidden));
    // No larger than the largest learner config (cpu_short) in parameters, nor training on more
    // than four times its 1,024 samples: 4096 steps of cpu_tiny's batch of 4 are 16,384 samples
    // (and 1,024 epochs of its 16, each validating).
    let large = launch("too-large", &["embed_dim=512", "num_iters=4096"]);
    let refused = launched(&mut a, large).await.unwrap_err();
    let expected = vec!["embed_dim", "num_iters", "limit_nsamples", "limit_nsamples_val"];
    assert_eq!((refused.code, fields(&refused)), (ErrorCode::InvalidLaunch, expected));
    // Four ranks, no (--learner-ranks is 2 by default)...
    let mut four = launch("four-ranks", &["num_iters=4"]);
    four["dp"] = 4.into();
    let refused = launched(&mut a, four).await.unwrap_err();
    assert_eq!((refused.code, fields(&refused)), (ErrorCode::InvalidLaunch, vec!["dp"]));
    assert!(refused.problems.0[0].message.contains("at most 2 ranks (the instructor's --learner-ranks)"), "{refused:?}");

    // Two at once, not three; ... two ranks, yes, as the distributed chapters' layouts, though
    // the machine runs one rank at a time (the run waits for it, then runs alone).
    let mut two_ranks = launch("a1", &["num_iters=4"]);
    two_ranks["dp"] = 2.into();
    let first = launched(&mut a, two_ranks).await.unwrap();
    let second = launched(&mut a, launch("a2", &["num_iters=4"])).await.unwrap();
    let refused = launched(&mut a, launch("a3", &["num_iters=4"])).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::QuotaExceeded, "{refused:?}");
    assert!(refused.message.contains("the most a learner may have at once (2)"), "{}", refused.message);
    let theirs = launched(&mut b, launch("b1", &["num_iters=4"])).await.unwrap();
    assert_eq!(record(&server, &first).await.learner, Some(me.learner.clone()));
    assert_eq!(record(&server, &theirs).await.learner, Some(other.learner.clone()));
    assert_eq!(record(&server, &blocker).await.learner, None);

    // Not another learner's run, not the instructor's; their own, yes.
    for (run, whose) in [(&theirs, "another learner's"), (&blocker, "the instructor's")] {
        let cancel = serde_json::json!({ "type": "cancel", "run": run });
        let refused = refusal(&mut a, &cancel.to_string()).await.expect("cancelled a run not its own");
        assert_eq!((refused.code, refused.run.as_ref()), (ErrorCode::Forbidden, Some(run)), "{refused:?}");
        assert!(refused.message.contains(whose), "{}", refused.message);
    }
    assert_eq!(refusal(&mut a, &serde_json::json!({ "type": "cancel", "run": first }).to_string()).await, None);
    gone(&server, &first).await;
    // A place is free again.
    let third = launched(&mut a, launch("a4", &["num_iters=4"])).await.unwrap();

    // After a reload the page presents its key: the same learner, who still owns its runs.
    let mut again = server.connect_viewer().await;
    let info = welcome(&mut again, Some(me.key.clone())).await;
    assert_eq!(info.learner.as_ref().map(|l| &l.learner), Some(&me.learner));
    assert_eq!(refusal(&mut again, &serde_json::json!({ "type": "cancel", "run": second }).to_string()).await, None);
    gone(&server, &second).await;
    cancel_all(&server, &mut instructor, &[blocker, theirs, third]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_launching_at_once_take_turns_in_the_queue() {
    let server = Server::start("learners-fair", &["--viewer-runs", "2", "--max-local-ranks", "1"]);
    let mut instructor = server.connect().await;
    let blocker = launched(&mut instructor, launch("i1", &["num_iters=100000"])).await.unwrap();
    server.wait_for(&blocker, |r| (r.state() == RunState::Running).then_some(())).await;
    let mut viewers = vec![server.connect_viewer().await, server.connect_viewer().await, server.connect_viewer().await];
    let mut names: Vec<Learner> = Vec::new();
    for viewer in &mut viewers {
        names.push(learner(viewer).await.learner);
    }
    // The first learner sends both runs first; the other two launch theirs at the same time.
    let mut runs = Vec::new();
    for request in ["a1", "a2"] {
        runs.push(launched(&mut viewers[0], launch(request, &["num_iters=4"])).await.unwrap());
    }
    for (viewer, prefix) in viewers[1..].iter_mut().zip(["b", "c"]) {
        for n in 1..=2 {
            viewer.send_text(&launch(&format!("{prefix}{n}"), &["num_iters=4"]).to_string()).await;
        }
    }
    for (viewer, prefix) in viewers[1..].iter_mut().zip(["b", "c"]) {
        for n in 1..=2 {
            runs.push(answer(viewer, &format!("{prefix}{n}")).await.unwrap());
        }
    }
    for run in &runs {
        assert_eq!(record(&server, run).await.state(), RunState::Queued, "{run} did not wait for the instructor's run");
    }
    // The slot frees: the six runs start one at a time, a round of three learners, then another.
    instructor.send(&ClientMessage::Cancel { run: blocker.clone() }).await;
    let mut ended = Vec::new();
    for run in &runs {
        ended.push(server.wait_for(run, |r| r.state().is_final().then(|| r.clone())).await);
    }
    assert!(ended.iter().all(|r| r.state() == RunState::Completed), "{ended:?}");
    ended.sort_by(|x, y| x.started_at.unwrap().total_cmp(&y.started_at.unwrap()));
    let order: Vec<usize> = ended.iter().map(|r| names.iter().position(|n| Some(n) == r.learner.as_ref()).unwrap()).collect();
    let round = |turns: &[usize]| {
        let mut turns = turns.to_vec();
        turns.sort_unstable();
        turns == [0, 1, 2]
    };
    assert!(round(&order[..3]) && round(&order[3..]), "the runs started in the learners' order {order:?}, not round by round");
    assert_eq!(order[0], 0, "the oldest run of the first round goes first");
    cancel_all(&server, &mut instructor, &[blocker]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_is_bounded_in_time_and_identity_and_a_cancelled_launch_leaves_nothing() {
    let server = Server::start("learners-bounds", &["--viewer-runs", "2", "--max-local-ranks", "1"]);
    let mut instructor = server.connect().await;
    let blocker = launched(&mut instructor, launch("i1", &["num_iters=100000"])).await.unwrap();
    let mut viewer = server.connect_viewer().await;
    let me = learner(&mut viewer).await;

    // Time: as few samples as allowed, spread over 1024 one-sample epochs that each validate
    // every sample, or a profile of 128 steps: refused, each by its field.
    let endless = launch("endless", &["global_batch_size=1", "limit_nsamples=1", "num_iters=1024", "limit_nsamples_val=None"]);
    let refused = launched(&mut viewer, endless).await.unwrap_err();
    assert_eq!((refused.code, fields(&refused)), (ErrorCode::InvalidLaunch, vec!["limit_nsamples", "limit_nsamples_val"]));
    let refused = launched(&mut viewer, launch("profiled", &["profile=1:129"])).await.unwrap_err();
    assert_eq!(fields(&refused), ["profile"]);

    // Identity: a connection keeps its first; a new key later is refused, not taken.
    let other = LearnerKey::parse(&"0c".repeat(16)).unwrap();
    viewer.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: Some(other) }).await;
    let refused = viewer
        .recv_until(WAIT, |m| match m {
            ServerMessage::Error(e) => Some(e.clone()),
            _ => None,
        })
        .await;
    assert_eq!(refused.code, ErrorCode::Forbidden);
    assert!(refused.message.contains("keeps its first identity"), "{}", refused.message);

    // A launch cancelled before it started leaves nothing behind.
    let run = launched(&mut viewer, launch("a1", &["num_iters=4"])).await.unwrap();
    assert_eq!(record(&server, &run).await.learner, Some(me.learner.clone()));
    assert!(server.run_dir(&run).is_dir());
    viewer.send(&ClientMessage::Cancel { run: run.clone() }).await;
    gone(&server, &run).await;
    viewer.send(&ClientMessage::ListRuns { before: None }).await;
    let listed = viewer
        .recv_until(WAIT, |m| match m {
            ServerMessage::Runs { runs, .. } => Some(runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>()),
            _ => None,
        })
        .await;
    assert!(!listed.contains(&run) && listed.contains(&blocker), "{listed:?}");
    cancel_all(&server, &mut instructor, &[blocker]).await;
}

/// The ids and `older` of the next `runs` message `client` gets.
async fn run_page(client: &mut Client) -> (Vec<String>, u64) {
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Runs { runs, older, .. } => Some((runs.iter().map(|r| r.id.to_string()).collect(), *older)),
            _ => None,
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_list_comes_a_page_at_a_time_with_the_instructors_and_the_pages_own_runs_whole() {
    use scalebook_shared::protocol::run_list::RUN_PAGE;

    // A class's runs directory: the instructor's oldest and newest runs (r000, r132), this
    // page's learner's oldest (r001), and between them one run each of 130 other learners.
    let dir = temp_dir("run-pages");
    let key = LearnerKey::parse(&"0d".repeat(16)).unwrap();
    let me = scalebook_server::learners::identity(key.clone()).learner;
    scalebook_harness::write_class_runs(&dir.path().join("runs"), &me, 130).unwrap();
    write_stub_page(&dir.path().join("static"));
    let served =
        serve_in(dir.path(), &["--viewer-runs", "2"]).log_to(dir.path().join("server.log")).start().unwrap_or_else(|e| panic!("{e}"));
    let names = |from: u32, to: u32| (from..=to).map(|i| format!("r{i:03}")).collect::<Vec<_>>();
    let with = |mut ids: Vec<String>, more: &[&str]| {
        ids.extend(more.iter().map(|s| s.to_string()));
        ids.sort();
        ids
    };

    // The viewer: the instructor's runs and its own whole, the newest 50 of the others', and
    // then the older ones a page at a time, asked for by the oldest it holds.
    let mut viewer = Client::connect(&served.ws_url(&served.viewer_token)).await.unwrap();
    assert_eq!(welcome(&mut viewer, Some(key)).await.learner.unwrap().learner, me);
    viewer.send(&ClientMessage::ListRuns { before: None }).await;
    let (first, older) = run_page(&mut viewer).await;
    assert_eq!(first, with(names(82, 131), &["r000", "r001", "r132"]));
    assert_eq!((first.len() - 3, older), (RUN_PAGE, 80));
    for (before, expected, left) in [("r082", names(32, 81), 30), ("r032", names(2, 31), 0)] {
        viewer.send(&ClientMessage::ListRuns { before: Some(RunId::parse(before).unwrap()) }).await;
        assert_eq!(run_page(&mut viewer).await, (expected, left), "the page before {before}");
    }

    // The instructor's page: its own runs whole, every learner's run paged (r001 too).
    let mut instructor = Client::connect(&served.ws_url(&served.token)).await.unwrap();
    instructor.send(&ClientMessage::ListRuns { before: None }).await;
    assert_eq!(run_page(&mut instructor).await, (with(names(82, 131), &["r000", "r132"]), 81));
}
