//! A pipeline's stages in the estimate: which blocks each holds, how many micro-batches'
//! activations each holds at once under its schedule, and the bubble.
//!
//! Stage `s` holds the blocks of its model chunks ([`crate::pipeline::chunk_blocks`]: uneven
//! depths give the later chunks one block more), the embeddings on the first stage and the
//! final LayerNorm, head and loss on the last. Its memory is its own blocks' training state and
//! activations; the run fits when the heaviest stage does.
//!
//! Activations held at once, at a stage's peak: GPipe runs every forward first, so `m`
//! micro-batches; 1F1B runs `p − s − 1` forwards, then one forward and one backward, so
//! `p − s`; interleaved runs `2(p − s − 1) + (v − 1)p` forwards of `1/v`-sized chunks before its
//! first backward. In general a stage holds its warm-up forwards and one more, at most all of
//! them: what [`crate::pipeline::peak_held`] counts in the simulation, here without simulating
//! (the layout search makes thousands of estimates).
//!
//! The bubble: every stage idles `(p − 1)/v` passes of one micro-batch while the pipeline
//! fills and drains, a fraction `(p − 1)/(m + p − 1)` of the step (`(p − 1)/(v·m + p − 1)`
//! interleaved), as the simulation's idle share. With uneven stages the slowest stage's passes
//! set the pace.

use serde::{Deserialize, Serialize};

use super::Shape;
use crate::pipeline::{Schedule, chunk_blocks};

/// How long a saved tensor lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lifetime {
    /// A block's, from its forward to its backward: one per block of every micro-batch (or
    /// model chunk of one) the stage has run forward and not yet backward.
    #[default]
    Block,
    /// The embedding's or the head's, once per micro-batch in flight on their stage.
    Stage,
    /// Recomputed in backward: one block of one micro-batch at a time.
    Recomputed,
}

/// What one stage holds of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Part {
    pub blocks: u64,
    pub embedding: bool,
    pub head: bool,
}

/// How much of the micro-batches in flight a stage holds at its peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Held {
    /// Its blocks' activations, in whole micro-batches: chunks held / chunks per stage.
    pub blocks: f64,
    /// Micro-batches whose embedding or head activations it holds.
    pub micro_batches: f64,
}

impl Held {
    /// Without a pipeline: one micro-batch at a time.
    pub const ONE: Held = Held { blocks: 1.0, micro_batches: 1.0 };

    /// How many micro-batches' worth of a tensor that lives `lifetime` the stage holds.
    pub fn of(self, lifetime: Lifetime) -> f64 {
        match lifetime {
            Lifetime::Block => self.blocks,
            Lifetime::Stage => self.micro_batches,
            Lifetime::Recomputed => 1.0,
        }
    }
}

/// Chunk passes (forwards not yet backward) stage `stage` holds at its peak under `schedule`.
pub(super) fn peak_chunks(schedule: Schedule, stages: u64, micro_batches: u64, stage: u64) -> u64 {
    let (p, v) = (stages, schedule.virtual_stages() as u64);
    let total = micro_batches * v;
    let warm_up = match schedule {
        Schedule::GPipe => total,
        Schedule::OneFOneB => p - stage - 1,
        Schedule::Interleaved(_) => 2 * (p - stage - 1) + (v - 1) * p,
    };
    (warm_up + 1).min(total)
}

/// Every stage's part of the model and what it holds at its peak, first stage first.
pub(super) fn stages(shape: &Shape) -> Vec<(Part, Held)> {
    let (p, v, m) = (shape.stages.max(1), shape.chunks_per_stage(), shape.micro_batches);
    if p == 1 {
        let part = Part { blocks: shape.depth, embedding: true, head: true };
        return vec![(part, Held::ONE)];
    }
    let chunks = chunk_blocks(shape.model_depth as usize, (p * v) as usize);
    (0..p)
        .map(|s| {
            let blocks = (0..v).map(|k| chunks.get((s + k * p) as usize).map_or(0, |c| c.len() as u64)).sum();
            let part = Part { blocks, embedding: s == 0, head: s == p - 1 };
            let held = peak_chunks(shape.schedule, p, m, s) as f64;
            (part, Held { blocks: held / v as f64, micro_batches: (held / v as f64).ceil().min(m as f64) })
        })
        .collect()
}

/// The bubble in micro-batch passes of the whole step: `(p − 1)/(v·m)` of it.
pub(super) fn bubble_periods(shape: &Shape) -> f64 {
    (shape.stages.max(1) - 1) as f64 / (shape.chunks_per_stage() * shape.micro_batches.max(1)) as f64
}

/// The pipeline of an estimate, for the page: its schedule, its bubble and every stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineEstimate {
    /// GPipe, 1F1B or interleaved 1F1B.
    pub schedule: String,
    pub stages: u32,
    pub micro_batches: u64,
    /// Model chunks per stage: 1, or the interleaved schedule's virtual stages.
    pub virtual_stages: u64,
    /// The share of the step every stage idles: `(p − 1)/(v·m + p − 1)`.
    pub bubble_fraction: f64,
    /// The stage with the most memory (the estimate's memory is its) and the one whose passes
    /// take longest (its time is the estimate's), from 0.
    pub heaviest_stage: u32,
    pub slowest_stage: u32,
    pub per_stage: Vec<StageEstimate>,
}

/// One stage of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StageEstimate {
    pub stage: u32,
    pub blocks: u64,
    /// It holds the patch and position embedding (the first stage)...
    pub embedding: bool,
    /// ...or the final LayerNorm, the head and the loss (the last).
    pub head: bool,
    /// Micro-batches' activations held at its peak (chunks / v under interleaving).
    pub micro_batches_held: f64,
    pub memory_gb: f64,
    /// Its step, bubble included.
    pub step_time_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{peak_held, simulate};

    #[test]
    fn peak_chunks_are_what_the_simulation_holds() {
        let schedules = [Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved(2), Schedule::Interleaved(3)];
        for schedule in schedules {
            for (p, m) in [(2, 2), (2, 4), (4, 4), (4, 8), (3, 6), (4, 1), (8, 16), (2, 64)] {
                let passes = simulate(schedule, p, m, 1.0);
                if passes.is_empty() {
                    continue;
                }
                for s in 0..p {
                    let expected = peak_held(&passes, s) as u64;
                    assert_eq!(peak_chunks(schedule, p as u64, m as u64, s as u64), expected, "{schedule:?} p {p} m {m} stage {s}");
                }
            }
        }
    }
}
