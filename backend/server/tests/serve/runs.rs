//! Real runs of the real trainer, launched and watched over the WebSocket: live points and the
//! final state, cancel, and a server restart in the middle of a run.

use std::collections::BTreeMap;
use std::time::Duration;

use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::protocol::{ClientMessage, RunHandle, RunId, RunState, ServerMessage};
use scalebook_shared::rundir;

use crate::harness::{RUN_TIMEOUT, Server, assert_all_points, collect, ended, follow_to_end, points_in_file, temp_dir, tiny_overrides};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_run_streams_its_points_live_and_completes() {
    let server = Server::start("launch", &[]);
    let mut client = server.connect().await;
    let id = client.launch("cpu_tiny", tiny_overrides(&["num_iters=24"])).await;
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: None, after_log_seq: None }).await;
    // A new subscriber starts from the history (here: the points written so far, if any).
    let mut seen = BTreeMap::new();
    let upto = client
        .recv_until(Duration::from_secs(60), |m| match m {
            ServerMessage::History { run, upto_seq, .. } if run == &id => Some(*upto_seq),
            _ => None,
        })
        .await;
    let run_dir = server.runs_dir.join(id.as_str());
    let before: BTreeMap<u64, MetricPoint> = points_in_file(&run_dir).into_iter().filter(|(seq, _)| *seq <= upto).collect();
    seen.extend(before);

    let followed = follow_to_end(&mut client, &id, &run_dir, &mut seen).await;
    assert_eq!(followed.state, RunState::Completed);
    assert!(followed.live > 0, "no point arrived while the run was training");
    // How fast they arrive is the load benchmark's business (examples/load_viewers.rs): a
    // timed assertion here would fail on a busy machine.
    assert_all_points(&seen, &run_dir);
    assert!(seen.values().any(|p| p.tag == "Loss/valid"));

    let record = server.get(&format!("/api/runs/{id}")).json();
    let states: Vec<&str> = record["history"].as_array().unwrap().iter().map(|c| c["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["queued", "running", "completed"]);
    assert_eq!(record["effective"]["num_iters"], 24);
    let log = server.get(&format!("/api/runs/{id}/files/job.log")).body;
    assert!(log.contains("Finished"), "{log}");
    assert!(server.get(&format!("/api/runs/{id}/files/config.yaml")).body.starts_with("cpu_tiny:\n"));

    // Its prediction was recorded at launch, before it started, on this machine's measured cores.
    let prediction = server.get(&format!("/api/runs/{id}/files/prediction.json")).json();
    let started = record["history"][1]["at"].as_f64().unwrap();
    assert!(prediction["made_at"].as_f64().unwrap() <= started, "{prediction}");
    assert!(prediction["basis"].as_str().unwrap().contains("this machine"), "{prediction}");
    let estimate = &prediction["estimate"];
    assert_eq!(estimate["world"], 1);
    assert!(estimate["samples_per_sec"].as_f64().unwrap() > 0.0 && estimate["memory_gb"]["total"].as_f64().unwrap() > 0.0);
    // And what else the machine was doing then, which an idle-machine prediction cannot know.
    assert!(prediction["load_at_launch"]["cores"].as_u64().unwrap() >= 1, "{prediction}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_every_process_of_a_run_and_queued_runs_wait_their_turn() {
    let server = Server::start("cancel", &["--max-local-ranks", "1"]);
    let mut client = server.connect().await;
    let long = client.launch("cpu_tiny", tiny_overrides(&["num_iters=100000"])).await;
    let waiting = client.launch("cpu_tiny", tiny_overrides(&[])).await;
    // The process group is on disk, for this server; no client is told it.
    let started = server.wait_for(&long, |r| (r.state() == RunState::Running).then(|| r.handle.clone())).await;
    assert_eq!(started, None, "a client was told a local run's process group");
    let (pgid, start_ticks) = server
        .wait_on_disk(&long, |r| match r.handle {
            Some(RunHandle::Local { pgid, start_ticks }) => Some((pgid, start_ticks)),
            _ => None,
        })
        .await;
    assert!(start_ticks > 0);
    assert_eq!(server.get(&format!("/api/runs/{waiting}")).json()["history"][0]["state"], "queued");
    // Its state line says what it waits for.
    let why = server.wait_for(&waiting, |r| r.reason().map(str::to_owned)).await;
    assert_eq!(why, "waiting for 1 rank to free up (1 of 1 in use)");
    // Cancelled before it ever started.
    client.send(&ClientMessage::Cancel { run: waiting.clone() }).await;
    let state = client.recv_until(Duration::from_secs(60), |m| ended(m, &waiting)).await;
    assert_eq!(state, RunState::Cancelled);

    // Wait for the trainer to be really training, then cancel it.
    let run_dir = server.runs_dir.join(long.as_str());
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    while !run_dir.join("metrics.jsonl").is_file() {
        assert!(std::time::Instant::now() < deadline, "the trainer wrote no point");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.send(&ClientMessage::Cancel { run: long.clone() }).await;
    let state = client.recv_until(Duration::from_secs(120), |m| ended(m, &long)).await;
    assert_eq!(state, RunState::Cancelled);
    assert!(!scalebook_server::executor::process::group_exists(pgid), "process group {pgid} is still there");
    let exit: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run_dir.join("exit.json")).unwrap()).unwrap();
    assert_eq!(exit["signal"], 15, "{exit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_mid_run_loses_and_duplicates_no_point() {
    let runs = temp_dir("restart-runs");
    let runs_dir = runs.path().to_str().unwrap();
    let first = Server::start("restart-a", &["--runs-dir", runs_dir]);
    let mut client = first.connect().await;
    let id = client.launch("cpu_tiny", tiny_overrides(&["num_iters=400"])).await;
    let run_dir = runs.path().join(id.as_str());
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: Some(0) }).await;
    let mut seen = BTreeMap::new();
    while seen.len() < 20 {
        match client.recv(RUN_TIMEOUT).await {
            ServerMessage::Points { points, .. } => collect(&mut seen, &points),
            message => assert!(ended(&message, &id).is_none(), "the run ended before the restart: {message:?}"),
        }
    }
    first.kill();

    let second = Server::start("restart-b", &["--runs-dir", runs_dir]);
    // The trainer went on without a server; the new one adopts it, still running.
    let record = second.get(&format!("/api/runs/{id}")).json();
    assert_eq!(record["history"].as_array().unwrap().last().unwrap()["state"], "running", "{record}");
    let mut client = second.connect().await;
    let last = *seen.keys().last().unwrap();
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(last), after_log_seq: None }).await;
    client.send(&ClientMessage::ListRuns { before: None }).await;
    let followed = follow_to_end(&mut client, &id, &run_dir, &mut seen).await;
    assert_eq!(followed.state, RunState::Completed, "the adopted run's end was not recorded");
    assert_all_points(&seen, &run_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_ended_while_no_server_watched_get_their_real_final_state() {
    let runs = temp_dir("unwatched-runs");
    let runs_dir = runs.path().to_str().unwrap();
    let first = Server::start("unwatched-a", &["--runs-dir", runs_dir]);
    let mut client = first.connect().await;
    let id = client.launch("cpu_tiny", tiny_overrides(&[])).await;
    first.wait_on_disk(&id, |r| r.handle.clone()).await;
    first.kill();
    let run_dir = runs.path().join(id.as_str());
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    while !run_dir.join("exit.json").is_file() {
        assert!(std::time::Instant::now() < deadline, "the run never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A run recorded as running whose processes vanished without a word (a reboot).
    let mut vanished: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(vanished["history"].as_array().unwrap().last().unwrap()["state"], "running");
    vanished["id"] = "19990101-000000-1".into();
    vanished["handle"]["start_ticks"] = 1.into();
    std::fs::create_dir(runs.path().join("19990101-000000-1")).unwrap();
    std::fs::write(runs.path().join("19990101-000000-1/run.json"), vanished.to_string()).unwrap();

    let second = Server::start("unwatched-b", &["--runs-dir", runs_dir]);
    let finished = second.wait_for(&id, |r| r.state().is_final().then(|| r.clone())).await;
    assert_eq!(finished.state(), RunState::Completed, "{:?}", finished.reason());
    let lost = second.wait_for(&RunId::parse("19990101-000000-1").unwrap(), |r| r.state().is_final().then(|| r.clone())).await;
    assert_eq!(lost.state(), RunState::Lost);
    assert!(lost.reason().unwrap().contains("left no exit status"), "{:?}", lost.reason());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_parallel_run_trains_on_two_local_ranks_and_takes_two_slots() {
    let server = Server::start("dp2", &["--max-local-ranks", "2"]);
    let mut client = server.connect().await;
    let request = serde_json::json!({
        "type": "launch",
        "config": "cpu_tiny",
        "overrides": tiny_overrides(&["num_iters=200"]),
        "dp": 2,
        "seed": 1,
    });
    let id = client.launch_json(request).await;
    // Two ranks fill the two slots: a one-rank run waits for them.
    let waiting = client.launch("cpu_tiny", tiny_overrides(&[])).await;
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: Some(0) }).await;
    let run_dir = server.runs_dir.join(id.as_str());
    let mut seen = BTreeMap::new();
    let followed = follow_to_end(&mut client, &id, &run_dir, &mut seen).await;
    assert_eq!(followed.state, RunState::Completed);
    assert!(followed.live > 0, "no point arrived while the run was training");
    assert_all_points(&seen, &run_dir);
    let log = server.get(&format!("/api/runs/{id}/files/job.log")).body;
    assert!(log.contains("[rank 0]") && log.contains("Setting DP = 2"), "{log}");
    // Predicted for two ranks sharing this machine's cores.
    let prediction = server.get(&format!("/api/runs/{id}/files/prediction.json")).json();
    assert_eq!(prediction["estimate"]["world"], 2, "{prediction}");

    let waited = server.wait_for(&waiting, |r| r.state().is_final().then(|| r.clone())).await;
    assert_eq!(waited.state(), RunState::Completed, "{:?}", waited.reason());
    let first_ended = server.get(&format!("/api/runs/{id}")).json()["ended_at"].as_f64().unwrap();
    assert!(waited.started_at.unwrap() >= first_ended, "the one-rank run started while both slots were taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_trains_the_config_as_launched_even_if_the_served_file_changes_before_it_starts() {
    let dir = temp_dir("recorded-config");
    let yaml = dir.path().join("ViT.yaml");
    std::fs::copy(crate::harness::workspace().join("config/ViT.yaml"), &yaml).unwrap();
    let clusters = crate::harness::workspace().join("config/clusters.yaml");
    let args = ["--yaml-config", yaml.to_str().unwrap(), "--clusters", clusters.to_str().unwrap(), "--max-local-ranks", "1"];
    let server = Server::start("recorded-config-server", &args);
    let mut client = server.connect().await;
    let long = client.launch("cpu_tiny", tiny_overrides(&["num_iters=100000"])).await;
    let waiting = client.launch("cpu_tiny", tiny_overrides(&["num_iters=4", "lr=0.003"])).await;

    // While the second run waits, someone edits the served file (a `git pull`, a typo fix).
    let text = std::fs::read_to_string(&yaml).unwrap();
    let edited = text.replace("  embed_dim: 48\n  depth: 2\n", "  embed_dim: 64\n  depth: 3\n");
    assert_ne!(edited, text, "the test edits cpu_tiny's width and depth");
    std::fs::write(&yaml, edited).unwrap();
    client.send(&ClientMessage::Cancel { run: long.clone() }).await;
    assert_eq!(client.recv_until(Duration::from_secs(120), |m| ended(m, &waiting)).await, RunState::Completed);

    // The trainer printed the config it trained: the one validated at launch.
    let out = std::fs::read_to_string(server.runs_dir.join(waiting.as_str()).join("out.log")).unwrap();
    for line in ["embed_dim 48", "depth 2", "num_iters 4", "lr 0.003"] {
        assert!(out.lines().any(|l| l.ends_with(line)), "out.log lacks {line:?}:\n{out}");
    }
    assert!(!out.contains("embed_dim 64"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_stops_reading_gets_every_point_once_it_reads_again() {
    // Heartbeats a minute apart: the reader stops far shorter than the six a peer may go
    // without taking a frame.
    let args = ["--max-queued-kib", "64", "--heartbeat-secs", "60"];
    let server = Server::start_with_env("slow-reader", &args, &[("RUST_LOG", "warn")]);
    let mut slow = server.connect().await;
    let id = slow.launch("cpu_tiny", tiny_overrides(&["num_iters=100000"])).await;
    slow.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: Some(u64::MAX) }).await;
    // ...and reads nothing while the run writes far more than its 64 KiB queue holds: its
    // stream waits for it (the file keeps what it has not sent), it is not dropped.
    let metrics = server.run_dir(&id).join(rundir::METRICS);
    let lines = || std::fs::read_to_string(&metrics).map_or(0, |text| text.lines().count());
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    while lines() < 10_000 {
        assert!(std::time::Instant::now() < deadline, "the run never wrote 10,000 points");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Everyone else is served meanwhile.
    let mut other = server.connect().await;
    other.send(&ClientMessage::Cancel { run: id.clone() }).await;
    let cancelled = server.wait_for(&id, |r| r.state().is_final().then(|| r.state())).await;
    assert_eq!(cancelled, RunState::Cancelled);
    // Reading again: every point, in order, once, and the connection never closed.
    let total = lines() as u64;
    let mut next = 1;
    while next <= total {
        if let ServerMessage::Points { run, points } = slow.recv(RUN_TIMEOUT).await
            && run == id
        {
            for point in points {
                assert_eq!(point.seq, next, "a point lost or repeated");
                next += 1;
            }
        }
    }
    assert!(!std::fs::read_to_string(&server.log).unwrap().contains("too slow"), "the slow viewer was dropped");
}
