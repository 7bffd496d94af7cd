//! Where runs execute. The local executor starts the trainer on this machine; a Slurm executor
//! will submit batch jobs. Both leave the same files in the run directory, so the rest of the
//! server (the state mapping, the live stream) does not care which one ran a run.

pub mod local;
pub mod process;
pub mod supervise;

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
