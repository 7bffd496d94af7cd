//! Slurm runs through the real server: the script previewed and saved, points streamed while
//! the job trains, its end recorded; a two-rank job followed across a server restart and
//! cancelled; a job that runs past its time limit.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use scalebook_shared::protocol::{ClientMessage, RunHandle, RunState, ServerMessage};
use serde_json::{Value, json};

use crate::harness::{RUN_TIMEOUT, Server, assert_all_points, ended, follow_to_end, temp_dir, tiny_overrides};
use scalebook_harness::slurm::SlurmCluster;

/// A server that submits to `cluster`, polling it every second.
pub(crate) fn start_server(name: &str, cluster: &SlurmCluster, extra: &[&str]) -> Server {
    let mut args = cluster.serve_args();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Server::start(name, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

pub(crate) fn launch(overrides: Vec<String>, executor: Value) -> Value {
    json!({ "type": "launch", "config": "cpu_tiny", "overrides": overrides, "executor": executor, "seed": 1 })
}

fn slurm_job_id(handle: &Option<RunHandle>) -> Option<u64> {
    match handle {
        Some(RunHandle::Slurm { job_id, .. }) => Some(*job_id),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slurm_run_shows_its_script_streams_its_points_and_completes() {
    let cluster = SlurmCluster::start("complete");
    let server = start_server("slurm-complete", &cluster, &[]);
    let mut client = server.connect().await;
    let request = launch(tiny_overrides(&["num_iters=200"]), json!({ "kind": "slurm", "cluster": "testbox" }));

    // The learner sees the script before submitting it.
    let mut preview = request.clone();
    preview["type"] = "preview_slurm".into();
    client.send_text(&preview.to_string()).await;
    let script = client
        .recv_until(Duration::from_secs(60), |m| match m {
            ServerMessage::SlurmScript { script } => Some(script.clone()),
            ServerMessage::Error(e) => panic!("preview refused: {e:?}"),
            _ => None,
        })
        .await;
    assert!(script.contains("#SBATCH --account=scalebook\n") && script.contains("\nsrun --label "), "{script}");

    let id = client.launch_json(request).await;
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: Some(0) }).await;
    let run_dir = server.runs_dir.join(id.as_str());
    let mut seen = BTreeMap::new();
    let followed = follow_to_end(&mut client, &id, &run_dir, &mut seen).await;
    let log = server.get(&format!("/api/runs/{id}/files/job.log")).body;
    assert_eq!(followed.state, RunState::Completed, "{log}\n{}", cluster.logs());
    assert!(followed.live > 0, "no point arrived while the job was training");
    assert_all_points(&seen, &run_dir);

    // What was submitted is what was shown, with the run's id in place.
    let saved = server.get(&format!("/api/runs/{id}/files/job.sbatch")).body;
    assert_eq!(saved, script.replace("RUN_ID", id.as_str()));
    let record = server.get(&format!("/api/runs/{id}")).json();
    let states: Vec<&str> = record["history"].as_array().unwrap().iter().map(|c| c["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["queued", "running", "completed"]);
    assert_eq!(record["handle"]["kind"], "slurm", "{record}");
    // srun labels each line with its rank; the trainer's last words are there.
    assert!(log.lines().any(|l| l.starts_with("0: ") && l.contains("Finished")), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_rank_job_is_followed_across_a_server_restart_and_cancelled() {
    let cluster = SlurmCluster::start("cancel");
    let runs = temp_dir("slurm-cancel-runs");
    let runs_dir = runs.path().to_str().unwrap();
    let first = start_server("slurm-cancel-a", &cluster, &["--runs-dir", runs_dir]);
    let mut client = first.connect().await;
    let mut request = launch(tiny_overrides(&["num_iters=1000000"]), json!({ "kind": "slurm", "cluster": "testbox" }));
    request["dp"] = json!(2);
    let id = client.launch_json(request).await;
    let job_id = first.wait_for(&id, |r| (r.state() == RunState::Running).then(|| slurm_job_id(&r.handle)).flatten()).await;
    let run_dir = runs.path().join(id.as_str());
    let deadline = Instant::now() + RUN_TIMEOUT;
    while !run_dir.join("metrics.jsonl").is_file() {
        assert!(
            Instant::now() < deadline,
            "the job wrote no point:\n{}",
            std::fs::read_to_string(run_dir.join("job.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    first.kill();

    // The job trains on without a server; the next one finds it in the queue.
    let second = start_server("slurm-cancel-b", &cluster, &["--runs-dir", runs_dir]);
    let record = second.get(&format!("/api/runs/{id}")).json();
    assert_eq!(record["history"].as_array().unwrap().last().unwrap()["state"], "running", "{record}");
    let mut client = second.connect().await;
    client.send(&ClientMessage::Cancel { run: id.clone() }).await;
    let state = client.recv_until(Duration::from_secs(60), |m| ended(m, &id)).await;
    assert_eq!(state, RunState::Cancelled);
    let record = second.get(&format!("/api/runs/{id}")).json();
    assert_eq!(record["history"].as_array().unwrap().last().unwrap()["reason"], "cancelled");
    let queue = cluster.client("squeue", &["--noheader", &format!("--jobs={job_id}")]);
    assert_eq!(String::from_utf8_lossy(&queue.stdout).trim(), "", "job {job_id} is still queued");
    let log = std::fs::read_to_string(run_dir.join("job.log")).unwrap();
    assert!(log.contains("Setting DP = 2"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_time_limit_ends_as_timeout() {
    let cluster = SlurmCluster::start("timeout");
    let server = start_server("slurm-timeout", &cluster, &[]);
    let mut client = server.connect().await;
    let started = Instant::now();
    let id = client
        .launch_json(launch(tiny_overrides(&["num_iters=100000000"]), json!({ "kind": "slurm", "cluster": "testbox", "time": "1" })))
        .await;
    let script = server.get(&format!("/api/runs/{id}/files/job.sbatch")).body;
    assert!(script.contains("#SBATCH --time=1\n"), "{script}");
    let finished = server.wait_for(&id, |r| r.state().is_final().then(|| r.clone())).await;
    assert_eq!(finished.state(), RunState::Timeout, "{:?}\n{}", finished.reason(), cluster.logs());
    assert!(finished.reason().unwrap().contains("time limit"), "{:?}", finished.reason());
    assert!(finished.history.iter().any(|c| c.state == RunState::Running));
    // A one-minute limit, enforced within Slurm's check period (OverTimeLimit=0).
    assert!(started.elapsed() < Duration::from_secs(150), "took {:?}", started.elapsed());
    let log = std::fs::read_to_string(server.runs_dir.join(id.as_str()).join("job.log")).unwrap();
    assert!(log.contains("DUE TO TIME LIMIT"), "{log}");
}
