//! Which parameters one rank holds. The tutorial's distributed block splits q, k, v and fc1 by
//! output rows (column-parallel) and proj and fc2 by input columns (row-parallel); the biases
//! of the row-parallel layers are added after the all-reduce, so every tp rank holds them
//! whole, as it does the LayerNorms and everything outside the blocks.

use serde::{Deserialize, Serialize};

use super::Shape;
use crate::config::ParamCount;

/// Parameters one rank stores, by how tensor parallelism treats them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSplit {
    /// The whole model, by part (what a single GPU holds).
    pub model: ParamCount,
    /// q, k, v and fc1 weights and biases, split by output rows over tp.
    pub column_parallel: u64,
    /// proj and fc2 weights, split by input columns over tp.
    pub row_parallel: u64,
    /// Per-block parameters every tp rank holds whole: the row-parallel layers' biases and the
    /// two LayerNorms.
    pub block_replicated: u64,
    /// Patch embedding, position embedding, final LayerNorm and head, whole on every rank of
    /// the stage that holds them (the embeddings the first, the rest the last).
    pub outside_blocks: u64,
    /// Everything one rank stores.
    pub per_rank: u64,
    /// The block parameters of one rank, whose gradients the tutorial's DDP hook also sums over
    /// cp (everything outside the blocks is averaged over dp only).
    pub cp_reduced: u64,
    /// Weights that enter a matmul or convolution: autocast keeps a half-precision copy of
    /// each for the backward pass.
    pub matmul_weights: u64,
}

impl ParamSplit {
    pub(super) fn of(shape: &Shape) -> ParamSplit {
        let model = shape.model_params;
        let Shape { embed_dim: d, depth, tp, .. } = *shape;
        let mlp = shape.mlp_width();
        // q, k, v: D → D each; fc1: D → 4D; with their biases.
        let column_per_block = (3 * d * d + 3 * d + mlp * d + mlp) / tp;
        // proj: D → D; fc2: 4D → D; weights only.
        let row_per_block = (d * d + mlp * d) / tp;
        // proj and fc2 biases, LayerNorm 1 and 2 (weight and bias each).
        let replicated_per_block = d + d + 4 * d;
        let column_parallel = depth * column_per_block;
        let row_parallel = depth * row_per_block;
        let block_replicated = depth * replicated_per_block;
        let held = |holds: bool, params: u64| if holds { params } else { 0 };
        let outside_blocks = held(shape.embedding, model.patch_embed + model.pos_embed) + held(shape.head, model.final_norm + model.head);
        let cp_reduced = column_parallel + row_parallel + block_replicated;
        let block_matmul_weights = depth * (4 * d * d + 2 * mlp * d) / tp;
        let outside_matmul_weights = held(shape.embedding, shape.patch_fan_in * d) + held(shape.head, model.head);
        ParamSplit {
            model,
            column_parallel,
            row_parallel,
            block_replicated,
            outside_blocks,
            per_rank: cp_reduced + outside_blocks,
            cp_reduced,
            matmul_weights: block_matmul_weights + outside_matmul_weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::shape;
    use super::*;

    #[test]
    fn one_rank_holds_the_whole_model() {
        let shape = shape(384, 1);
        let split = ParamSplit::of(&shape);
        assert_eq!(split.per_rank, 23_832_960);
        assert_eq!(split.cp_reduced, split.model.blocks);
        // 12 blocks × (q, k, v, proj: 4·384² ; fc1, fc2: 2·4·384²) + conv 20·8·8·384 + head 384·1280.
        assert_eq!(split.matmul_weights, 12 * 12 * 384 * 384 + 20 * 64 * 384 + 384 * 1280);
    }

    #[test]
    fn tp_splits_the_block_matrices_and_keeps_the_rest_whole() {
        let shape = shape(1536, 4);
        let split = ParamSplit::of(&shape);
        let d = 1536u64;
        // Per block and rank: 12·D²/4 matrix entries, (3D + 4D)/4 split biases, D + D + 4D whole.
        let per_block = 3 * d * d + 7 * d / 4 + 6 * d;
        let outside = (20 * 64 * d + d) + 4050 * d + 2 * d + d * 1280;
        assert_eq!(split.per_rank, 12 * per_block + outside);
        assert_eq!(split.per_rank, 95_235_072);
        assert_eq!(split.block_replicated, 12 * 6 * d);
        assert_eq!(split.column_parallel + split.row_parallel, 12 * (3 * d * d + 7 * d / 4));
    }
}
