//! The run directory: the contract between the server (which creates it and follows it), the
//! supervisor and the Slurm script (which record how the trainer ended) and the trainer (which
//! reads its config there and writes its outputs there). Every file name of a run directory is
//! written here and nowhere else, so the parts cannot drift apart.
//!
//! A rank needs nothing but its run directory: the server records the effective config
//! ([`CONFIG`]) before anything starts, and the trainer trains exactly that file.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The record of a run (config name, overrides, layout, state history), written by the server.
pub const RECORD: &str = "run.json";
/// The effective config the server validated, as a one-entry YAML file: what the trainer trains.
pub const CONFIG: &str = "config.yaml";
/// Everything the ranks print (stdout and stderr), written by the executor.
pub const JOB_LOG: &str = "job.log";
/// The trainer's log lines (the tutorial's `out.log`).
pub const OUT_LOG: &str = "out.log";
/// The trainer's metric points, one JSON object a line, flushed every step.
pub const METRICS: &str = "metrics.jsonl";
/// How the trainer ended ([`ExitRecord`]), written by the supervisor that waited for it (local
/// runs) or by the batch script after `srun` (Slurm runs).
pub const EXIT: &str = "exit.json";
/// The batch script a Slurm run was submitted with.
pub const SCRIPT: &str = "job.sbatch";
/// TensorBoard's event files.
pub const EVENTS_DIR: &str = "logs";
/// Per-epoch checkpoints (`last.ot`, or `last.mpK.ot` per model-parallel shard, and
/// `last.json`: where the run stands).
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// The step profiles, one Chrome-trace JSON file per rank ([`crate::profile::trace_file`]).
pub const PROFILE_DIR: &str = "profile";
/// A class run's files fetched from the instructor's class listener when a page asked for them
/// (maps, profiles, the run's config and logs), kept under their names there with `/` as `__`.
pub const UPSTREAM_DIR: &str = "upstream";
/// The weather maps, a PNG per epoch and channel ([`crate::weather::map_file`]), listed in
/// [`MAPS_INDEX`].
pub const MAPS_DIR: &str = "maps";
/// The list of the maps drawn so far ([`crate::weather::MapIndex`]), inside [`MAPS_DIR`].
pub const MAPS_INDEX: &str = "index.json";
/// A run read from a TensorBoard logdir: how far its event files have been copied into
/// [`METRICS`] (bytes read of each file, and the length of [`METRICS`] then), written by the
/// server after each copy so that a restarted one copies every point exactly once.
pub const LOGDIR_PROGRESS: &str = "logdir.json";

/// What the run was predicted to do before it started ([`crate::estimate::Prediction`]),
/// written by the server at launch, beside [`CONFIG`]: never fitted to the run afterwards.
pub const PREDICTION: &str = "prediction.json";

/// The files of a run that the API serves; nothing else in a run directory is reachable.
pub const SERVED: [&str; 7] = [METRICS, OUT_LOG, JOB_LOG, RECORD, CONFIG, SCRIPT, PREDICTION];

/// Exit statuses every Scalebook program and the run states agree on.
pub mod exit_code {
    /// The input was refused before anything started (a config, a flag, missing data): the
    /// message names the field and the rule.
    pub const INVALID_INPUT: u8 = 2;
}

/// A run directory's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir(PathBuf);

impl RunDir {
    pub fn new(dir: impl Into<PathBuf>) -> RunDir {
        RunDir(dir.into())
    }

    /// `name` inside the run directory (one of this module's constants).
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The checkpoint of model-parallel shard `shard` (`None`: the whole model).
    pub fn checkpoint(&self, shard: Option<usize>) -> PathBuf {
        let name = match shard {
            Some(k) => format!("last.mp{k}.ot"),
            None => "last.ot".to_owned(),
        };
        self.0.join(CHECKPOINTS_DIR).join(name)
    }

    /// Where the run stands at its last checkpoint (epoch, step, scaler), written by rank 0
    /// after every shard's tensors.
    pub fn checkpoint_position(&self) -> PathBuf {
        self.0.join(CHECKPOINTS_DIR).join("last.json")
    }
}

/// Where each rank ran: one file per rank ([`placement_file`]), written by the rank as it
/// starts. What a run's rank grid sets beside the placement its layout predicts, and what
/// says which node a failed rank was on.
pub const PLACEMENT_DIR: &str = "placement";

/// Rank `rank`'s file in [`PLACEMENT_DIR`].
pub fn placement_file(rank: usize) -> String {
    format!("rank{rank}.json")
}

/// The rank a [`placement_file`] belongs to, from its name (`rank3.json` is rank 3).
pub fn placement_rank(file: &str) -> Option<usize> {
    let rank = file.strip_prefix("rank")?.strip_suffix(".json")?;
    rank.parse().ok().filter(|r| placement_file(*r) == file)
}

/// One rank's place ([`PLACEMENT_DIR`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankPlacement {
    pub rank: usize,
    /// Its rank among the ranks of its node (`LOCAL_RANK`, Slurm's `SLURM_LOCALID`).
    pub local_rank: usize,
    /// The node: Slurm's name for it (`SLURMD_NODENAME`) in a Slurm job, else the host name.
    pub node: String,
}

/// How a run's trainer ended ([`EXIT`]): exactly one shape, whoever writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
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
    /// The run was stopped at this time limit, in seconds (a learner's run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<u64>,
}

impl ExitRecord {
    /// The record as one line of JSON with the exit code left as `code_placeholder`: how a
    /// shell script (the Slurm batch script, after `srun`) writes this same shape with `$status`.
    pub fn template_with_code(code_placeholder: &str) -> String {
        const MARK: i32 = 424_242;
        let json = serde_json::to_string(&ExitRecord { code: Some(MARK), ..ExitRecord::default() }).unwrap_or_default();
        json.replace(&MARK.to_string(), code_placeholder)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_shell_template_reads_back_as_an_exit_record() {
        let template = ExitRecord::template_with_code("$status");
        assert_eq!(template, r#"{"code":$status,"signal":null}"#);
        let written = template.replace("$status", "3");
        assert_eq!(serde_json::from_str::<ExitRecord>(&written).unwrap(), ExitRecord { code: Some(3), ..ExitRecord::default() });
    }

    #[test]
    fn a_placement_files_rank_reads_back_from_its_name_only() {
        assert_eq!(placement_rank(&placement_file(7)), Some(7));
        for other in ["rank.json", "rank07.json", "rank+7.json", "rank7.json.tmp", "summary.json"] {
            assert_eq!(placement_rank(other), None, "{other}");
        }
    }

    #[test]
    fn checkpoints_are_named_per_shard() {
        let dir = RunDir::new("/runs/r1");
        assert_eq!(dir.checkpoint(None), Path::new("/runs/r1/checkpoints/last.ot"));
        assert_eq!(dir.checkpoint(Some(2)), Path::new("/runs/r1/checkpoints/last.mp2.ot"));
        assert_eq!(dir.file(METRICS), Path::new("/runs/r1/metrics.jsonl"));
    }
}
