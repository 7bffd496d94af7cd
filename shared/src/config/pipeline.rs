//! The rules of a pipelined config (pp > 1) and the schedule it runs: a layout that cannot be
//! cut is refused by the field to edit, in the editor, the CLI and the server alike.

use super::{PipelineSchedule, TrainConfig};
use crate::Problems;
use crate::pipeline::Schedule;

impl TrainConfig {
    /// The schedule this config's pipeline runs, with its virtual stages.
    pub fn schedule(&self) -> Schedule {
        match self.pipeline_schedule {
            PipelineSchedule::GPipe => Schedule::GPipe,
            PipelineSchedule::OneFOneB => Schedule::OneFOneB,
            PipelineSchedule::Interleaved => Schedule::Interleaved(self.virtual_pipeline_stages),
        }
    }

    /// The model chunks the pipeline cuts the blocks into: pp, or pp·v interleaved.
    pub fn pipeline_chunks(&self) -> usize {
        self.pipeline_parallel.saturating_mul(self.schedule().virtual_stages())
    }

    /// Stages against blocks: every chunk needs a block, and interleaving needs whole chunks.
    /// ZeRO does not shard a pipeline's stages (yet).
    pub(super) fn check_stages(&self, problems: &mut Problems) {
        let (pp, depth) = (self.pipeline_parallel, self.depth);
        if pp > 1 && self.zero_stage > 0 {
            problems.push(
                "zero_stage",
                format!(
                    "ZeRO does not shard pipeline stages: its units and reductions follow one backward pass of the whole \
                     model per micro-batch, where a stage's backward passes are spread over its schedule \
                     (set zero_stage 0 with pipeline_parallel {pp})"
                ),
            );
        }
        if pp == 0 || depth == 0 {
            return;
        }
        if pp > depth {
            problems.push("pipeline_parallel", format!("{pp} is more than the {depth} blocks (every stage needs at least one block)"));
            return;
        }
        if self.pipeline_schedule != PipelineSchedule::Interleaved || pp == 1 {
            return;
        }
        let v = self.virtual_pipeline_stages;
        if v < 2 {
            problems.push("virtual_pipeline_stages", format!("the interleaved schedule needs 2 or more model chunks per rank, got {v}"));
        } else if !depth.is_multiple_of(pp) || !(depth / pp).is_multiple_of(v) {
            problems.push(
                "virtual_pipeline_stages",
                format!(
                    "{v} does not divide the blocks each of the {pp} stages holds ({depth} blocks): \
                     interleaving cuts every stage's blocks into {v} equal chunks"
                ),
            );
        }
    }

    /// The micro-batches against a dp rank's `local` samples and the schedule.
    pub(super) fn check_micro_batches(&self, local: usize, problems: &mut Problems) {
        let (pp, m) = (self.pipeline_parallel, self.num_micro_batches);
        if m == 0 || pp == 0 {
            return;
        }
        if pp == 1 {
            if m > 1 {
                problems.push(
                    "num_micro_batches",
                    format!(
                        "{m} micro-batches feed pipeline stages, and pipeline_parallel is 1 (set it, or use gradient_accumulation_steps)"
                    ),
                );
            }
            return;
        }
        if self.gradient_accumulation_steps > 1 {
            problems.push(
                "gradient_accumulation_steps",
                "must be 1 with pipeline stages: the pipeline's num_micro_batches already add up gradients before one reduction",
            );
        }
        if !local.is_multiple_of(m) {
            problems.push(
                "num_micro_batches",
                format!("{m} does not divide the {local} samples each dp rank takes per step (every micro-batch is as large)"),
            );
        }
        if !self.schedule().runs(pp, m) {
            problems.push(
                "num_micro_batches",
                format!("the interleaved schedule takes micro-batches in groups of one per stage: {m} is not a multiple of pp {pp}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(config: TrainConfig, world: usize) -> Vec<(String, String)> {
        let problems = config.problems(world, None);
        problems.0.into_iter().map(|p| (p.field, p.message)).collect()
    }

    fn pipelined(pp: usize, m: usize, schedule: PipelineSchedule) -> TrainConfig {
        let parallel_order = "tp-cp-dp-pp".into();
        TrainConfig { pipeline_parallel: pp, num_micro_batches: m, pipeline_schedule: schedule, parallel_order, ..TrainConfig::default() }
    }

    #[test]
    fn a_pipeline_runs_its_stages_over_the_world_and_its_micro_batches_over_the_batch() {
        let config = pipelined(2, 4, PipelineSchedule::OneFOneB);
        assert_eq!(problems(config.clone(), 4), []);
        assert_eq!(config.layout(4).unwrap().sizes().pp, 2);
        assert_eq!(config.layout(4).unwrap().sizes().dp, 2);
        assert_eq!(config.world(2), 4);
        let odd = problems(config, 3);
        assert_eq!(odd[0].0, "world");
        assert!(odd[0].1.contains("pipeline_parallel 2"), "{odd:?}");
    }

    #[test]
    fn a_layout_that_cannot_be_cut_is_refused_by_its_field() {
        let field = |config: TrainConfig, world: usize| problems(config, world).into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        let too_many = TrainConfig { depth: 2, ..pipelined(4, 4, PipelineSchedule::GPipe) };
        assert_eq!(field(too_many, 4), ["pipeline_parallel"]);
        // 12 blocks on 2 stages: 6 each, which 4 chunks cannot share.
        let chunks = TrainConfig { virtual_pipeline_stages: 4, ..pipelined(2, 4, PipelineSchedule::Interleaved) };
        assert_eq!(field(chunks, 2), ["virtual_pipeline_stages"]);
        // 16 samples on dp 1: 3 micro-batches are uneven, and interleaving wants a multiple of pp
        // (8 blocks on 4 stages: 2 each, one a chunk).
        assert_eq!(field(pipelined(2, 3, PipelineSchedule::OneFOneB), 2), ["num_micro_batches"]);
        assert_eq!(field(TrainConfig { depth: 8, ..pipelined(4, 2, PipelineSchedule::Interleaved) }, 4), ["num_micro_batches"]);
        assert_eq!(field(pipelined(1, 2, PipelineSchedule::GPipe), 1), ["num_micro_batches"]);
        let accumulated = TrainConfig { gradient_accumulation_steps: 2, ..pipelined(2, 2, PipelineSchedule::GPipe) };
        assert_eq!(field(accumulated, 2), ["gradient_accumulation_steps"]);
        assert_eq!(field(pipelined(0, 1, PipelineSchedule::GPipe), 1), ["pipeline_parallel"]);
        assert_eq!(field(TrainConfig { zero_stage: 1, ..pipelined(2, 4, PipelineSchedule::OneFOneB) }, 4), ["zero_stage"]);
    }

    #[test]
    fn uneven_stages_are_allowed_and_interleaving_runs_where_the_chunks_are_whole() {
        let uneven = TrainConfig { depth: 5, ..pipelined(2, 2, PipelineSchedule::OneFOneB) };
        assert_eq!(problems(uneven, 2), []);
        let interleaved = pipelined(2, 4, PipelineSchedule::Interleaved);
        assert_eq!(problems(interleaved.clone(), 2), []);
        assert_eq!(interleaved.schedule(), Schedule::Interleaved(2));
        assert_eq!(interleaved.pipeline_chunks(), 4);
    }
}
