//! The time of one step: compute at a stated fraction of the GPU's peak, memory-bound work at
//! the memory bandwidth, and the communication the computation waits for.
//!
//! - Compute: FLOPs / (peak for the matmul precision × `compute_efficiency` for it). Fused
//!   half-precision attention multiplies two matrices whose inner size is the head size; below
//!   `attention_full_rate_head_dim` it under-fills the tensor cores, so its rate scales by
//!   `head_dim / attention_full_rate_head_dim` (base: 48 / 128).
//! - Element-wise work (LayerNorm, autocast's casts, residual and bias adds, GELU) streams
//!   activations through device memory; it does not shrink with tp where the tensors are
//!   replicated, which is much of why tensor parallelism scales less than its FLOPs.
//! - Optimizer: fused Adam streams every parameter, gradient and moment once.
//! - Communication: the tp and cp collectives sit between layers and hold the computation up;
//!   DDP's gradient all-reduce runs under the backward pass (when overlap is on) and only the
//!   part the backward pass cannot hide counts.

use serde::{Deserialize, Serialize};

use super::Shape;
use super::comms::{self, Collective};
use super::flops::RankFlops;
use crate::cluster::{EstimateFactors, GpuKind};
use crate::config::AmpMode;

/// Bytes fused Adam reads and writes per parameter: reads the fp32 weight, gradient and two
/// moments, writes back the weight and the moments.
const ADAM_BYTES_PER_PARAM: f64 = 28.0;

/// fp16 loss scaling adds a pass that unscales the gradients and checks them for inf/NaN.
const GRAD_SCALER_BYTES_PER_PARAM: f64 = 8.0;

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
    /// tp and cp collectives between layers: always waited for.
    pub blocking_comm_s: f64,
    /// DDP's gradient all-reduce (and the cp hook): the full time...
    pub overlapped_comm_s: f64,
    /// ...and the part of it the backward pass does not hide.
    pub exposed_overlapped_comm_s: f64,
    pub total_s: f64,
}

/// Rates one rank computes at, in FLOP/s.
pub(super) struct Rates {
    pub matmul: f64,
    pub attention: f64,
    /// The factor the head size puts on attention (1 from the full-rate head size up).
    pub attention_factor: f64,
}

pub(super) fn rates(shape: &Shape, gpu: &GpuKind, factors: &EstimateFactors) -> Rates {
    let precision = shape.precision;
    let matmul = gpu.peak_tflops.get(precision) * factors.compute_efficiency.get(precision) * 1e12;
    let attention_factor =
        if precision.is_half() { (shape.head_dim as f64 / factors.attention_full_rate_head_dim as f64).min(1.0) } else { 1.0 };
    Rates { matmul, attention: matmul * attention_factor, attention_factor }
}

/// Bytes the forward pass's element-wise ops read and write per block, per token and per unit
/// of width, as (replicated over tp, split over tp). Counted from the tutorial's block:
/// LayerNorm reads and writes fp32; under autocast each of q, k, v and fc1 casts the fp32
/// LayerNorm output to half precision itself; each residual add reads the fp32 stream and the
/// half-precision branch and writes fp32; GELU reads and writes the 4D-wide fc1 output; the
/// attention output is copied to a contiguous layout for proj. The distributed layers add
/// their biases in separate kernels (`nn.Linear` folds them into the matmul). When
/// `torch.compile` sees a whole block it fuses each LayerNorm with its one cast, and the bias
/// into GELU. The backward pass moves twice these bytes.
fn elementwise_bytes_per_element(shape: &Shape) -> (f64, f64) {
    let a = shape.element_bytes();
    let residual = 4.0;
    let layer_norms = 2.0 * 2.0 * residual;
    let residual_adds = 2.0 * (2.0 * residual + a);
    let gelu = 2.0 * 4.0 * a;
    if shape.compiled_whole_block {
        let fused_norms = 2.0 * (residual + a);
        return (fused_norms + residual_adds, gelu);
    }
    let casts = if shape.precision.is_half() { 4.0 * (residual + a) } else { 0.0 };
    let reshape = 2.0 * a;
    let (row_biases, column_biases) = if shape.distributed_block { (2.0 * 2.0 * a, 7.0 * 2.0 * a) } else { (0.0, 0.0) };
    (layer_norms + casts + residual_adds + row_biases, reshape + gelu + column_biases)
}

/// Element-wise bytes of one rank's forward pass in one step.
fn elementwise_forward_bytes(shape: &Shape) -> f64 {
    let (replicated, split) = elementwise_bytes_per_element(shape);
    let elements = (shape.local_batch * shape.depth * shape.tokens_local * shape.embed_dim) as f64;
    elements * (replicated + split / shape.tp as f64)
}

pub(super) fn step_time(
    shape: &Shape,
    flops: &RankFlops,
    rates: &Rates,
    params_per_rank: u64,
    gpu: &GpuKind,
    collectives: &[Collective],
    overlap_dp: bool,
) -> StepTime {
    let hbm = gpu.hbm_tb_per_s * 1e12;
    let elementwise_forward_s = elementwise_forward_bytes(shape) / hbm;
    let elementwise_s = 3.0 * elementwise_forward_s;
    let forward_s = flops.matmul_forward / rates.matmul + flops.attention_forward / rates.attention + elementwise_forward_s;
    let backward_s = flops.matmul_backward / rates.matmul + flops.attention_backward / rates.attention + 2.0 * elementwise_forward_s;
    let scaler = if shape.amp == AmpMode::Fp16 { GRAD_SCALER_BYTES_PER_PARAM } else { 0.0 };
    let optimizer_s = params_per_rank as f64 * (ADAM_BYTES_PER_PARAM + scaler) / hbm;
    let seconds = |overlapped: bool| collectives.iter().filter(|c| c.overlapped == overlapped).fold(0.0, |sum, c| sum + c.seconds);
    let (blocking_comm_s, overlapped_comm_s) = (seconds(false), seconds(true));
    let exposed_overlapped_comm_s = if overlap_dp { comms::exposed_overlapped(collectives, backward_s) } else { overlapped_comm_s };
    StepTime {
        forward_s,
        backward_s,
        elementwise_s,
        optimizer_s,
        blocking_comm_s,
        overlapped_comm_s,
        exposed_overlapped_comm_s,
        total_s: forward_s + backward_s + optimizer_s + blocking_comm_s + exposed_overlapped_comm_s,
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
        assert_eq!(elementwise_bytes_per_element(&shape(1536, 1)), (32.0, 16.0));
        // tp = 4: eager LayerNorms 16, four casts 24, residual adds 20, row-parallel biases 8;
        // split: reshape 4, GELU 16, column-parallel biases 28.
        assert_eq!(elementwise_bytes_per_element(&shape(1536, 4)), (68.0, 48.0));
        let s = shape(1536, 4);
        let elements = (16 * 12 * 4050 * 1536) as f64;
        assert!((elementwise_forward_bytes(&s) - elements * (68.0 + 12.0)).abs() < 1.0);
    }
}
