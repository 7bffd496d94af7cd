//! One checkpoint per epoch: model weights, optimizer state and the loss scale in libtorch's
//! format, and where the run stands in `last.json`. A run without ZeRO writes one file per
//! model shard (`checkpoints/last.ot`, or `last.mpK.ot` per tp-cp shard), from dp rank 0. A
//! ZeRO run writes sharded, as PyTorch's DCP does: every dp rank its own part of every unit
//! (`last.dpR-of-N.ot`), all at once and nothing gathered, with the layout they were cut in
//! (`last.shards.json`); it writes no `last.ot`. Any later layout reads either form
//! ([`super::reshard`]). Every file is written to a temporary name and renamed, and the
//! position, which names the form, is written once every rank's files are complete, so a run
//! killed mid-write keeps its previous checkpoint intact. (The tutorial saves none; resuming
//! is an addition.)

use std::path::{Path, PathBuf};

use scalebook_shared::rundir::{self, CheckpointFile, RunDir};
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

use super::reshard::{Saved, ShardLayout, Sharded};
use super::{GradSync, Learner};
use crate::Error;

/// Where a run stands after an epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// Epochs completed; the resumed run starts with epoch index `epochs_done`.
    pub epochs_done: u64,
    /// Optimizer steps taken (the scheduler's step count).
    pub steps: u64,
    /// The data order seed, so the resumed run draws the same batches.
    pub seed: u64,
    /// The effective config, to refuse resuming with a different one.
    pub config: serde_json::Value,
    /// The dp ranks a ZeRO run's checkpoint is cut over (one file each); `None` where each
    /// model shard is one file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_shards: Option<usize>,
}

pub struct Checkpoints {
    run_dir: RunDir,
    /// With model parallelism each tp-cp rank holds different shards: `Some(rank)` in the
    /// tp-cp group names this rank's file.
    shard: Option<usize>,
}

/// Writes `path` through `write` into a temporary file renamed into place once complete.
fn write_atomically(path: &Path, write: impl FnOnce(&Path) -> Result<(), Error>) -> Result<(), Error> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    write(&tmp)?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(&tmp, e))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), Error> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| Error::io(path, e.into()))?;
    write_atomically(path, |tmp| std::fs::write(tmp, json).map_err(|e| Error::io(tmp, e)))
}

impl Checkpoints {
    pub fn new(run_dir: &Path, shard: Option<usize>) -> Checkpoints {
        Checkpoints { run_dir: RunDir::new(run_dir), shard }
    }

    fn dir(&self) -> Result<PathBuf, Error> {
        let dir = self.run_dir.file(rundir::CHECKPOINTS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(dir)
    }

    fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> Result<(), Error> {
        write_atomically(path, |tmp| Ok(Tensor::save_multi(tensors, tmp)?))
    }

    /// Writes this model shard's every tensor in one file (a run without ZeRO, on dp rank 0).
    pub fn save(&self, tensors: &[(String, Tensor)]) -> Result<(), Error> {
        self.dir()?;
        Self::write_tensors(&self.run_dir.checkpoint(self.shard), tensors)
    }

    /// Writes dp rank `rank`'s part of a ZeRO run's checkpoint, cut as `layout` says (dp rank
    /// 0 writes the layout too). Each rank writes its own while the others write theirs.
    pub fn save_dp_shard(&self, tensors: &[(String, Tensor)], layout: &ShardLayout, rank: usize) -> Result<(), Error> {
        self.dir()?;
        Self::write_tensors(&self.run_dir.checkpoint_dp_shard(self.shard, rank, layout.dp), tensors)?;
        match rank {
            0 => write_json(&self.run_dir.checkpoint_layout(self.shard), layout),
            _ => Ok(()),
        }
    }

    /// On world rank 0, once every rank's files are complete: where the run stands, which
    /// makes the new checkpoint the one a resume reads; then the files of an older one written
    /// in another form (gathered, or cut over another dp) are removed.
    pub fn commit(&self, position: &Position) -> Result<(), Error> {
        write_json(&self.run_dir.checkpoint_position(), position)?;
        let dir = self.dir()?;
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&dir, e))?.path();
            let kind = path.file_name().and_then(|n| n.to_str()).and_then(CheckpointFile::of_name);
            let stale = match (kind, position.dp_shards) {
                (Some(CheckpointFile::Whole), Some(_)) | (Some(CheckpointFile::Layout), None) => true,
                (Some(CheckpointFile::DpShard { of }), current) => current != Some(of),
                _ => false,
            };
            if stale {
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            }
        }
        Ok(())
    }

    /// The error of a rank whose part of epoch `e`'s checkpoint was written when another
    /// rank's was not.
    pub fn not_written(&self, e: u64) -> Error {
        let message =
            format!("another rank could not write its part of epoch {e}'s checkpoint (its log says why); the previous one stands");
        Error::RunDir { path: self.run_dir.file(rundir::CHECKPOINTS_DIR), message }
    }

    /// Where the run stands and its checkpoint, in whichever form it was written (a sharded
    /// one's files are read as they are needed).
    pub fn load(&self) -> Result<(Position, Saved), Error> {
        let position_path = self.run_dir.checkpoint_position();
        let resume = |message: String| Error::Resume { path: self.run_dir.file(rundir::CHECKPOINTS_DIR), message };
        let text = std::fs::read_to_string(&position_path)
            .map_err(|e| resume(format!("no checkpoint ({}: {e}); start the run without --resume", position_path.display())))?;
        let position: Position = serde_json::from_str(&text).map_err(|e| resume(format!("{} is damaged: {e}", position_path.display())))?;
        let saved = match position.dp_shards {
            Some(dp) => {
                let file = |rank, of| self.run_dir.checkpoint_dp_shard(self.shard, rank, of);
                Saved::Sharded(Sharded::open(&self.run_dir.checkpoint_layout(self.shard), dp, file)?)
            }
            None => {
                let path = self.run_dir.checkpoint(self.shard);
                let tensors = Tensor::load_multi(&path).map_err(|e| resume(format!("{} cannot be read: {e}", path.display())))?;
                Saved::Whole { path, tensors: tensors.into_iter().collect() }
            }
        };
        Ok((position, saved))
    }
}

/// Puts a checkpoint back into `vs` and `learner`, after checking it was made with `config`.
/// With ZeRO each rank reads its own shards' part (resharded from whatever layout saved it);
/// without, every tensor whole.
pub(super) fn restore(
    vs: &nn::VarStore,
    learner: &mut Learner,
    position: &Position,
    saved: Saved,
    config: &serde_json::Value,
    run_dir: &Path,
) -> Result<(), Error> {
    let fail = |message: String| Error::Resume { path: run_dir.to_owned(), message };
    if &position.config != config {
        let differs = match (&position.config, config) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                a.iter().filter(|(k, v)| b.get(*k) != Some(v)).map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
            }
            _ => String::from("everything"),
        };
        return Err(fail(format!("the checkpoint was made with a different config ({differs} differ)")));
    }
    let shards = learner.sync.as_ref().and_then(GradSync::shards);
    let found = match shards {
        Some(shards) => {
            let mut found = shards.restore(&saved, &learner.optimizer.state())?;
            // What ZeRO does not shard: the variables not trained, and the loss scale.
            let untrained = vs.variables().into_iter().filter(|(_, v)| !v.requires_grad()).map(|(name, _)| name);
            let scaler = learner.scaler.iter().flat_map(|s| s.state()).map(|(name, _)| name);
            for name in untrained.chain(scaler) {
                if let Some(t) = saved.whole(&name)? {
                    found.insert(name, t);
                }
            }
            found
        }
        None => saved.into_whole()?,
    };
    let lookup = |name: &str| found.get(name).map(Tensor::shallow_clone);
    copy_variables(vs, shards.is_some(), &lookup).map_err(fail)?;
    learner.optimizer.load_state(lookup).map_err(fail)?;
    if let Some(scaler) = &mut learner.scaler {
        scaler.load_state(lookup).map_err(fail)?;
    }
    Ok(())
}

/// Copies the saved values into `vs`'s variables: every one without ZeRO (`sharded` false),
/// the untrained ones with it (its shards hold the rest, restored already).
fn copy_variables(vs: &nn::VarStore, sharded: bool, lookup: &dyn Fn(&str) -> Option<Tensor>) -> Result<(), String> {
    for (name, mut var) in vs.variables() {
        if sharded && var.requires_grad() {
            continue;
        }
        let value = lookup(&name).ok_or_else(|| format!("the checkpoint has no {name}"))?;
        tch::no_grad(|| var.f_copy_(&value)).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}
