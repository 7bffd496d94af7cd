//! Numbers that follow from a config and a world size: the batch per rank, the token sequence
//! and its context-parallel split, iterations and epochs, the learning-rate rule, and the
//! parameter count.

use serde::{Deserialize, Serialize};

use super::{TrainConfig, schedule};
use crate::Error;

/// The tutorial's ERA5 training set: 26 yearly files of 1460 six-hourly steps. Used when the
/// real dataset size is not known (in the browser), so epochs match the tutorial's logs.
pub const ERA5_TRAIN_SAMPLES: usize = 37_960;

/// MLP hidden width = `MLP_RATIO · embed_dim` (the tutorial's `mlp_ratio=4`).
pub const MLP_RATIO: usize = 4;

/// Everything [`TrainConfig::derived`] computes, ready to show or send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    pub world: usize,
    pub tp: usize,
    pub cp: usize,
    pub dp: usize,
    /// Pipeline stages (1 in all the tutorial trains).
    pub pp: usize,
    /// Samples per optimizer step (`dp × local_batch_size` when that is set).
    pub global_batch_size: usize,
    pub local_batch_size: usize,
    /// Patches along H and W.
    pub patch_grid: [usize; 2],
    pub tokens_per_sample: usize,
    /// Tokens held by each cp rank, in cp-rank order.
    pub cp_split: Vec<usize>,
    pub head_dim: usize,
    pub heads_per_tp_rank: usize,
    pub mlp_width: usize,
    /// The dataset size the epoch numbers assume (given, or the tutorial's ERA5 size).
    pub dataset_samples: usize,
    /// Whether `dataset_samples` is the tutorial's size rather than a known one.
    pub dataset_assumed: bool,
    /// Training samples actually used (`limit_nsamples` applied).
    pub train_samples: usize,
    pub iters_per_epoch: usize,
    pub num_epochs: usize,
    /// Optimizer steps the run takes: `num_epochs × iters_per_epoch`, at most `num_iters`.
    pub steps: usize,
    /// The learning rate after the last step; above 0 whenever `steps < num_iters`.
    pub final_lr: f64,
    /// `5e-4 · sqrt(global_batch_size / 16)` rounded to 3 significant digits, as the tutorial
    /// writes it.
    pub lr_sqrt_rule: f64,
    pub params: ParamCount,
}

/// Trainable parameters of the ViT, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamCount {
    /// Conv `C → D`, kernel = stride = p, with bias.
    pub patch_embed: u64,
    /// One learned D-vector per token.
    pub pos_embed: u64,
    /// `depth · (12·D² + 13·D)`: q, k, v, proj, fc1, fc2 with biases and two LayerNorms.
    pub blocks: u64,
    pub final_norm: u64,
    /// `Linear(D, out·p²)` without bias.
    pub head: u64,
    pub total: u64,
}

impl ParamCount {
    pub fn of(config: &TrainConfig) -> ParamCount {
        // Saturating, because a form can hold any size before validation says it is absurd.
        let n = |x: usize| x as u64;
        let mul = |factors: &[u64]| factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f));
        let (d, p) = (n(config.embed_dim), n(config.patch_size));
        let tokens = n(tokens_per_sample(config.img_size, config.patch_size));
        let patch_embed = mul(&[n(config.n_in_channels), p, p, d]).saturating_add(d);
        let pos_embed = mul(&[tokens, d]);
        let per_block = mul(&[12, d, d]).saturating_add(mul(&[13, d]));
        let blocks = mul(&[n(config.depth), per_block]);
        let final_norm = mul(&[2, d]);
        let head = mul(&[d, n(config.n_out_channels), p, p]);
        let total = [patch_embed, pos_embed, blocks, final_norm, head].into_iter().fold(0u64, u64::saturating_add);
        ParamCount { patch_embed, pos_embed, blocks, final_norm, head, total }
    }
}

impl TrainConfig {
    /// The derived values for a run of `world` ranks on a training set of `dataset_samples`
    /// samples (the tutorial's ERA5 size when `None`). Fails with every validation problem
    /// when the config is not valid for that world.
    pub fn derived(&self, world: usize, dataset_samples: Option<usize>) -> Result<Derived, Error> {
        self.problems(world, dataset_samples).into_result(())?;
        let (tp, cp) = (self.tensor_parallel, self.context_parallel);
        let dp = world / self.model_parallel();
        let local = self.local_batch_size.unwrap_or(self.global_batch_size / dp);
        let dataset = dataset_samples.unwrap_or(ERA5_TRAIN_SAMPLES);
        let train_samples = self.limit_nsamples.map_or(dataset, |limit| limit.min(dataset));
        let iters_per_epoch = iters_per_epoch(train_samples, dp, local);
        let num_epochs = self.num_iters.checked_div(iters_per_epoch).unwrap_or(0);
        let steps = num_epochs * iters_per_epoch;
        let global_batch_size = dp.saturating_mul(local);
        let tokens = tokens_per_sample(self.img_size, self.patch_size);
        Ok(Derived {
            world,
            tp,
            cp,
            dp,
            pp: self.pipeline_parallel,
            global_batch_size,
            local_batch_size: local,
            patch_grid: self.img_size.map(|side| side / self.patch_size),
            tokens_per_sample: tokens,
            cp_split: compute_split_shapes(tokens, cp),
            head_dim: self.embed_dim / self.num_heads,
            heads_per_tp_rank: self.num_heads / tp,
            mlp_width: MLP_RATIO.saturating_mul(self.embed_dim),
            dataset_samples: dataset,
            dataset_assumed: dataset_samples.is_none(),
            train_samples,
            iters_per_epoch,
            num_epochs,
            steps,
            final_lr: schedule::lr_at(self, steps),
            lr_sqrt_rule: crate::numbers::round_significant(schedule::sqrt_rule_lr(global_batch_size), 3),
            params: ParamCount::of(self),
        })
    }
}

/// Tokens per sample: one per patch, `H/p · W/p` (45 × 90 = 4050 for `base`).
pub fn tokens_per_sample(img_size: [usize; 2], patch_size: usize) -> usize {
    let [h, w] = img_size.map(|side| side.checked_div(patch_size).unwrap_or(0));
    h.saturating_mul(w)
}

/// Optimizer steps per epoch as PyTorch's `DistributedSampler` + `drop_last` give them: each
/// dp rank gets `ceil(samples / dp)` samples and drops its last partial batch.
pub fn iters_per_epoch(samples: usize, dp: usize, local_batch_size: usize) -> usize {
    samples.div_ceil(dp.max(1)) / local_batch_size.max(1)
}

/// How the tutorial splits `size` tokens over `n` context-parallel ranks: chunks of
/// `ceil(size / n)` with the remainder last, unless that would leave the last chunk empty, in
/// which case chunks of `floor(size / n)` with the remainder last. 4050 over 4 gives
/// `[1013, 1013, 1013, 1011]`.
pub fn compute_split_shapes(size: usize, n: usize) -> Vec<usize> {
    if n <= 1 {
        return vec![size];
    }
    let ceil = size.div_ceil(n);
    let chunk = if ceil.saturating_mul(n - 1) < size { ceil } else { size / n };
    std::iter::repeat_n(chunk, n - 1).chain([size - chunk * (n - 1)]).collect()
}
