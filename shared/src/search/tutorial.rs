//! The layouts the tutorial itself ran, so an answer can set its best beside the choice a
//! learner has already seen (reference §10 and docs/coverage.md).

use serde::Serialize;

use super::candidate::{Candidate, Order};
use super::split::Difference;
use super::walk::{Judgement, Ranked};
use crate::Error;
use crate::layout::Sizes;

/// One layout the tutorial launches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TutorialChoice {
    pub config: &'static str,
    pub gpus: u32,
    pub sizes: Sizes,
    /// As the tutorial passes `--parallel_order` (its default when it passes none).
    pub order: &'static str,
    /// How the tutorial launches it.
    pub command: &'static str,
    /// The checklist row (docs/coverage.md) it comes from.
    pub checklist: &'static str,
}

const fn sizes(tp: u32, cp: u32, dp: u32) -> Sizes {
    Sizes { tp, cp, dp, pp: 1 }
}

/// DL4SCI25's model-parallel runs of `mp`.
pub const CHOICES: [TutorialChoice; 3] = [
    TutorialChoice {
        config: "mp",
        gpus: 4,
        sizes: sizes(1, 1, 4),
        order: "tp-cp-dp",
        command: "sbatch --nodes 1 submit_modelparallel.sh --config=mp --tensor_parallel=1",
        checklist: "000-71",
    },
    TutorialChoice {
        config: "mp",
        gpus: 16,
        sizes: sizes(4, 1, 4),
        order: "tp-cp-dp",
        command: "sbatch --nodes 4 submit_modelparallel.sh --config=mp --tensor_parallel=4",
        checklist: "000-75",
    },
    TutorialChoice {
        config: "mp",
        gpus: 16,
        sizes: sizes(1, 4, 4),
        order: "cp-tp-dp",
        command: "sbatch --nodes 4 submit_modelparallel.sh --config=mp --context_parallel=4 --parallel_order=cp-tp-dp",
        checklist: "000-81",
    },
];

/// The tutorial's layouts of `config` on `gpus` GPUs.
pub fn choices(config: &str, gpus: u32) -> impl Iterator<Item = &'static TutorialChoice> {
    CHOICES.iter().filter(move |c| c.config == config && c.gpus == gpus)
}

impl TutorialChoice {
    /// The layout as the tutorial runs it: DDP, no recomputation, one micro-batch.
    pub fn candidate(&self) -> Result<Candidate, Error> {
        let order = Order::parse(self.order, self.sizes)?;
        Ok(Candidate { sizes: self.sizes, order, zero: 0, recompute: false, micro_batches: 1 })
    }
}

/// Where a tutorial layout stands in an answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    pub choice: TutorialChoice,
    /// Its place in the ranking, from 1, when it runs.
    pub rank: Option<usize>,
    pub judgement: Judgement,
    /// What makes it slower than the best, when it is.
    pub behind_best: Option<Difference>,
}

impl Standing {
    pub(super) fn new(choice: TutorialChoice, ranked: &[Ranked], judgement: Judgement) -> Standing {
        let rank = match &judgement {
            Judgement::Valid(this) => ranked.iter().position(|r| r.candidate == this.candidate).map(|i| i + 1),
            Judgement::Excluded { .. } => None,
        };
        let behind_best = match (&judgement, ranked.first()) {
            (Judgement::Valid(this), Some(best)) if rank != Some(1) => {
                Some(Difference::between((&best.split, best.global_batch as f64), (&this.split, this.global_batch as f64)))
            }
            _ => None,
        };
        Standing { choice, rank, judgement, behind_best }
    }
}
