//! The local executor: the trainer as a process group on this machine.
//!
//! A run is started as `scalebook supervise --exit-file RUN/exit.json -- scalebook-train train
//! ...` in a new process group, with the server's working directory and stdout and stderr
//! going straight to `RUN/job.log`. A run of N ranks starts the trainer's own launcher
//! instead (`scalebook-train launch --nproc N -- train ...`), whose ranks stay in the same
//! group, so one signal still reaches every process of the run. No pipe connects it to the
//! server, so the run outlives a server that stops or is killed.
//!
//! Every argument is a separate argv word: no shell ever sees them.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use scalebook_shared::protocol::RunRecord;

use super::{TrainSpec, TrainerCommand, process};
use scalebook_shared::rundir;

/// How long a cancelled run gets to exit after SIGTERM before its group gets SIGKILL.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct LocalExecutor {
    /// The `scalebook` binary, run as the supervisor.
    pub supervisor: PathBuf,
    pub command: TrainerCommand,
}

/// A started run: the supervisor's child handle (to wait on) and what identifies its group.
pub struct Started {
    pub child: tokio::process::Child,
    pub pgid: u32,
    pub start_ticks: u64,
}

impl LocalExecutor {
    /// The trainer's arguments for `record`, writing into `run_dir`: `train ...` for one
    /// rank, `launch --nproc N -- train ...` for more, on the device the launch fixed, if any.
    pub fn trainer_args(&self, record: &RunRecord, run_dir: &Path) -> Vec<OsString> {
        let spec = TrainSpec { config: &record.config, seed: record.seed };
        let mut train = self.command.train_args(spec, run_dir);
        if let Some(device) = record.device {
            train.extend(["--device".into(), device.flag().into()]);
        }
        // A checkpoint from an earlier attempt (the run resumed after it failed): go on from it,
        // as a Slurm run's script does.
        if rundir::RunDir::new(run_dir).checkpoint_position().is_file() {
            train.push("--resume".into());
        }
        match record.layout.world() {
            1 => train,
            world => ["launch".into(), "--nproc".into(), world.to_string().into(), "--".into()].into_iter().chain(train).collect(),
        }
    }

    /// Starts `record`'s trainer under a supervisor in a new process group. Fails without
    /// leaving a process behind: either the supervisor started (and will record the trainer's
    /// end) or nothing did.
    pub fn start(&self, record: &RunRecord, run_dir: &Path) -> io::Result<Started> {
        let trainer = &self.command.trainer;
        if !trainer.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the trainer {} is not built (run `cargo build --bins`)", trainer.display()),
            ));
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(run_dir.join(rundir::JOB_LOG))?;
        // The supervisor keeps the run's time limit, so it holds across server restarts.
        let time_limit = record.time_limit_s;
        let child = tokio::process::Command::new(&self.supervisor)
            .arg("supervise")
            .arg("--exit-file")
            .arg(run_dir.join(rundir::EXIT))
            .args(time_limit.map(|secs| format!("--time-limit-secs={secs}")))
            .arg("--")
            .arg(trainer)
            .args(self.trainer_args(record, run_dir))
            .current_dir(&self.command.workdir)
            // Passive OpenMP waits unless the server was told otherwise: spinning threads on a
            // busy machine make one rank slower per sample than two (BENCHMARKS.md).
            .env("OMP_WAIT_POLICY", std::env::var_os("OMP_WAIT_POLICY").unwrap_or_else(|| "PASSIVE".into()))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()?;
        let pgid = child.id().ok_or_else(|| io::Error::other("the supervisor exited before it could be recorded"))?;
        // A supervisor that is already gone has start time 0: the waiter still collects it.
        let start_ticks = process::start_ticks(pgid).unwrap_or(0);
        Ok(Started { child, pgid, start_ticks })
    }

    /// Stops every process of the run: SIGTERM to the group, then SIGKILL to whatever is left
    /// after [`CANCEL_GRACE`].
    pub async fn terminate(pgid: u32, start_ticks: u64) -> io::Result<()> {
        if !process::leader_alive(pgid, start_ticks) {
            // The recorded group is gone (or its id now belongs to someone else's process).
            return Ok(());
        }
        process::signal_group(pgid, Signal::SIGTERM)?;
        let deadline = tokio::time::Instant::now() + CANCEL_GRACE;
        while process::group_exists(pgid) {
            if tokio::time::Instant::now() >= deadline {
                return process::signal_group(pgid, Signal::SIGKILL);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Kills what is left of group `pgid` once its leader (the supervisor) has exited: a run
    /// has ended when its supervisor has, and nothing it started may outlive it. Waits (a
    /// little) until the group is empty.
    pub async fn clear_group(pgid: u32) {
        if !process::group_exists(pgid) {
            return;
        }
        if let Err(e) = process::signal_group(pgid, Signal::SIGKILL) {
            tracing::warn!("cannot stop the rest of process group {pgid}: {e}");
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while process::group_exists(pgid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalebook_shared::layout::{Layout, Sizes};
    use scalebook_shared::protocol::{ExecutorSpec, RunId, RunState};

    fn executor() -> LocalExecutor {
        let command = TrainerCommand { trainer: "/bin/scalebook-train".into(), workdir: "/srv".into() };
        LocalExecutor { supervisor: "/bin/scalebook".into(), command }
    }

    fn record(dp: u32) -> RunRecord {
        let layout = Layout::new(Sizes { dp, ..Sizes::default() }, "tp-cp-dp").unwrap();
        let record = RunRecord::new(RunId::parse("r1").unwrap(), "cpu_tiny".into(), layout, ExecutorSpec::Local, 0.0, RunState::Queued);
        RunRecord { overrides: vec!["expdir=-rf; ls $HOME".into()], seed: Some(7), ..record }
    }

    fn words(args: &[OsString]) -> Vec<&str> {
        args.iter().map(|a| a.to_str().unwrap()).collect()
    }

    const TRAIN: [&str; 9] =
        ["train", "--yaml-config", "/srv/runs/r1/config.yaml", "--config", "cpu_tiny", "--run-dir", "/srv/runs/r1", "--seed", "7"];

    #[test]
    fn the_trainer_trains_the_runs_recorded_config_and_no_browser_text_reaches_its_arguments() {
        let args = executor().trainer_args(&record(1), Path::new("/srv/runs/r1"));
        assert_eq!(words(&args), TRAIN);
        assert!(!words(&args).iter().any(|w| w.contains("expdir")), "the overrides live in config.yaml only");
    }

    #[test]
    fn a_run_trains_on_the_device_its_launch_fixed() {
        let mut on_cpu = record(2);
        on_cpu.device = Some(scalebook_shared::protocol::TrainDevice::Cpu);
        let args = executor().trainer_args(&on_cpu, Path::new("/srv/runs/r1"));
        assert_eq!(words(&args)[words(&args).len() - 2..], ["--device", "cpu"]);
        assert!(!words(&executor().trainer_args(&record(2), Path::new("/srv/runs/r1"))).contains(&"--device"));
    }

    #[test]
    fn several_ranks_go_through_the_trainers_launcher() {
        let args = executor().trainer_args(&record(2), Path::new("/srv/runs/r1"));
        let mut expected = vec!["launch", "--nproc", "2", "--"];
        expected.extend(TRAIN);
        assert_eq!(words(&args), expected);
    }
}
