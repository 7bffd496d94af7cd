//! The local executor: the trainer as a process group on this machine.
//!
//! A run is started as `scalebook supervise --exit-file RUN/exit.json -- scalebook-train train
//! ...` in a new process group, with the server's working directory (relative data paths in
//! the configs resolve from there) and stdout and stderr going straight to `RUN/job.log`. No
//! pipe connects it to the server, so the run outlives a server that stops or is killed.
//!
//! Every argument is a separate argv word: no shell ever sees them. The browser's input
//! reaches the trainer only as `--config NAME` and `--set=KEY=VALUE` words, both validated by
//! `shared` first.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use scalebook_shared::protocol::RunRecord;

use super::process;
use crate::runs::store::{EXIT_FILE, JOB_LOG};

/// How long a cancelled run gets to exit after SIGTERM before its group gets SIGKILL.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct LocalExecutor {
    /// The `scalebook` binary, run as the supervisor.
    pub supervisor: PathBuf,
    /// The `scalebook-train` binary.
    pub trainer: PathBuf,
    /// The config file runs are launched from (what the server validated against).
    pub config_file: PathBuf,
    /// Where the trainer runs.
    pub workdir: PathBuf,
}

/// A started run: the supervisor's child handle (to wait on) and what identifies its group.
pub struct Started {
    pub child: tokio::process::Child,
    pub pgid: u32,
    pub start_ticks: u64,
}

impl LocalExecutor {
    /// The trainer's arguments for `record`, writing into `run_dir`.
    pub fn trainer_args(&self, record: &RunRecord, run_dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["train".into(), "--yaml-config".into(), self.config_file.clone().into()];
        args.extend(["--config".into(), record.config.clone().into()]);
        // `--set=K=V` as one word: a value starting with `-` can never be read as a flag.
        args.extend(record.overrides.iter().map(|o| OsString::from(format!("--set={o}"))));
        args.extend(["--run-dir".into(), run_dir.as_os_str().to_owned()]);
        if let Some(seed) = record.seed {
            args.extend(["--seed".into(), seed.to_string().into()]);
        }
        args
    }

    /// Starts `record`'s trainer under a supervisor in a new process group. Fails without
    /// leaving a process behind: either the supervisor started (and will record the trainer's
    /// end) or nothing did.
    pub fn start(&self, record: &RunRecord, run_dir: &Path) -> io::Result<Started> {
        if !self.trainer.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the trainer {} is not built (run `cargo build --bins`)", self.trainer.display()),
            ));
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(run_dir.join(JOB_LOG))?;
        let child = tokio::process::Command::new(&self.supervisor)
            .arg("supervise")
            .arg("--exit-file")
            .arg(run_dir.join(EXIT_FILE))
            .arg("--")
            .arg(&self.trainer)
            .args(self.trainer_args(record, run_dir))
            .current_dir(&self.workdir)
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
            eprintln!("warning: cannot stop the rest of process group {pgid}: {e}");
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
    use scalebook_shared::layout::Layout;
    use scalebook_shared::protocol::{ExecutorSpec, RunId};

    #[test]
    fn browser_input_becomes_single_argv_words() {
        let executor = LocalExecutor {
            supervisor: "/bin/scalebook".into(),
            trainer: "/bin/scalebook-train".into(),
            config_file: "/srv/config/ViT.yaml".into(),
            workdir: "/srv".into(),
        };
        let record = RunRecord {
            id: RunId::parse("r1").unwrap(),
            config: "cpu_tiny".into(),
            overrides: vec!["expdir=-rf; ls $HOME".into()],
            effective: Default::default(),
            layout: Layout::new(Default::default(), "tp-cp-dp").unwrap(),
            executor: ExecutorSpec::Local,
            seed: Some(7),
            history: vec![],
            created_at: 0.0,
            started_at: None,
            ended_at: None,
            handle: None,
            cancel_requested: false,
        };
        let args = executor.trainer_args(&record, Path::new("/srv/runs/r1"));
        let words: Vec<_> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            words,
            [
                "train",
                "--yaml-config",
                "/srv/config/ViT.yaml",
                "--config",
                "cpu_tiny",
                "--set=expdir=-rf; ls $HOME",
                "--run-dir",
                "/srv/runs/r1",
                "--seed",
                "7"
            ]
        );
    }
}
