//! Where runs execute. The local executor starts the trainer on this machine; the Slurm
//! executor submits batch jobs. Both run the same trainer command and leave the same files in
//! the run directory, so the rest of the server (the state mapping, the live stream) does not
//! care which one ran a run.

pub mod local;
pub mod outcome;
pub mod process;
pub mod slurm;
pub mod supervise;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use scalebook_shared::rundir::{self, ExitRecord};

/// The exit record of a trainer (or supervisor) process that ended with `status`.
pub fn exit_record(status: ExitStatus) -> ExitRecord {
    use std::os::unix::process::ExitStatusExt;
    ExitRecord { code: status.code(), signal: status.signal(), error: None, time_limit_s: None }
}

/// The trainer as every executor runs it: the same binary and working directory (relative
/// data paths in the configs resolve from it), and the same `train` arguments, whether a local
/// launcher or `srun` starts the ranks.
#[derive(Debug, Clone)]
pub struct TrainerCommand {
    /// The `scalebook-train` binary.
    pub trainer: PathBuf,
    pub workdir: PathBuf,
}

/// What a run trains, beyond its recorded config.
#[derive(Debug, Clone, Copy)]
pub struct TrainSpec<'a> {
    /// The name of the config the run's `config.yaml` holds.
    pub config: &'a str,
    pub seed: Option<u64>,
}

impl TrainerCommand {
    /// The `train` subcommand and its arguments for the run in `run_dir`. The trainer trains
    /// the run's own `config.yaml`, which the server validated and recorded before anything
    /// started (overrides applied), never the project's config file: what was validated is
    /// what trains, however late a batch job starts. The browser's input reaches the trainer
    /// only inside that file and as the config's name, validated by `shared` first.
    pub fn train_args(&self, spec: TrainSpec<'_>, run_dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["train".into(), "--yaml-config".into(), run_dir.join(rundir::CONFIG).into()];
        args.extend(["--config".into(), spec.config.into()]);
        args.extend(["--run-dir".into(), run_dir.as_os_str().to_owned()]);
        if let Some(seed) = spec.seed {
            args.extend(["--seed".into(), seed.to_string().into()]);
        }
        args
    }
}
