//! One checkpoint per epoch: model weights, Adam state and the loss scale in
//! `checkpoints/last.ot` (libtorch's format), and where the run stands in `last.json`. Both are
//! written to temporary names and renamed, so a run killed mid-write keeps its previous
//! checkpoint intact. (The tutorial saves none; resuming is an addition.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scalebook_shared::rundir::{self, RunDir};
use serde::{Deserialize, Serialize};
use tch::Tensor;

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
}

pub struct Checkpoints {
    run_dir: RunDir,
    /// With model parallelism each tp-cp rank holds different shards: `Some(rank)` in the
    /// tp-cp group names this rank's file.
    shard: Option<usize>,
}

impl Checkpoints {
    pub fn new(run_dir: &Path, shard: Option<usize>) -> Checkpoints {
        Checkpoints { run_dir: RunDir::new(run_dir), shard }
    }

    fn tensors_path(&self) -> PathBuf {
        self.run_dir.checkpoint(self.shard)
    }

    fn position_path(&self) -> PathBuf {
        self.run_dir.checkpoint_position()
    }

    /// Writes this rank's tensors, and with `position` (world rank 0) where the run stands.
    /// Every tensor file is complete before the position file names the new epoch.
    pub fn save(&self, tensors: &[(String, Tensor)], position: Option<&Position>) -> Result<(), Error> {
        let dir = self.run_dir.file(rundir::CHECKPOINTS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let path = self.tensors_path();
        let tmp = path.with_extension("ot.tmp");
        Tensor::save_multi(tensors, &tmp)?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&tmp, e))?;
        let Some(position) = position else { return Ok(()) };
        let json = serde_json::to_vec_pretty(position).map_err(|e| Error::io(&path, e.into()))?;
        let json_tmp = self.position_path().with_extension("json.tmp");
        std::fs::write(&json_tmp, json).map_err(|e| Error::io(&json_tmp, e))?;
        std::fs::rename(&json_tmp, self.position_path()).map_err(|e| Error::io(&json_tmp, e))
    }

    pub fn load(&self) -> Result<(Position, HashMap<String, Tensor>), Error> {
        let resume = |message: String| Error::Resume { path: self.run_dir.file(rundir::CHECKPOINTS_DIR), message };
        let text = std::fs::read_to_string(self.position_path())
            .map_err(|e| resume(format!("no checkpoint ({}: {e}); start the run without --resume", self.position_path().display())))?;
        let position: Position =
            serde_json::from_str(&text).map_err(|e| resume(format!("{} is damaged: {e}", self.position_path().display())))?;
        let path = self.tensors_path();
        let tensors = Tensor::load_multi(&path).map_err(|e| resume(format!("{} cannot be read: {e}", path.display())))?;
        Ok((position, tensors.into_iter().collect()))
    }
}
