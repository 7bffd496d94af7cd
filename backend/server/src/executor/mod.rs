//! Where runs execute. The local executor starts the trainer on this machine; the Slurm
//! executor submits batch jobs. Both run the same trainer command and leave the same files in
//! the run directory, so the rest of the server (the state mapping, the live stream) does not
//! care which one ran a run.

pub mod local;
pub mod process;
pub mod slurm;
pub mod supervise;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use serde::{Deserialize, Serialize};

/// How a run's trainer ended: `exit.json`, written by the supervisor that waited for it, or,
/// when the supervisor itself was killed, the supervisor's own status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// The exit code, when the process exited.
    #[serde(default)]
    pub code: Option<i32>,
    /// The signal that killed the process, when one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// Why the trainer could not be started at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ExitRecord {
    pub fn from_status(status: ExitStatus) -> ExitRecord {
        use std::os::unix::process::ExitStatusExt;
        ExitRecord { code: status.code(), signal: status.signal(), error: None }
    }
}

/// The trainer as every executor runs it: the same binary, config file and working directory
/// (relative data paths in the configs resolve from it), and the same `train` arguments,
/// whether a local launcher or `srun` starts the ranks.
#[derive(Debug, Clone)]
pub struct TrainerCommand {
    /// The `scalebook-train` binary.
    pub trainer: PathBuf,
    /// The config file runs are launched from (what the server validated against).
    pub config_file: PathBuf,
    pub workdir: PathBuf,
}

/// What a run trains: the parts of a launch that become trainer arguments.
#[derive(Debug, Clone, Copy)]
pub struct TrainSpec<'a> {
    pub config: &'a str,
    pub overrides: &'a [String],
    pub seed: Option<u64>,
}

impl TrainerCommand {
    /// The `train` subcommand and its arguments, writing into `run_dir`. The browser's input
    /// reaches the trainer only as `--config NAME` and `--set=KEY=VALUE` words, both validated
    /// by `shared` first.
    pub fn train_args(&self, spec: TrainSpec<'_>, run_dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["train".into(), "--yaml-config".into(), self.config_file.clone().into()];
        args.extend(["--config".into(), spec.config.into()]);
        // `--set=K=V` as one word: a value starting with `-` can never be read as a flag.
        args.extend(spec.overrides.iter().map(|o| OsString::from(format!("--set={o}"))));
        args.extend(["--run-dir".into(), run_dir.as_os_str().to_owned()]);
        if let Some(seed) = spec.seed {
            args.extend(["--seed".into(), seed.to_string().into()]);
        }
        args
    }
}
