//! One checkpoint per epoch: model weights, Adam state and the loss scale in
//! `checkpoints/last.ot` (libtorch's format), and where the run stands in `last.json`. Both are
//! written to temporary names and renamed, so a run killed mid-write keeps its previous
//! checkpoint intact. (The tutorial saves none; resuming is an addition.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
    dir: PathBuf,
}

impl Checkpoints {
    pub fn new(run_dir: &Path) -> Checkpoints {
        Checkpoints { dir: run_dir.join("checkpoints") }
    }

    fn tensors_path(&self) -> PathBuf {
        self.dir.join("last.ot")
    }

    fn position_path(&self) -> PathBuf {
        self.dir.join("last.json")
    }

    pub fn save(&self, tensors: &[(String, Tensor)], position: &Position) -> Result<(), Error> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let tmp = self.dir.join("last.ot.tmp");
        Tensor::save_multi(tensors, &tmp)?;
        let json = serde_json::to_vec_pretty(position).map_err(|e| Error::io(&tmp, e.into()))?;
        let json_tmp = self.dir.join("last.json.tmp");
        std::fs::write(&json_tmp, json).map_err(|e| Error::io(&json_tmp, e))?;
        // Tensors first: a position file never points at tensors that are not there yet.
        std::fs::rename(&tmp, self.tensors_path()).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&json_tmp, self.position_path()).map_err(|e| Error::io(&json_tmp, e))
    }

    pub fn load(&self) -> Result<(Position, HashMap<String, Tensor>), Error> {
        let resume = |message: String| Error::Resume { path: self.dir.clone(), message };
        let text = std::fs::read_to_string(self.position_path())
            .map_err(|e| resume(format!("no checkpoint ({}: {e}); start the run without --resume", self.position_path().display())))?;
        let position: Position = serde_json::from_str(&text).map_err(|e| resume(format!("last.json is damaged: {e}")))?;
        let tensors = Tensor::load_multi(self.tensors_path()).map_err(|e| resume(format!("last.ot cannot be read: {e}")))?;
        Ok((position, tensors.into_iter().collect()))
    }
}
