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
/// Per-epoch checkpoints (`last.ot`, or `last.mpK.ot` per model-parallel shard; a ZeRO run's
/// `last.dpR-of-N.ot` per dp rank with `last.shards.json`, its layout; and `last.json`: where
/// the run stands).
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

    /// The checkpoint of model-parallel shard `shard` (`None`: the whole model), as a run
    /// without ZeRO writes it: one file holds the shard's every tensor.
    pub fn checkpoint(&self, shard: Option<usize>) -> PathBuf {
        self.0.join(CHECKPOINTS_DIR).join(checkpoint_file(shard, None))
    }

    /// Dp rank `rank`'s file of a ZeRO run's checkpoint of model-parallel shard `shard`, cut
    /// over `of` dp ranks: its part of every unit, written by that rank alone.
    pub fn checkpoint_dp_shard(&self, shard: Option<usize>, rank: usize, of: usize) -> PathBuf {
        self.0.join(CHECKPOINTS_DIR).join(checkpoint_file(shard, Some((rank, of))))
    }

    /// How a ZeRO run's checkpoint of model-parallel shard `shard` was cut over dp (its units,
    /// their parameters and offsets), so that another layout can read it.
    pub fn checkpoint_layout(&self, shard: Option<usize>) -> PathBuf {
        self.0.join(CHECKPOINTS_DIR).join(layout_file(shard))
    }

    /// Where the run stands at its last checkpoint (epoch, step, scaler), written by rank 0
    /// after every shard's tensors.
    pub fn checkpoint_position(&self) -> PathBuf {
        self.0.join(CHECKPOINTS_DIR).join("last.json")
    }
}

/// `.mpK` for model-parallel shard K, nothing for a whole model.
fn mp_part(shard: Option<usize>) -> String {
    shard.map_or(String::new(), |k| format!(".mp{k}"))
}

/// The name of a checkpoint's tensor file: of model-parallel shard `shard`, and with
/// `dp_shard` (rank, of) of one dp rank's part of a ZeRO run's.
fn checkpoint_file(shard: Option<usize>, dp_shard: Option<(usize, usize)>) -> String {
    let dp = dp_shard.map_or(String::new(), |(rank, of)| format!(".dp{rank}-of-{of}"));
    format!("last{}{dp}.ot", mp_part(shard))
}

/// The name of the layout record of model-parallel shard `shard`'s checkpoint cut over dp.
fn layout_file(shard: Option<usize>) -> String {
    format!("last{}.shards.json", mp_part(shard))
}

/// What a file of [`CHECKPOINTS_DIR`] belongs to, read from its name: what tells the files of
/// an older checkpoint, written in another form, from the current one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointFile {
    /// A whole model shard's tensors (`last.ot`, `last.mp1.ot`).
    Whole,
    /// One dp rank's part of a checkpoint cut over `of` ranks (`last.dp0-of-4.ot`).
    DpShard { of: usize },
    /// The layout of a checkpoint cut over dp (`last.shards.json`).
    Layout,
}

impl CheckpointFile {
    /// The kind of checkpoint file `file` is (`None`: not one; `last.json` is none of these).
    pub fn of_name(file: &str) -> Option<CheckpointFile> {
        let rest = file.strip_prefix("last")?;
        if let Some(mp) = rest.strip_suffix(".shards.json") {
            let (shard, rest) = split_mp(mp)?;
            return (rest.is_empty() && layout_file(shard) == file).then_some(CheckpointFile::Layout);
        }
        let (shard, rest) = split_mp(rest.strip_suffix(".ot")?)?;
        let dp_shard = match rest.strip_prefix(".dp") {
            Some(dp) => {
                let (rank, of) = dp.split_once("-of-")?;
                Some((rank.parse().ok()?, of.parse().ok()?))
            }
            None if rest.is_empty() => None,
            None => return None,
        };
        let kind = dp_shard.map_or(CheckpointFile::Whole, |(_, of)| CheckpointFile::DpShard { of });
        (checkpoint_file(shard, dp_shard) == file).then_some(kind)
    }
}

/// A leading `.mpK` of `rest` as the shard K, and what follows it.
fn split_mp(rest: &str) -> Option<(Option<usize>, &str)> {
    let Some(mp) = rest.strip_prefix(".mp") else { return Some((None, rest)) };
    let digits = mp.find(|c: char| !c.is_ascii_digit()).unwrap_or(mp.len());
    Some((Some(mp[..digits].parse().ok()?), &mp[digits..]))
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
        assert_eq!(dir.checkpoint_dp_shard(None, 1, 4), Path::new("/runs/r1/checkpoints/last.dp1-of-4.ot"));
        assert_eq!(dir.checkpoint_dp_shard(Some(2), 0, 2), Path::new("/runs/r1/checkpoints/last.mp2.dp0-of-2.ot"));
        assert_eq!(dir.checkpoint_layout(None), Path::new("/runs/r1/checkpoints/last.shards.json"));
        assert_eq!(dir.checkpoint_layout(Some(1)), Path::new("/runs/r1/checkpoints/last.mp1.shards.json"));
    }

    #[test]
    fn a_checkpoint_files_kind_reads_back_from_its_name_only() {
        let name = |path: PathBuf| path.file_name().unwrap().to_str().unwrap().to_owned();
        let kind = |path: PathBuf| CheckpointFile::of_name(&name(path));
        let dir = RunDir::new("/runs/r1");
        assert_eq!(kind(dir.checkpoint(None)), Some(CheckpointFile::Whole));
        assert_eq!(kind(dir.checkpoint(Some(3))), Some(CheckpointFile::Whole));
        assert_eq!(kind(dir.checkpoint_dp_shard(None, 3, 4)), Some(CheckpointFile::DpShard { of: 4 }));
        assert_eq!(kind(dir.checkpoint_dp_shard(Some(1), 0, 2)), Some(CheckpointFile::DpShard { of: 2 }));
        assert_eq!(kind(dir.checkpoint_layout(None)), Some(CheckpointFile::Layout));
        assert_eq!(kind(dir.checkpoint_layout(Some(12))), Some(CheckpointFile::Layout));
        for other in ["last.json", "last.ot.tmp", "last.dp1.ot", "last.mp.ot", "last.dp01-of-4.ot", "last.x.ot", "last.mp1x.shards.json"] {
            assert_eq!(CheckpointFile::of_name(other), None, "{other}");
        }
    }
}
