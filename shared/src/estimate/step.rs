//! The time of one step: compute at a stated fraction of the GPU's peak, memory-bound work at
//! the memory bandwidth, and the communication the computation waits for.
//!
//! - Compute: FLOPs / (peak for the matmul precision × `compute_efficiency` for it). Fused
//!   half-precision attention multiplies two matrices whose inner size is the head size; below
//!   `attention_full_rate_head_dim` it under-fills the tensor cores, so its rate scales by
//!   `head_dim / attention_full_rate_head_dim` (base: 48 / 128).
//! - Element-wise work (LayerNorm, autocast's casts, residual and bias adds, GELU) streams
//!   activations through device memory; it does not shrink with tp where the tensors are
//!   replicated, nor with cp for the k and v every cp rank holds in full, which is much of why
//!   tensor and context parallelism scale less than their FLOPs. The tutorial's distributed
//!   layers also move more of it: their bias adds promote the half-precision products to fp32.
//! - Optimizer: fused Adam streams every parameter, gradient and moment once.
//! - Communication: the tp and cp collectives sit between layers and hold the computation up;
//!   DDP's gradient all-reduce runs under the backward pass (when overlap is on) and only the
//!   part the backward pass cannot hide counts.
//! - Ops: on a CPU every op waits its turn, so each costs its dispatch and autograd bookkeeping
//!   on top of its arithmetic (`seconds_per_op`, `seconds_per_plain_op`); a GPU's CPU queues
//!   kernels ahead of it and the cost hides (both 0).
//! - Data loading: the batch's reading and preparing ([`super::loader`]), all of it when the
//!   step reads inline (0 workers), only what the rest of the step does not hide with workers.
//! - Micro-batches (accumulation, or a pipeline's): the batch runs through forward and backward
//!   in slices, then the optimizer once; the computation and the collectives between layers
//!   add up to the batch's.
//! - The pipeline's bubble: a stage idles while the pipeline fills and drains, `(p − 1)/v`
//!   times one micro-batch's passes ([`super::pipeline`]); the stage that sets the pace is the
//!   slowest, so its time stands for every stage's.

use serde::{Deserialize, Serialize};

use super::comms::{self, Collective, Phase};
use super::flops::RankFlops;
use super::loader::{self, Loader};
use super::{FP32, Shape, pipeline};
use crate::cluster::{EstimateFactors, GpuKind};
use crate::config::{AmpMode, MLP_RATIO};

/// Bytes fused Adam reads and writes per parameter: reads the fp32 weight, gradient and two
/// moments, writes back the weight and the moments.
const ADAM_BYTES_PER_PARAM: f64 = 28.0;

/// fp16 loss scaling adds a pass that unscales the gradients and checks them for inf/NaN.
const GRAD_SCALER_BYTES_PER_PARAM: f64 = 8.0;

/// Ops of one block's forward pass, as the trainer's block runs them: two LayerNorms, the
/// qkv projection and its split into heads (reshape, permute, three selects), attention, the
/// heads joined (transpose, reshape), the output projection, fc1, GELU, fc2, two dropouts and
/// two residual adds.
const OPS_PER_BLOCK: f64 = 19.0;

/// Ops of the forward pass around the blocks: the patch embedding (convolution, flatten,
/// transpose), the position embedding and its dropout, the final LayerNorm, the head,
/// unpatchify (reshape, permute, reshape) and the relative L2 loss (difference, two norms,
/// division, mean, reshapes).
const OPS_AROUND_BLOCKS: f64 = 18.0;

/// Parameter tensors of a block (two LayerNorms, qkv, proj, fc1 and fc2, each weight and bias)
/// and of the rest (patch embedding, position embedding, final LayerNorm, head).
const PARAMS_PER_BLOCK: f64 = 12.0;
const PARAMS_AROUND_BLOCKS: f64 = 6.0;

/// Ops the tensor-by-tensor Adam runs per parameter tensor (step count, two moments, the
/// bias-corrected update), with zeroing its gradient.
const ADAM_OPS_PER_TENSOR: f64 = 12.0;

/// Where one step's time goes, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    /// Matmuls, attention and element-wise work of the forward pass.
    pub forward_s: f64,
    /// The same for the backward pass (twice the forward).
    pub backward_s: f64,
    /// The element-wise (memory-bound) part of the two above.
    pub elementwise_s: f64,
    pub optimizer_s: f64,
    /// What the step's ops cost beyond their arithmetic (0 on GPUs).
    #[serde(default)]
    pub overhead_s: f64,
    /// tp and cp collectives between layers, the pipeline's transfers and ZeRO's gathers:
    /// always waited for.
    pub blocking_comm_s: f64,
    /// DDP's gradient all-reduce or ZeRO's reduce-scatter (and the cp hook): the full time...
    pub overlapped_comm_s: f64,
    /// ...and the part of it the backward pass does not hide.
    pub exposed_overlapped_comm_s: f64,
    /// The forward pass run again in backward, with activation recomputation.
    #[serde(default)]
    pub recompute_s: f64,
    /// A pipeline stage's idle time while the pipeline fills and drains (0 without one).
    #[serde(default)]
    pub bubble_s: f64,
    /// Reading and preparing the rank's batch, over the loader's readers: per step, what
    /// workers need to keep up, or what the step spends reading inline (0 workers). 0 where
    /// loading is not modelled (DALI, or a cluster without loader factors).
    #[serde(default)]
    pub data_s: f64,
    /// Whether the loader reads beside the step (workers) rather than inside it.
    #[serde(default)]
    pub data_overlapped: bool,
    /// ...and the part of it the step waits for: all of it inline, what the rest of the step
    /// does not hide with workers.
    #[serde(default)]
    pub exposed_data_s: f64,
    pub total_s: f64,
}

/// Rates one rank computes at, in FLOP/s.
pub(super) struct Rates {
    pub matmul: f64,
    pub attention: f64,
    /// Memory bandwidth, bytes/s: what element-wise work and the optimizer run at.
    pub memory: f64,
    /// The factor the head size puts on attention (1 from the full-rate head size up).
    pub attention_factor: f64,
}

pub(super) fn rates(shape: &Shape, gpu: &GpuKind, factors: &EstimateFactors) -> Rates {
    let precision = shape.precision;
    let matmul = gpu.peak_tflops.get(precision) * factors.compute_efficiency.get(precision) * 1e12;
    let attention_factor =
        if precision.is_half() { (shape.head_dim as f64 / factors.attention_full_rate_head_dim as f64).min(1.0) } else { 1.0 };
    Rates { matmul, attention: matmul * attention_factor * factors.attention_efficiency, memory: gpu.hbm_tb_per_s * 1e12, attention_factor }
}

/// What a step's ops cost beyond their arithmetic: each forward op with its backward, once
/// per micro-batch, and the optimizer's ops (tensor by tensor, or a few multi-tensor calls
/// when fused). The first is part of a micro-batch's passes, the second of the step's end.
fn overhead_seconds(shape: &Shape, factors: &EstimateFactors) -> (f64, f64) {
    let ops = ops(shape);
    (shape.micro_batches as f64 * ops.forward * factors.seconds_per_op, ops.optimizer * factors.seconds_per_plain_op)
}

/// The ops of one step, by who runs them.
pub(super) struct Ops {
    /// Forward ops, each with its autograd record and backward.
    pub forward: f64,
    /// The optimizer's ops, outside autograd.
    pub optimizer: f64,
}

/// The ops of one step of `shape`: what a step costs beyond its arithmetic, and what a
/// profiler records of it.
pub(super) fn ops(shape: &Shape) -> Ops {
    let depth = shape.depth as f64;
    // A pipeline stage runs the ops around the blocks when it holds the embedding or the head.
    let around = if shape.embedding || shape.head { 1.0 } else { 0.0 };
    let tensors = depth * PARAMS_PER_BLOCK + around * PARAMS_AROUND_BLOCKS;
    let optimizer = if shape.fused_optimizer { tensors + 4.0 } else { tensors * ADAM_OPS_PER_TENSOR };
    Ops { forward: depth * OPS_PER_BLOCK + around * OPS_AROUND_BLOCKS, optimizer }
}

/// Bytes the forward pass's element-wise ops read and write in one block, per unit of width,
/// by how they scale with the layout. The backward pass moves twice these bytes.
#[derive(Debug, PartialEq)]
struct ElementwiseTraffic {
    /// Per token of this rank's cp chunk, the same on every tp rank: the parts every tp rank
    /// repeats (LayerNorms, residual adds, the casts of the LayerNorm outputs, the
    /// row-parallel bias adds after the all-reduce).
    replicated: f64,
    /// Per token of the cp chunk, divided over tp: this rank's heads and MLP columns.
    split: f64,
    /// Per token of the whole sequence, divided over tp: k and v of every token, which each
    /// cp rank casts (and, under cp, gathers) in full.
    sequence: f64,
}

/// Counted from the tutorial's block. LayerNorm reads and writes fp32; under autocast each of
/// q, k, v and fc1 casts the fp32 LayerNorm output to half precision itself; GELU reads and
/// writes the 4D-wide fc1 output. When `torch.compile` sees a whole block it fuses each
/// LayerNorm with its one cast and the bias into GELU.
///
/// The distributed layers (tp·cp > 1) add their bias after the matmul as `y = y + bias`, and
/// an fp32 (1, 1, out) bias promotes the half-precision product to fp32 (autocast leaves adds
/// alone). So every bias add writes fp32, attention casts q, k and v back to half precision,
/// GELU runs in fp32 on the 4D-wide fc1 output, fc2 casts its input again, and the residual
/// adds take two fp32 operands. Under cp the k and v chunks are made contiguous for the
/// all-gather and the fp32 pieces concatenated.
fn elementwise_traffic(shape: &Shape) -> ElementwiseTraffic {
    let a = shape.element_bytes();
    let cast = if shape.precision.is_half() { FP32 + a } else { 0.0 };
    let layer_norms = 2.0 * 2.0 * FP32;
    let gelu = |bytes: f64| MLP_RATIO as f64 * 2.0 * bytes;
    let half_residual_adds = 2.0 * (2.0 * FP32 + a);
    if shape.compiled_whole_block {
        let fused_norms = 2.0 * (FP32 + a);
        return ElementwiseTraffic { replicated: fused_norms + half_residual_adds, split: gelu(a), sequence: 0.0 };
    }
    let input_casts = 4.0 * cast;
    if !shape.distributed_block {
        return ElementwiseTraffic { replicated: layer_norms + input_casts + half_residual_adds, split: gelu(a), sequence: 0.0 };
    }
    let bias_add = a + FP32;
    let row_biases = 2.0 * bias_add;
    let fp32_residual_adds = 2.0 * 3.0 * FP32;
    // q, k, v (one width each) and fc1 (four); q's cast for attention; fc2's cast of GELU's output.
    let column_biases = (3.0 + MLP_RATIO as f64) * bias_add;
    let gathered = shape.cp > 1;
    let contiguous_chunks = if gathered { 2.0 * 2.0 * FP32 } else { 0.0 };
    let concatenation = if gathered { 2.0 * 2.0 * FP32 } else { 0.0 };
    ElementwiseTraffic {
        replicated: layer_norms + input_casts + row_biases + fp32_residual_adds,
        split: column_biases + cast + gelu(FP32) + MLP_RATIO as f64 * cast + contiguous_chunks,
        sequence: 2.0 * cast + concatenation,
    }
}

/// Element-wise bytes of one rank's forward pass in one step.
fn elementwise_forward_bytes(shape: &Shape) -> f64 {
    let t = elementwise_traffic(shape);
    let per_token = (shape.local_batch * shape.depth * shape.embed_dim) as f64;
    let tp = shape.tp as f64;
    per_token * (shape.tokens_local as f64 * (t.replicated + t.split / tp) + shape.tokens as f64 * t.sequence / tp)
}

/// What a step's time is made from, besides its shape and its loader.
pub(super) struct Parts<'a> {
    pub flops: &'a RankFlops,
    pub rates: &'a Rates,
    pub params_per_rank: u64,
    pub factors: &'a EstimateFactors,
    pub collectives: &'a [Collective],
}

pub(super) fn step_time(shape: &Shape, parts: &Parts<'_>, loader: Option<&Loader>, overlap_dp: bool) -> StepTime {
    let Parts { flops, rates, params_per_rank, factors, collectives } = *parts;
    let hbm = rates.memory;
    let elementwise_forward_s = elementwise_forward_bytes(shape) / hbm;
    let elementwise_s = 3.0 * elementwise_forward_s;
    let forward_s = flops.matmul_forward / rates.matmul + flops.attention_forward / rates.attention + elementwise_forward_s;
    let backward_s = flops.matmul_backward / rates.matmul + flops.attention_backward / rates.attention + 2.0 * elementwise_forward_s;
    let scaler = if shape.amp == AmpMode::Fp16 { GRAD_SCALER_BYTES_PER_PARAM } else { 0.0 };
    // Under ZeRO (any stage) a rank's optimizer updates only its shard of the parameters.
    let updated = if shape.zero_stage >= 1 { params_per_rank as f64 / shape.dp as f64 } else { params_per_rank as f64 };
    let optimizer_s = updated * (ADAM_BYTES_PER_PARAM + scaler) / hbm;
    let seconds = |keep: &dyn Fn(&Collective) -> bool| collectives.iter().filter(|c| keep(c)).fold(0.0, |sum, c| sum + c.seconds);
    // Between layers and stages, once per micro-batch; the rest once a step, after backward.
    let between_passes_s = seconds(&|c| !c.overlapped && c.phase != Phase::Step);
    let blocking_comm_s = between_passes_s + seconds(&|c| !c.overlapped && c.phase == Phase::Step);
    let overlapped_comm_s = seconds(&|c| c.overlapped);
    let exposed_overlapped_comm_s = if overlap_dp && shape.overlap_grad_reduce {
        comms::exposed_overlapped(collectives, backward_s, shape.micro_batches, shape.bucket_bytes)
    } else {
        overlapped_comm_s
    };
    let (passes_overhead_s, optimizer_overhead_s) = overhead_seconds(shape, factors);
    // Recomputation runs the forward pass (its blocks, nearly all of it) again in backward.
    let recompute_s = if shape.recompute { forward_s } else { 0.0 };
    let passes_s = forward_s + backward_s + recompute_s + passes_overhead_s + between_passes_s;
    let bubble_s = passes_s * pipeline::bubble_periods(shape);
    let overhead_s = passes_overhead_s + optimizer_overhead_s;
    let compute_s =
        forward_s + backward_s + recompute_s + optimizer_s + overhead_s + blocking_comm_s + exposed_overlapped_comm_s + bubble_s;
    let (data_s, data_overlapped, exposed_data_s) =
        loader.map_or((0.0, false, 0.0), |l| (l.seconds, l.readers.overlapped(), loader::exposed(l, compute_s)));
    StepTime {
        forward_s,
        backward_s,
        elementwise_s,
        optimizer_s,
        overhead_s,
        blocking_comm_s,
        overlapped_comm_s,
        exposed_overlapped_comm_s,
        recompute_s,
        bubble_s,
        data_s,
        data_overlapped,
        exposed_data_s,
        total_s: compute_s + exposed_data_s,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::shape;
    use super::*;

    #[test]
    fn elementwise_traffic_by_block_kind() {
        // Compiled whole block, fp16: fused LayerNorm + cast 2·(4 + 2), residual adds 2·(8 + 2);
        // GELU 2·4·2 split.
        let compiled = ElementwiseTraffic { replicated: 32.0, split: 16.0, sequence: 0.0 };
        assert_eq!(elementwise_traffic(&shape(1536, 1)), compiled);
        // tp = 4, fp32 bias adds: LayerNorms 16, four input casts 24, row-parallel bias adds
        // 2·(2 + 4), fp32 residual adds 2·12. Split: column bias adds 7·6, q's cast 6, GELU in
        // fp32 4·8, fc2's cast 4·6. Whole sequence: k and v cast for attention 2·6.
        let tp4 = ElementwiseTraffic { replicated: 76.0, split: 104.0, sequence: 12.0 };
        assert_eq!(elementwise_traffic(&shape(1536, 4)), tp4);
        let s = shape(1536, 4);
        let per_token = (16 * 12 * 1536) as f64;
        assert!((elementwise_forward_bytes(&s) - per_token * 4050.0 * (76.0 + 104.0 / 4.0 + 12.0 / 4.0)).abs() < 1.0);
    }
}
