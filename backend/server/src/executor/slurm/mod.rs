//! The Slurm executor: a run becomes a batch job. The server renders its script
//! ([`script`]), submits it with `sbatch --parsable`, watches every job it has with one
//! batched query per polling cycle ([`poll`]) and maps Slurm's verdict to a run state
//! ([`states`]). The metrics come from the files the job writes into the run directory, which
//! the server follows as it does a local run's.
//!
//! Slurm commands are run as argv words, never through a shell, and every one has a time
//! limit: a slurmctld that hangs must not hang the server.

pub mod poll;
pub mod script;
pub mod states;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use scalebook_shared::protocol::{RunHandle, SlurmJob};
use tokio::sync::Notify;

use self::poll::Poller;
use self::script::ScriptInput;
use super::{TrainSpec, TrainerCommand};
use crate::Error;

/// How long one Slurm command may take before it counts as failed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The polling period on a shared login node: Slurm's controller serves every user there.
pub const DEFAULT_POLL: Duration = Duration::from_secs(30);

pub struct SlurmExecutor {
    pub command: TrainerCommand,
    pub poller: Poller,
    /// Time between polling cycles ([`DEFAULT_POLL`] unless configured).
    pub poll_every: Duration,
    /// Starts the next cycle early: right after a submit or a cancel, the user wants to see
    /// the job's new state.
    wake: Notify,
}

impl SlurmExecutor {
    pub fn new(command: TrainerCommand, commands: SlurmCommands, poll_every: Duration) -> SlurmExecutor {
        SlurmExecutor { command, poller: Poller::new(commands), poll_every, wake: Notify::new() }
    }

    /// The batch script of `job` training `spec` into `run_dir`.
    pub fn script(&self, title: &str, job: &SlurmJob, spec: TrainSpec<'_>, run_dir: &Path) -> Result<String, Error> {
        let args = self.command.train_args(spec, run_dir);
        script::render(&ScriptInput { title, job, run_dir, workdir: &self.command.workdir, trainer: &self.command.trainer, args: &args })
    }

    /// Submits a saved script from the trainer's working directory.
    pub async fn submit(&self, script: &Path) -> Result<Submitted, Error> {
        let submitted = sbatch(self.poller.commands(), script, &self.command.workdir).await;
        self.poll_soon();
        submitted
    }

    pub async fn cancel(&self, job_id: u64, slurm_cluster: Option<&str>) -> Result<(), Error> {
        let cancelled = scancel(self.poller.commands(), job_id, slurm_cluster).await;
        self.poll_soon();
        cancelled
    }

    pub fn poll_soon(&self) {
        self.wake.notify_one();
    }

    /// Waits until the next polling cycle is due.
    pub async fn next_cycle(&self) {
        tokio::select! {
            _ = tokio::time::sleep(self.poll_every) => {}
            _ = self.wake.notified() => {}
        }
    }
}

/// The Slurm client commands, by path: the ones on `PATH` unless a directory is given.
#[derive(Debug, Clone)]
pub struct SlurmCommands {
    pub sbatch: PathBuf,
    pub squeue: PathBuf,
    pub sacct: PathBuf,
    pub scontrol: PathBuf,
    pub scancel: PathBuf,
}

impl SlurmCommands {
    pub fn new(bin_dir: Option<&Path>) -> SlurmCommands {
        let path = |name: &str| bin_dir.map_or_else(|| PathBuf::from(name), |dir| dir.join(name));
        SlurmCommands {
            sbatch: path("sbatch"),
            squeue: path("squeue"),
            sacct: path("sacct"),
            scontrol: path("scontrol"),
            scancel: path("scancel"),
        }
    }
}

/// A submitted job, as `sbatch --parsable` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    pub job_id: u64,
    /// The cluster, on sites that run several.
    pub slurm_cluster: Option<String>,
}

impl Submitted {
    pub fn handle(self) -> RunHandle {
        RunHandle::Slurm { job_id: self.job_id, slurm_cluster: self.slurm_cluster }
    }
}

/// What a Slurm command printed when it ran to the end, whatever its status.
#[derive(Debug)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The first line of stderr (Slurm puts the reason there), or the status.
    pub fn complaint(&self) -> String {
        self.stderr.lines().map(str::trim).find(|l| !l.is_empty()).map_or_else(|| "it failed without a message".to_owned(), str::to_owned)
    }

    /// `command`'s failure, with its reason.
    pub fn refusal(&self, command: &'static str) -> Error {
        Error::SlurmRefused { command, reason: self.complaint() }
    }
}

/// Runs `program args` in `dir` (the server's own when `None`).
pub async fn run(program: &Path, args: &[&OsStr], dir: Option<&Path>) -> Result<Output, Error> {
    let mut command = tokio::process::Command::new(program);
    command.args(args).env("SLURM_TIME_FORMAT", states::TIME_FORMAT).stdin(Stdio::null()).kill_on_drop(true);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let program = program.display().to_string();
    let output = match tokio::time::timeout(COMMAND_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(source)) => return Err(Error::SlurmUnrunnable { program, source }),
        Err(_) => return Err(Error::SlurmTimeout { program, secs: COMMAND_TIMEOUT.as_secs() }),
    };
    Ok(Output {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Submits `script` from `workdir`; the error is sbatch's own reason.
pub async fn sbatch(commands: &SlurmCommands, script: &Path, workdir: &Path) -> Result<Submitted, Error> {
    let output = run(&commands.sbatch, &[OsStr::new("--parsable"), script.as_os_str()], Some(workdir)).await?;
    if !output.success {
        return Err(output.refusal("sbatch"));
    }
    parse_parsable(&output.stdout).ok_or_else(|| Error::SlurmUnreadable { command: "sbatch", answer: output.stdout.trim().to_owned() })
}

/// `scancel`s a job. A job that has already ended is not an error: Slurm answers with success
/// or "already completing", and the next poll records the end either way.
pub async fn scancel(commands: &SlurmCommands, job_id: u64, slurm_cluster: Option<&str>) -> Result<(), Error> {
    let id = job_id.to_string();
    let mut args = vec![OsStr::new(&id)];
    let cluster_arg = slurm_cluster.map(|c| format!("--clusters={c}"));
    if let Some(arg) = &cluster_arg {
        args.push(OsStr::new(arg));
    }
    let output = run(&commands.scancel, &args, None).await?;
    if output.success { Ok(()) } else { Err(output.refusal("scancel")) }
}

/// `jobid` or `jobid;cluster`, the last non-empty line of `sbatch --parsable` (a site's
/// submit filter may print notices before it). A cluster name that is not a plain word is
/// refused with the rest: it becomes a command argument later.
fn parse_parsable(stdout: &str) -> Option<Submitted> {
    let line = stdout.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let (id, cluster) = match line.split_once(';') {
        Some((id, cluster)) => (id, Some(cluster)),
        None => (line, None),
    };
    let plain = |c: &str| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch));
    if cluster.is_some_and(|c| !plain(c)) {
        return None;
    }
    Some(Submitted { job_id: id.parse().ok()?, slurm_cluster: cluster.map(str::to_owned) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsable_output_gives_the_job_id_and_cluster() {
        assert_eq!(parse_parsable("4242\n"), Some(Submitted { job_id: 4242, slurm_cluster: None }));
        assert_eq!(parse_parsable("4242;perlmutter\n"), Some(Submitted { job_id: 4242, slurm_cluster: Some("perlmutter".into()) }));
        assert_eq!(parse_parsable("NOTICE: using qos shared\n17\n"), Some(Submitted { job_id: 17, slurm_cluster: None }));
        for bad in ["", "Submitted batch job 12", "12;a b", "12;$(x)", "-1"] {
            assert_eq!(parse_parsable(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn commands_report_failure_with_their_first_stderr_line() {
        let sh = Path::new("/bin/sh");
        let args = [OsStr::new("-c"), OsStr::new("echo out; echo 'sbatch: error: Invalid account' >&2; echo more >&2; exit 1")];
        let output = run(sh, &args, None).await.unwrap();
        assert!(!output.success);
        assert_eq!(output.stdout, "out\n");
        assert_eq!(output.complaint(), "sbatch: error: Invalid account");
        assert_eq!(output.refusal("sbatch").to_string(), "sbatch refused: sbatch: error: Invalid account");
        let missing = run(Path::new("/nonexistent/sbatch"), &[], None).await.unwrap_err();
        assert!(matches!(&missing, Error::SlurmUnrunnable { program, .. } if program == "/nonexistent/sbatch"), "{missing}");
    }
}
