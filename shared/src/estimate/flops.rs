//! Floating-point work of one step. Only matmul-class work is counted (linears, the patch
//! convolution, the two attention products); LayerNorm, GELU, softmax and the loss are a few
//! operations per element, well under 1% of the total for the tutorial's shapes.
//!
//! Forward, per sample, with N tokens, width D and the MLP 4D wide:
//! - patch embedding: `2·N·(C·p²)·D` (a matmul of the flattened patches);
//! - per block: `24·N·D²` for q, k, v, proj, fc1, fc2 and `4·N²·D` for `QKᵀ` and `A·V`
//!   (no N² matrix is stored: the fused attention kernel recomputes it);
//! - head: `2·N·D·(C_out·p²)`.
//!
//! Backward is twice the forward (input and weight gradients), except for the patch embedding,
//! whose input (the data) needs no gradient. On one rank of a tp × cp layout the blocks' work
//! divides by tp (heads and MLP columns) and by cp (its own tokens' queries, against all keys);
//! the embedding and the head run whole on every rank of the pipeline stage that holds them
//! (the embedding on the first, the head on the last), and each stage runs its own blocks.

use serde::{Deserialize, Serialize};

use super::Shape;

/// FLOPs of the model and of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Flops {
    /// The whole model, one sample, forward.
    pub per_sample_forward: f64,
    /// The whole model, one sample, forward and backward.
    pub per_sample_training: f64,
    /// What one rank computes in one step (its local batch), by kind.
    pub rank_step: RankFlops,
}

/// One rank's work in one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankFlops {
    pub matmul_forward: f64,
    pub matmul_backward: f64,
    pub attention_forward: f64,
    pub attention_backward: f64,
}

impl RankFlops {
    pub fn total(&self) -> f64 {
        self.matmul_forward + self.matmul_backward + self.attention_forward + self.attention_backward
    }
}

/// Forward work of one sample on one rank: (matmuls outside the blocks, which need no input
/// gradient; other matmuls; attention).
struct Forward {
    embedding: f64,
    matmul: f64,
    attention: f64,
}

/// `whole`: the whole model on one rank; otherwise this rank's share of its stage.
fn forward(shape: &Shape, whole: bool) -> Forward {
    let f = |x: u64| x as f64;
    let (tp, tokens_local, depth) = if whole { (1, shape.tokens, shape.model_depth) } else { (shape.tp, shape.tokens_local, shape.depth) };
    let holds = |part: bool| if whole || part { 1.0 } else { 0.0 };
    let (d, n, nl) = (f(shape.embed_dim), f(shape.tokens), f(tokens_local));
    // q, k, v, proj: D × D each; fc1 and fc2: D × 4D each.
    let weights_per_token = f(4 * shape.embed_dim * shape.embed_dim + 2 * shape.embed_dim * shape.mlp_width());
    let embedding = holds(shape.embedding) * 2.0 * n * f(shape.patch_fan_in) * d;
    let head = holds(shape.head) * 2.0 * n * d * f(shape.head_fan_out);
    let per_block_matmul = 2.0 * nl * weights_per_token / f(tp);
    let per_block_attention = 4.0 * nl * n * d / f(tp);
    let depth = f(depth);
    Forward { embedding, matmul: head + depth * per_block_matmul, attention: depth * per_block_attention }
}

impl Flops {
    pub(super) fn of(shape: &Shape) -> Flops {
        let whole = forward(shape, true);
        let per_sample_forward = whole.embedding + whole.matmul + whole.attention;
        let per_sample_training = whole.embedding * 2.0 + (whole.matmul + whole.attention) * 3.0;
        let rank = forward(shape, false);
        let batch = shape.local_batch as f64;
        Flops {
            per_sample_forward,
            per_sample_training,
            rank_step: RankFlops {
                matmul_forward: batch * (rank.embedding + rank.matmul),
                matmul_backward: batch * (rank.embedding + 2.0 * rank.matmul),
                attention_forward: batch * rank.attention,
                attention_backward: batch * 2.0 * rank.attention,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::shape;
    use super::*;

    #[test]
    fn base_matches_the_reference_estimate() {
        // Reference §10: ≈ 0.48 TFLOP forward and ≈ 1.45 TFLOP forward + backward per sample.
        let flops = Flops::of(&shape(384, 1));
        assert!((flops.per_sample_forward / 1e12 - 0.48).abs() < 0.01, "{flops:?}");
        assert!((flops.per_sample_training / 1e12 - 1.45).abs() < 0.02, "{flops:?}");
        // Block terms by hand: 12 · (24·N·D² + 4·N²·D), N = 4050, D = 384.
        let (n, d) = (4050.0f64, 384.0f64);
        let blocks = 12.0 * (24.0 * n * d * d + 4.0 * n * n * d);
        let outside = 2.0 * n * 1280.0 * d * 2.0;
        assert!((flops.per_sample_forward - blocks - outside).abs() < 1.0);
    }

    #[test]
    fn tp_divides_the_blocks_but_not_the_embedding_and_head() {
        let one = Flops::of(&shape(1536, 1)).rank_step;
        let four = Flops::of(&shape(1536, 4)).rank_step;
        assert!((four.attention_forward * 4.0 - one.attention_forward).abs() < 1.0);
        // Per sample (local batch 16) the embedding and head: 2 · 2·N·1280·D, run whole.
        let outside = 16.0 * 2.0 * (2.0 * 4050.0 * 1280.0 * 1536.0);
        assert!(((four.matmul_forward - outside) * 4.0 - (one.matmul_forward - outside)).abs() < 1e3);
    }
}
