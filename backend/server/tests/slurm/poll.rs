//! One Slurm poll serves every viewer (issue #29): with 200 of the server's jobs pending in the
//! queue and 20 viewers following them, the server still asks `squeue` once per poll period,
//! and every run says why it waits and where it stands; a job behind a full cluster says when
//! Slurm expects to start it.

use std::time::{Duration, Instant};

use scalebook_shared::protocol::{ClientMessage, RunId, RunRecord, RunState};
use serde_json::json;

use crate::harness::tiny_overrides;
use crate::runs::{launch, start_server};
use scalebook_harness::slurm::SlurmCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_pending_jobs_and_twenty_viewers_cost_one_squeue_a_period() {
    let cluster = SlurmCluster::with_nodes("poll", 2);
    // Nothing starts: every job waits, with Slurm's reason.
    let down = cluster.client("scontrol", &["update", "PartitionName=debug", "State=DOWN"]);
    assert!(down.status.success(), "{down:?}");
    let server = start_server("slurm-poll", &cluster, &[]);
    let mut ids: Vec<RunId> = Vec::new();
    // Ten connections of twenty launches each: within every connection's message rate.
    for _ in 0..10 {
        let mut client = server.connect().await;
        for _ in 0..20 {
            ids.push(client.launch_json(launch(tiny_overrides(&[]), json!({ "kind": "slurm", "cluster": "testbox" }))).await);
        }
    }
    let last = ids.last().unwrap().clone();
    server.wait_for(&last, |r| r.handle.is_some().then_some(())).await;
    let mut viewers = Vec::new();
    for v in 0..20 {
        let mut viewer = server.connect_viewer().await;
        for id in ids.iter().skip(v * 10).take(10) {
            viewer.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: Some(0) }).await;
        }
        viewers.push(viewer);
    }

    // Every poll period (1 s here) is one squeue, however many watch.
    let (before, start) = (cluster.calls("squeue"), Instant::now());
    tokio::time::sleep(Duration::from_secs(8)).await;
    let (calls, periods) = (cluster.calls("squeue") - before, start.elapsed().as_secs_f64().ceil() as usize);
    assert!(calls >= 1 && calls <= periods + 1, "{calls} squeue calls in {periods} periods with 200 jobs and 20 viewers");
    let record = server.wait_for(&ids[0], |r| r.reason().map(|_| r.clone())).await;
    assert_eq!(record.state(), RunState::Queued);
    assert!(record.reason().unwrap().starts_with("pending in Slurm: "), "{:?}", record.reason());
    // And where it stands: each run its own place among the 200. (Which run is first is Slurm's
    // order of submission, which the server's concurrent submissions need not keep.)
    let place = |r: &RunRecord| r.slurm.as_ref().and_then(|s| s.place.zip(s.pending));
    let mut places = Vec::new();
    for id in &ids {
        places.push(server.wait_for(id, place).await);
    }
    assert!(places.iter().all(|&(_, pending)| pending == 200), "{places:?}");
    let mut order: Vec<u32> = places.iter().map(|&(at, _)| at).collect();
    order.sort_unstable();
    assert_eq!(order, (1..=200).collect::<Vec<u32>>());
    let _ = cluster.client("scancel", &["--user=root"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_behind_a_full_cluster_says_when_slurm_expects_to_start_it() {
    let cluster = SlurmCluster::with_nodes("poll-start", 2);
    // Every CPU of both nodes taken for five minutes.
    let output = format!("--output={}", cluster.dir.join("full.out").display());
    let full = cluster.client("sbatch", &["--parsable", "--nodes=2", "--ntasks=4", "--time=5", &output, "--wrap", "sleep 300"]);
    assert!(full.status.success(), "{full:?}");
    let server = start_server("slurm-poll-start", &cluster, &[]);
    let mut client = server.connect().await;
    let submitted = unix_now();
    let id = client.launch_json(launch(tiny_overrides(&[]), json!({ "kind": "slurm", "cluster": "testbox" }))).await;
    let status = server.wait_for(&id, |r| r.slurm.as_ref().filter(|s| s.expected_start.is_some()).map(|s| (**s).clone())).await;
    let start = status.expected_start.unwrap();
    assert!(start > submitted && start <= submitted + 6.0 * 60.0, "expected at {start}, submitted at {submitted}");
    assert_eq!((status.place, status.pending), (Some(1), Some(1)));
    let record = server.wait_for(&id, |r| r.reason().map(|_| r.clone())).await;
    assert_eq!(record.reason(), Some("pending in Slurm: Resources"));
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}
