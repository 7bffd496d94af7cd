//! A drawn layout as a config runs it: what "Run this layout" sends, what the estimate beside a
//! rank grid estimates, and what the layout search's "Run the top three" launches, written
//! once so the run is the layout that was shown.

use super::{PipelineSchedule, TrainConfig};
use crate::Error;
use crate::layout::Sizes;

/// A layout's sizes and order with the choices that go with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutRun {
    pub sizes: Sizes,
    pub order: String,
    /// ZeRO's stage over dp (0: DDP).
    pub zero: u32,
    /// Micro-batches per step: the pipeline's with pp > 1, gradient accumulation's otherwise.
    pub micro_batches: u32,
    /// The pipeline's schedule (read only with pp > 1).
    pub schedule: PipelineSchedule,
    pub recompute: bool,
}

impl LayoutRun {
    /// `sizes` in `order`, with DDP, one micro-batch, 1F1B and no recomputation.
    pub fn new(sizes: Sizes, order: impl Into<String>) -> LayoutRun {
        LayoutRun { sizes, order: order.into(), zero: 0, micro_batches: 1, schedule: PipelineSchedule::OneFOneB, recompute: false }
    }

    /// The config keys that make a config run this layout; dp is the launch's, not a key. Keys
    /// at their default are left out, except the sizes and order, which are always said.
    pub fn overrides(&self) -> Vec<String> {
        let s = self.sizes;
        let mut keys =
            vec![format!("tensor_parallel={}", s.tp), format!("context_parallel={}", s.cp), format!("parallel_order={}", self.order)];
        if s.pp > 1 {
            keys.push(format!("pipeline_parallel={}", s.pp));
            keys.push(format!("num_micro_batches={}", self.micro_batches));
            keys.push(format!("pipeline_schedule={}", self.schedule.name()));
        } else if self.micro_batches > 1 {
            keys.push(format!("gradient_accumulation_steps={}", self.micro_batches));
        }
        if self.recompute {
            keys.push("activation_checkpointing=true".into());
        }
        if self.zero > 0 {
            keys.push(format!("zero_stage={}", self.zero));
        }
        keys
    }
}

impl TrainConfig {
    /// This config run as `layout`, checked for its world: every problem names its key.
    pub fn with_layout(&self, layout: &LayoutRun) -> Result<TrainConfig, Error> {
        let mut config = self.clone();
        config.apply_overrides(&layout.overrides())?;
        let world = config.world(layout.sizes.dp as usize);
        config.validate(world)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_says_its_sizes_and_only_the_choices_it_makes() {
        let tp2 = LayoutRun::new(Sizes { tp: 2, cp: 1, dp: 2, pp: 1 }, "tp-cp-dp");
        assert_eq!(tp2.overrides(), ["tensor_parallel=2", "context_parallel=1", "parallel_order=tp-cp-dp"]);
        let accumulated = LayoutRun { micro_batches: 4, zero: 3, recompute: true, ..tp2.clone() };
        assert_eq!(accumulated.overrides()[3..], ["gradient_accumulation_steps=4", "activation_checkpointing=true", "zero_stage=3"]);
        let piped = LayoutRun {
            micro_batches: 4,
            schedule: PipelineSchedule::GPipe,
            ..LayoutRun::new(Sizes { tp: 1, cp: 1, dp: 2, pp: 2 }, "tp-cp-dp-pp")
        };
        assert_eq!(piped.overrides()[3..], ["pipeline_parallel=2", "num_micro_batches=4", "pipeline_schedule=gpipe"]);
    }

    #[test]
    fn a_config_run_as_a_layout_is_checked_for_that_layout() {
        let base = TrainConfig::default();
        let piped = LayoutRun { micro_batches: 4, ..LayoutRun::new(Sizes { tp: 1, cp: 1, dp: 2, pp: 2 }, "tp-cp-dp-pp") };
        let config = base.with_layout(&piped).unwrap();
        assert_eq!((config.pipeline_parallel, config.num_micro_batches, config.world(2)), (2, 4, 4));
        let uneven = LayoutRun { micro_batches: 3, ..piped };
        let err = base.with_layout(&uneven).unwrap_err();
        assert_eq!(err.problems().0[0].field, "num_micro_batches", "{err}");
    }
}
