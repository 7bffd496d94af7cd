//! Real `squeue` and `scontrol` answers, read by the poller and mapped to run states: jobs that
//! complete, fail, get cancelled, wait for their start time, and ids Slurm does not know.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use scalebook_server::executor::slurm::poll::{JobRef, Observation, Poller};
use scalebook_server::executor::slurm::states::{Verdict, judge};
use scalebook_server::executor::slurm::{SlurmCommands, sbatch, scancel};
use scalebook_shared::protocol::RunState;

use scalebook_harness::slurm::SlurmCluster;

/// Writes a batch script `name.sh` with `options` as `#SBATCH` lines and `body` after them.
fn script(dir: &Path, name: &str, options: &[&str], body: &str) -> PathBuf {
    let path = dir.join(format!("{name}.sh"));
    let mut text = format!("#!/bin/bash\n#SBATCH --output={}/{name}.out\n#SBATCH --time=5\n", dir.display());
    for option in options {
        text.push_str(&format!("#SBATCH {option}\n"));
    }
    text.push_str(body);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

fn verdict(observation: &Option<Observation>) -> Option<Verdict> {
    match observation {
        Some(Observation::Seen(info)) => Some(judge(info, false, "")),
        _ => None,
    }
}

fn state(verdict: &Option<Verdict>) -> Option<RunState> {
    match verdict {
        Some(Verdict::Live(state, _) | Verdict::Ended(state, _)) => Some(*state),
        None => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_slurm_answers_map_to_the_run_states_people_need() {
    let cluster = SlurmCluster::start("states");
    let commands = SlurmCommands::new(Some(&cluster.bin));
    let dir = cluster.dir.join("jobs");
    std::fs::create_dir_all(&dir).unwrap();
    let scripts = [
        script(&dir, "ok", &[], "echo fine"),
        script(&dir, "failed", &[], "echo 'error: no data' >&2; exit 3"),
        script(&dir, "cancelled", &[], "sleep 300"),
        script(&dir, "later", &["--begin=now+1hour"], "true"),
    ];
    let mut jobs = Vec::new();
    for path in &scripts {
        let submitted = sbatch(&commands, path, &dir).await.unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
        jobs.push(JobRef { job_id: submitted.job_id, slurm_cluster: submitted.slurm_cluster, script: path.clone() });
    }
    scancel(&commands, jobs[2].job_id, None).await.unwrap();
    // An id Slurm never gave out, and a real id with another script (a reused id).
    jobs.push(JobRef { job_id: 999_999, slurm_cluster: None, script: dir.join("none.sh") });
    jobs.push(JobRef { script: dir.join("someone-else.sh"), ..jobs[0].clone() });

    let poller = Poller::new(commands);
    let deadline = Instant::now() + Duration::from_secs(120);
    let observations = loop {
        let observations = poller.observe(&jobs).await;
        let verdicts: Vec<_> = observations.iter().map(verdict).collect();
        if verdicts[..3].iter().all(|v| matches!(v, Some(Verdict::Ended(..)))) {
            break observations;
        }
        assert!(Instant::now() < deadline, "the jobs never ended: {observations:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let verdicts: Vec<_> = observations.iter().map(verdict).collect();
    let states: Vec<_> = verdicts.iter().map(state).collect();
    assert_eq!(states, [Some(RunState::Completed), Some(RunState::Failed), Some(RunState::Cancelled), Some(RunState::Queued), None, None]);
    assert_eq!(verdicts[1], Some(Verdict::Ended(RunState::Failed, Some("exited with status 3".into()))));
    assert_eq!(verdicts[3], Some(Verdict::Live(RunState::Queued, Some("pending in Slurm: BeginTime".into()))));
    let Some(Verdict::Ended(_, Some(reason))) = &verdicts[2] else { panic!("{verdicts:?}") };
    assert!(reason.contains("outside Scalebook"), "{reason}");
    assert_eq!(observations[4], Some(Observation::Gone), "an unknown id");
    assert_eq!(observations[5], Some(Observation::Gone), "a reused id");
    // Finished jobs were looked up after leaving the queue: this Slurm has no accounting,
    // which the poller found out from sacct itself.
    assert_eq!(poller.accounting(), Some(false));
}
