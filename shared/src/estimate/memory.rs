//! Device memory of one rank, as the tutorial measures it: NVML's whole-device "used" figure
//! after the forward pass of the second step. By then the first step has created the Adam
//! state and DDP's gradient buckets, and the caching allocator still holds the blocks of the
//! first step's peak, so this one figure is close to the most the run will use.
//!
//! Parts, for a rank holding P parameters:
//! - weights `4·P` (PyTorch's AMP keeps fp32 parameters; there is no separate master copy);
//! - gradients `4·P` (fp32, in DDP's bucket views, allocated when DDP is built);
//! - optimizer state `8·P` (Adam's two fp32 moments);
//! - weight copies: under autocast, a half-precision copy of every matmul weight, kept for the
//!   backward pass;
//! - activations kept for the backward pass (see [`saved_tensors`]), times the micro-batch
//!   (the local batch without accumulation or a pipeline), times the micro-batches a pipeline
//!   stage holds at once (see [`super::pipeline`]);
//! - allocator cache: the caching allocator's rounding, fragmentation and blocks left over
//!   from the first step's backward, `(allocator_factor − 1) ×` activations;
//! - runtime: CUDA context, cuBLAS and NCCL workspaces (`runtime_overhead_gb`);
//! - data loader: DALI's device buffers, for `data_loader_config: dali`; on a CPU rank, the
//!   batches its loader workers hold (`batches_per_worker`).
//!
//! With a pipeline every part is the stage's: its blocks' parameters, and the embedding's on
//! the first stage, the head's on the last. ZeRO (`zero_stage`) then shards over dp, as the
//! trainer does: stage 1 Adam's moments, 2 also the gradients, 3 also the weights (and their
//! half-precision copies), keeping gathered one block's unit and the unit outside the blocks,
//! which stays gathered from the forward pass to the end of backward.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::params::ParamSplit;
use super::pipeline::{Held, Lifetime};
use super::{FP32, GIB, Shape};
use crate::cluster::EstimateFactors;
use crate::config::DataLoaderKind;

/// Memory of one rank in GiB (2³⁰ bytes), by part; `total` is their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryBreakdown {
    pub total: f64,
    pub weights: f64,
    pub gradients: f64,
    pub optimizer_state: f64,
    pub weight_copies: f64,
    pub activations: f64,
    pub allocator_cache: f64,
    pub runtime: f64,
    pub data_loader: f64,
}

/// One tensor the forward pass keeps for the backward pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedTensor {
    /// Static: an estimate is made thousands of times a search.
    pub name: Cow<'static, str>,
    /// Bytes for one sample on one rank.
    pub bytes_per_sample: f64,
    /// How many of it a step keeps: `depth` for block tensors, 1 otherwise.
    pub count: u64,
    /// How long it lives, which decides how many of it a pipeline stage holds at once.
    #[serde(default)]
    pub lifetime: Lifetime,
}

/// The run with activation recomputation switched the other way: memory against time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecomputeWhatIf {
    /// Whether this what-if recomputes (the opposite of the config).
    pub recompute: bool,
    pub total_gb: f64,
    pub fits: bool,
    pub step_time_s: f64,
    /// The part of that step spent waiting for data (with loader workers, more computation
    /// hides more of the reading).
    #[serde(default)]
    pub exposed_data_s: f64,
}

/// Memory under a ZeRO stage: what sharding the training state over dp would change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ZeroWhatIf {
    /// 0 is what the tutorial runs (DDP); 1 shards the optimizer state over dp, 2 also the
    /// gradients, 3 also the weights.
    pub stage: u8,
    pub total_gb: f64,
    pub fits: bool,
    /// The dp group's bytes relative to DDP's all-reduce, as the trainer runs the stage: 1.5
    /// at stage 1 (the all-reduce, then the updated shards gathered), 1 at stage 2 (a
    /// reduce-scatter and that gather), about 1.5 at stage 3 (the weights gathered for the
    /// forward and again for the backward pass, the gradients reduce-scattered).
    pub dp_bytes_factor: f64,
    /// The step under this stage (0 in predictions recorded before ZeRO's collectives were
    /// modelled), and the parts of it ZeRO changes: the collectives waited for, the part of
    /// the overlapped ones backward does not hide, the optimizer (which updates only a shard)
    /// and a pipeline's bubble (stage 3's gathers lengthen every pass).
    #[serde(default)]
    pub step_time_s: f64,
    #[serde(default)]
    pub blocking_comm_s: f64,
    #[serde(default)]
    pub exposed_overlapped_comm_s: f64,
    #[serde(default)]
    pub optimizer_s: f64,
    #[serde(default)]
    pub bubble_s: f64,
}

/// What the forward pass keeps, by the rules autograd follows for the tutorial's block (see
/// reference §3): an op keeps the inputs its backward needs. Under autocast every linear casts
/// its input itself, so q, k and v each keep their own half-precision copy. Fused attention
/// returns its output laid out as (batch, tokens, heads, head size), so the transpose and
/// reshape before proj are a view and proj keeps the attention output itself. In the
/// distributed layers the fp32 bias add makes fc1's output, which GELU keeps, fp32.
///
/// When `torch.compile` sees a whole block (no tp/cp collectives, which the tutorial excludes
/// from compilation), the three casts of the LayerNorm output are one expression, kept once.
/// It still keeps GELU's output: fc2's weight gradient needs it as a matmul operand, so the
/// backward pass would have to write it out in full again, and the compiler recomputes only
/// what fuses into the kernel that uses it.
///
/// With activation recomputation, a block keeps only its input; backward runs one block's
/// forward pass again at a time, so one block's set is alive at once.
pub(super) fn saved_tensors(shape: &Shape) -> Vec<SavedTensor> {
    let f = |x: u64| x as f64;
    let a = shape.element_bytes();
    let (d, n, nl, tp) = (f(shape.embed_dim), f(shape.tokens), f(shape.tokens_local), f(shape.tp));
    let mlp = f(shape.mlp_width());
    let local = nl * d;
    let input_copies = if shape.compiled_whole_block || !shape.precision.is_half() { 1.0 } else { 3.0 };
    let gelu_input = if shape.distributed_block { FP32 } else { a };
    let depth = shape.depth;
    let (inside, kept) = if shape.recompute { (1, Lifetime::Recomputed) } else { (depth, Lifetime::Block) };
    let block = [
        ("block input (fp32 residual stream, for LayerNorm 1)", FP32 * local, depth, Lifetime::Block),
        ("attention input in matmul precision (one copy per q, k, v when not compiled)", input_copies * a * local, inside, kept),
        ("q of this rank's heads", a * local / tp, inside, kept),
        ("k and v of this rank's heads for all tokens (gathered over cp)", 2.0 * a * n * d / tp, inside, kept),
        ("attention output (also proj's input)", a * local / tp, inside, kept),
        ("mid-block residual (fp32, for LayerNorm 2)", FP32 * local, inside, kept),
        ("MLP input in matmul precision", a * local, inside, kept),
        ("fc1 output (GELU input; fp32 after the distributed bias add)", gelu_input * nl * mlp / tp, inside, kept),
        ("GELU output in matmul precision (fc2 input)", a * nl * mlp / tp, inside, kept),
    ];
    let (input, target) = (FP32 * f(shape.in_pixels), FP32 * f(shape.out_pixels));
    let samples = match (shape.embedding, shape.head) {
        (true, true) => Some(("input and target sample (fp32)", input + target)),
        (true, false) => Some(("input sample (fp32)", input)),
        (false, true) => Some(("target sample (fp32)", target)),
        (false, false) => None,
    };
    let embedding = [("patch-embedding input in matmul precision", a * f(shape.in_pixels))];
    let head = [
        ("final LayerNorm input (fp32)", FP32 * local),
        ("head input for all tokens, in matmul precision", a * n * d),
        ("loss: prediction − target (fp32)", target),
    ];
    let embedding = embedding.into_iter().filter(|_| shape.embedding && shape.precision.is_half());
    let head = head.into_iter().filter(|_| shape.head);
    let outside = samples.into_iter().chain(embedding).chain(head).map(|(name, bytes)| (name, bytes, 1, Lifetime::Stage));
    block
        .into_iter()
        .chain(outside)
        .map(|(name, bytes_per_sample, count, lifetime)| SavedTensor { name: Cow::Borrowed(name), bytes_per_sample, count, lifetime })
        .collect()
}

/// Bytes of the batches a rank's loader holds where they count (a CPU rank): each worker's
/// queue and the batch it reads, and the batch being trained on; inputs and targets in fp32.
fn loader_batches(shape: &Shape, factors: &EstimateFactors) -> f64 {
    if factors.batches_per_worker == 0.0 {
        return 0.0;
    }
    let batches = shape.loader_workers as f64 * factors.batches_per_worker + 1.0;
    batches * shape.local_batch as f64 * FP32 * (shape.in_pixels + shape.out_pixels) as f64
}

/// Bytes one rank's `saved` tensors hold at once: each a micro-batch's, times how many of it
/// the stage holds (`held`).
pub(super) fn activation_bytes(shape: &Shape, saved: &[SavedTensor], held: Held) -> f64 {
    let batch = shape.micro_batch as f64;
    saved.iter().map(|t| t.bytes_per_sample * t.count as f64 * batch * held.of(t.lifetime)).sum()
}

/// One rank's memory with its `saved` tensors held `held` times, before ZeRO shards any of it.
pub(super) fn memory(shape: &Shape, params: &ParamSplit, factors: &EstimateFactors, saved: &[SavedTensor], held: Held) -> MemoryBreakdown {
    let gib = |bytes: f64| bytes / GIB;
    let p = params.per_rank as f64;
    let activations = gib(activation_bytes(shape, saved, held));
    let weight_copies = if shape.precision.is_half() { gib(shape.element_bytes() * params.matmul_weights as f64) } else { 0.0 };
    let mut unsharded = MemoryBreakdown {
        total: 0.0,
        weights: gib(FP32 * p),
        gradients: gib(FP32 * p),
        optimizer_state: gib(2.0 * FP32 * p),
        weight_copies,
        activations,
        allocator_cache: (factors.allocator_factor - 1.0) * activations,
        runtime: factors.runtime_overhead_gb,
        data_loader: if shape.data_loader == DataLoaderKind::Dali { factors.dali_overhead_gb } else { 0.0 }
            + gib(loader_batches(shape, factors)),
    };
    unsharded.total = unsharded.parts().iter().map(|(_, gb)| gb).sum();
    unsharded
}

impl MemoryBreakdown {
    /// Every part with its name, in display order (without the total).
    pub fn parts(&self) -> [(&'static str, f64); 8] {
        [
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimizer_state", self.optimizer_state),
            ("weight_copies", self.weight_copies),
            ("activations", self.activations),
            ("allocator_cache", self.allocator_cache),
            ("runtime", self.runtime),
            ("data_loader", self.data_loader),
        ]
    }
}

/// `memory` with ZeRO stage `stage` over `shape`'s dp ranks. At stage 3 the weights are a
/// shard plus what is gathered at once: one block's unit, and the unit outside the blocks
/// (the trainer gathers it at the start of the forward pass and frees it after backward).
pub(super) fn sharded(memory: &MemoryBreakdown, shape: &Shape, params: &ParamSplit, stage: u8) -> MemoryBreakdown {
    let dp = shape.dp as f64;
    let shard = |gb: f64, from_stage: u8| if stage >= from_stage { gb / dp } else { gb };
    let gathered =
        if stage >= 3 && shape.dp > 1 { FP32 * (params.cp_reduced / shape.depth.max(1) + params.outside_blocks) as f64 / GIB } else { 0.0 };
    let mut out = MemoryBreakdown {
        weights: shard(memory.weights, 3) + gathered,
        gradients: shard(memory.gradients, 2),
        optimizer_state: shard(memory.optimizer_state, 1),
        weight_copies: shard(memory.weight_copies, 3),
        ..*memory
    };
    out.total = out.parts().iter().map(|(_, gb)| gb).sum();
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{factors, shape};
    use super::*;

    fn per_block(shape: &Shape) -> f64 {
        let tokens = (shape.tokens_local * shape.embed_dim) as f64;
        saved_tensors(shape).iter().filter(|t| t.count == shape.depth).map(|t| t.bytes_per_sample).sum::<f64>() / tokens
    }

    #[test]
    fn block_inventory_in_bytes_per_token_element() {
        // Compiled, one rank: fp32 residual 4 + 4, one input copy 2 + 2, q k v 6, output 2,
        // fc1 output 8, GELU output 8.
        let mut whole = shape(1536, 1);
        assert!(whole.compiled_whole_block);
        assert!((per_block(&whole) - 36.0).abs() < 1e-9);
        // Eager: three copies of the attention input.
        whole.compiled_whole_block = false;
        assert!((per_block(&whole) - 40.0).abs() < 1e-9);
        // tp = 4 breaks the graph; 16 stay whole, and of the 32 split over tp GELU's fp32
        // input is 16: q 2, k v 4, output 2, fc1 output 16, GELU output 8.
        let split = shape(1536, 4);
        assert!(!split.compiled_whole_block);
        assert!((per_block(&split) - (16.0 + 32.0 / 4.0)).abs() < 1e-9);
    }

    #[test]
    fn parts_add_up_and_zero_stages_shard_over_dp() {
        let shape = shape(1536, 1);
        let params = ParamSplit::of(&shape);
        let b = memory(&shape, &params, &factors(), &saved_tensors(&shape), Held::ONE);
        let sum: f64 = b.parts().iter().map(|(_, gb)| gb).sum();
        assert!((b.total - sum).abs() < 1e-9);
        assert!((b.optimizer_state - 2.0 * b.weights).abs() < 1e-12);
        assert!((b.weight_copies - 2.0 * params.matmul_weights as f64 / GIB).abs() < 1e-12);
        assert!((b.allocator_cache - 0.2 * b.activations).abs() < 1e-12);
        let stage = |s: u8| sharded(&b, &shape, &params, s).total;
        assert!((stage(0) - b.total).abs() < 1e-9);
        // dp = 4 in the test shape: stage 1 saves three quarters of the optimizer state.
        assert!((stage(0) - stage(1) - 0.75 * b.optimizer_state).abs() < 1e-9);
        assert!((stage(1) - stage(2) - 0.75 * b.gradients).abs() < 1e-9);
        // Stage 3 keeps one block's unit and the unit outside the blocks gathered.
        let gathered = FP32 * (params.cp_reduced / 12 + params.outside_blocks) as f64 / GIB;
        let weights = 0.75 * (b.weights + b.weight_copies);
        assert!((stage(2) - stage(3) - weights + gathered).abs() < 1e-9);
        assert!(stage(3) < stage(2));
    }
}
