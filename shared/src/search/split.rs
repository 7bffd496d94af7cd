//! Where a layout's step goes, from the estimate's own parts, and which part limits it: the
//! "why" beside every prediction.
//!
//! The estimate models one step with DDP and no recomputation, its micro-batches included
//! (accumulation without a pipeline, the pipeline's with one, with its bubble and transfers).
//! A candidate's step is composed from it, never from a second model:
//! - recomputation: the estimate's own what-if (`recompute_what_if`), whose step differs by
//!   the forward pass run again (and, in a pipeline, the longer bubble);
//! - ZeRO: the estimate's `zero_what_if` for the stage: its memory, and what the stage
//!   changes of the step (dp's collectives waited for and left exposed, the optimizer over a
//!   shard, the bubble), counted as dp's;
//! - data loading: the loader reads the rank's whole batch each step; read inside the step (0
//!   workers) all of it counts, read by workers only what the rest of the step, recomputation
//!   and ZeRO's traffic included, does not hide.
//!
//! Not modelled, so never part of a split: the efficiency small micro-batches lose, and a DDP
//! bucket's call cost (the search keeps the config's `bucket_cap_mb`: the estimate counts only
//! what smaller buckets gain, so a search over them would always pick the smallest).

use std::fmt;

use serde::Serialize;

use crate::estimate::{Estimate, Link, ZeroWhatIf};
use crate::layout::Token;

/// The groups whose collectives a step runs, in the estimate's terms.
const GROUPS: [Token; 4] = [Token::TP, Token::CP, Token::PP, Token::DP];

/// One part of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "part", rename_all = "kebab-case")]
pub enum StepPart {
    /// Matmuls and attention at the calibrated rate (with each op's dispatch cost, 0 on a GPU).
    Arithmetic,
    /// LayerNorms, casts, adds and GELU, at the memory bandwidth.
    ElementWise,
    /// The forward pass again in backward.
    Recompute,
    /// Adam, at the memory bandwidth.
    Optimizer,
    /// A group's collectives between layers (or stages), which the computation waits for.
    Collectives { group: Token, link: Link },
    /// A pipeline's stages idle while it fills and drains.
    Bubble,
    /// The part of a group's gradient all-reduce the backward pass does not hide.
    GradientSync { group: Token, link: Link },
    /// Reading and preparing the batch: all of it with 0 workers, what the rest of the step
    /// does not hide with workers.
    DataLoading,
}

impl fmt::Display for StepPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepPart::Arithmetic => f.write_str("arithmetic (matmuls and attention)"),
            StepPart::ElementWise => f.write_str("element-wise work (memory bandwidth)"),
            StepPart::Recompute => f.write_str("recomputed forward pass"),
            StepPart::Optimizer => f.write_str("optimizer step"),
            StepPart::Collectives { group, link } if *group == Token::PP => write!(f, "pp transfers between stages ({})", link.name()),
            StepPart::Collectives { group, link } => write!(f, "{group} collectives between layers ({})", link.name()),
            StepPart::Bubble => f.write_str("pipeline bubble (stages idle)"),
            StepPart::GradientSync { group, link } => write!(f, "{group} gradient all-reduce not hidden by backward ({})", link.name()),
            StepPart::DataLoading => f.write_str("data loading the step waits for"),
        }
    }
}

/// One group's communication in a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupTime {
    pub group: Token,
    pub link: Link,
    /// Collectives the computation waits for, all micro-batches.
    pub blocking_s: f64,
    /// The part of its overlapped all-reduce left exposed.
    pub exposed_s: f64,
}

/// One step of a candidate, by part, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Split {
    pub arithmetic_s: f64,
    pub element_wise_s: f64,
    pub recompute_s: f64,
    pub optimizer_s: f64,
    /// A pipeline's idle time (0 without one).
    pub bubble_s: f64,
    pub groups: [GroupTime; 4],
    /// What the loader needs per step: the rank's batch over its readers.
    pub data_s: f64,
    /// Whether the loader reads beside the step (workers), so that the rest of it hides the
    /// reading, rather than inside it.
    pub data_overlapped: bool,
}

impl Split {
    /// The step of `e`, an estimate without recomputation and with DDP.
    pub(super) fn of(e: &Estimate) -> Split {
        let t = &e.time;
        let mut groups = GROUPS.map(|group| GroupTime { group, link: Link::Nvlink, blocking_s: 0.0, exposed_s: 0.0 });
        // The estimate gives the exposed time of all overlapped collectives at once; each
        // group is given its share of it by its full time.
        let exposed_share = if t.overlapped_comm_s > 0.0 { t.exposed_overlapped_comm_s / t.overlapped_comm_s } else { 0.0 };
        for c in &e.collectives {
            let Some(g) = groups.iter_mut().find(|g| g.group == c.group) else { continue };
            g.link = c.link;
            match c.overlapped {
                true => g.exposed_s += c.seconds * exposed_share,
                false => g.blocking_s += c.seconds,
            }
        }
        Split {
            arithmetic_s: t.forward_s + t.backward_s - t.elementwise_s + t.overhead_s,
            element_wise_s: t.elementwise_s,
            recompute_s: 0.0,
            optimizer_s: t.optimizer_s,
            bubble_s: t.bubble_s,
            groups,
            data_s: t.data_s,
            data_overlapped: t.data_overlapped,
        }
    }

    /// This split with `recompute_s` of recomputation, and ZeRO's stage `zero` in place of
    /// `ddp` (the estimate's stage): what it changes is dp's traffic, the optimizer and the
    /// bubble.
    pub(super) fn with(mut self, recompute_s: f64, ddp: &ZeroWhatIf, zero: &ZeroWhatIf) -> Split {
        self.recompute_s = recompute_s;
        let dp = &mut self.groups[3];
        dp.blocking_s += zero.blocking_comm_s - ddp.blocking_comm_s;
        dp.exposed_s += zero.exposed_overlapped_comm_s - ddp.exposed_overlapped_comm_s;
        self.optimizer_s += zero.optimizer_s - ddp.optimizer_s;
        self.bubble_s += zero.bubble_s - ddp.bubble_s;
        self
    }

    pub fn total_s(&self) -> f64 {
        self.parts().iter().map(|(_, s)| s).sum()
    }

    /// The part of the loader's time the step waits for.
    pub fn exposed_data_s(&self) -> f64 {
        let rest = self.arithmetic_s + self.element_wise_s + self.recompute_s + self.optimizer_s + self.bubble_s;
        let rest = self.groups.iter().fold(rest, |sum, g| sum + g.blocking_s + g.exposed_s);
        if self.data_overlapped { (self.data_s - rest).max(0.0) } else { self.data_s }
    }

    /// Every part, including those that take no time.
    pub fn parts(&self) -> [(StepPart, f64); 14] {
        let [tp, cp, pp, dp] = self.groups;
        let blocking = |g: GroupTime| (StepPart::Collectives { group: g.group, link: g.link }, g.blocking_s);
        let exposed = |g: GroupTime| (StepPart::GradientSync { group: g.group, link: g.link }, g.exposed_s);
        [
            (StepPart::Arithmetic, self.arithmetic_s),
            (StepPart::ElementWise, self.element_wise_s),
            (StepPart::Recompute, self.recompute_s),
            (StepPart::Optimizer, self.optimizer_s),
            blocking(tp),
            blocking(cp),
            blocking(pp),
            blocking(dp),
            (StepPart::Bubble, self.bubble_s),
            exposed(tp),
            exposed(cp),
            exposed(pp),
            exposed(dp),
            (StepPart::DataLoading, self.exposed_data_s()),
        ]
    }

    /// The largest part: what a faster layout would have to shrink.
    pub fn limit(&self) -> StepPart {
        self.parts().into_iter().fold((StepPart::Arithmetic, f64::MIN), |best, part| if part.1 > best.1 { part } else { best }).0
    }

    /// The seconds of `part` (0 when this step has no such part).
    pub fn seconds(&self, part: StepPart) -> f64 {
        self.parts().into_iter().filter(|(p, _)| same_kind(*p, part)).map(|(_, s)| s).sum()
    }
}

/// Parts that name the same thing, whichever link it uses in each layout (tp on NVLink in one
/// layout and on the network in another is still tp's collectives).
fn same_kind(a: StepPart, b: StepPart) -> bool {
    match (a, b) {
        (StepPart::Collectives { group: x, .. }, StepPart::Collectives { group: y, .. }) => x == y,
        (StepPart::GradientSync { group: x, .. }, StepPart::GradientSync { group: y, .. }) => x == y,
        _ => a == b,
    }
}

/// How one layout's step differs from another's, per sample (their batches may differ).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// The part whose time per sample differs most, as the slower layout has it.
    pub part: StepPart,
    /// Milliseconds per sample of that part: in the faster layout, then the slower.
    pub faster_ms_per_sample: f64,
    pub slower_ms_per_sample: f64,
}

impl Difference {
    /// What makes `slower` slower than `faster`, given each step's samples: the part the
    /// slower layout spends most more time on.
    pub fn between(faster: (&Split, f64), slower: (&Split, f64)) -> Difference {
        let per_sample = |(split, samples): (&Split, f64), part: StepPart| split.seconds(part) / samples * 1e3;
        let rows = slower.0.parts().map(|(part, _)| (part, per_sample(faster, part), per_sample(slower, part)));
        let widest = rows.into_iter().fold(rows[0], |best, row| if row.2 - row.1 > best.2 - best.1 { row } else { best });
        let (part, faster_ms_per_sample, slower_ms_per_sample) = widest;
        Difference { part, faster_ms_per_sample, slower_ms_per_sample }
    }
}
