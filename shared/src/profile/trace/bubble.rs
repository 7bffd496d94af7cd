//! A pipeline's bubble, measured: in each profiled step, the time the pipeline's ranks spent
//! outside their passes (`forward mb M chunk C`, `backward mb M chunk C`) while the pipeline
//! ran, as a share of the ranks' time, beside what the schedule's formula predicts,
//! (p−1)/(m+p−1), or (p−1)/(v·m+p−1) interleaved (`shared::pipeline`). The pipeline runs from
//! the first pass any rank starts to the last one any rank ends, on the clock the ranks share
//! (Kineto's base time), so a stage that waits for its first micro-batch counts that wait as
//! the picture does. p, m and v are read from the passes themselves: the chunks and
//! micro-batches they name, and how many chunks one rank runs.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::window::format_micros;

/// One rank's passes in one step: when the first began and the last ended (µs on the shared
/// clock), and how long it was inside one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Passes {
    pub step: u64,
    pub first_us: f64,
    pub last_us: f64,
    pub busy_us: f64,
    /// The most micro-batches a pass named (its index, plus one).
    pub micro_batches: usize,
    /// The model chunks this rank ran, in order.
    pub chunks: Vec<usize>,
}

/// A step's bubble across every rank that ran passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bubble {
    pub step: u64,
    /// From the first pass's start to the last pass's end, over all ranks (µs).
    pub pipeline_us: f64,
    /// The ranks' idle share of that time: 1 − Σ busy / (ranks × pipeline time).
    pub fraction: f64,
    pub ranks: usize,
    /// The pipeline's shape as its passes say it: stages p, micro-batches m, chunks per rank v.
    pub stages: usize,
    pub micro_batches: usize,
    pub virtual_stages: usize,
    /// What the schedule's formula predicts: (p−1)/(v·m+p−1).
    pub formula: f64,
}

/// The bubble of every step the ranks' passes (each rank's, step by step) were profiled in, in
/// step order.
pub fn bubbles(ranks: &[&[Passes]]) -> Vec<Bubble> {
    let mut steps: Vec<u64> = ranks.iter().flat_map(|r| r.iter().map(|p| p.step)).collect();
    steps.sort_unstable();
    steps.dedup();
    steps.into_iter().filter_map(|step| bubble(step, ranks.iter().filter_map(|r| r.iter().find(|p| p.step == step)))).collect()
}

/// "step 5: the pipeline ran 41.2 ms; its 2 ranks idled 35 % of it, (p−1)/(m+p−1) = 33 % (p 2,
/// m 2)", as the timeline's summary and `scalebook profile` say it.
impl fmt::Display for Bubble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let interleaved = self.virtual_stages > 1;
        let formula = if interleaved { "(p−1)/(v·m+p−1)" } else { "(p−1)/(m+p−1)" };
        write!(
            f,
            "step {}: the pipeline ran {}; its {} ranks idled {:.0} % of it, {formula} = {:.0} % (p {}, m {}",
            self.step,
            format_micros(self.pipeline_us),
            self.ranks,
            100.0 * self.fraction,
            100.0 * self.formula,
            self.stages,
            self.micro_batches,
        )?;
        if interleaved {
            write!(f, ", v {}", self.virtual_stages)?;
        }
        f.write_str(")")
    }
}

fn bubble<'a>(step: u64, passes: impl Iterator<Item = &'a Passes>) -> Option<Bubble> {
    let (mut first, mut last, mut busy, mut ranks) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0usize);
    let (mut micro_batches, mut chunks, mut virtual_stages) = (0, 0, 1);
    for p in passes {
        (first, last, busy, ranks) = (first.min(p.first_us), last.max(p.last_us), busy + p.busy_us, ranks + 1);
        micro_batches = micro_batches.max(p.micro_batches);
        chunks = chunks.max(p.chunks.last().map_or(0, |c| c + 1));
        virtual_stages = virtual_stages.max(p.chunks.len());
    }
    let pipeline_us = last - first;
    let stages = chunks / virtual_stages;
    let formula = stages.saturating_sub(1) as f64 / (virtual_stages * micro_batches + stages).saturating_sub(1).max(1) as f64;
    (ranks > 0 && pipeline_us > 0.0).then(|| Bubble {
        step,
        pipeline_us,
        fraction: 1.0 - busy / (ranks as f64 * pipeline_us),
        ranks,
        stages,
        micro_batches,
        virtual_stages,
        formula,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{Schedule, idle_share, simulate};

    /// The simulated schedule's passes as the ranks' summaries would hold them.
    fn summaries(schedule: Schedule, stages: usize, micro_batches: usize, skew: f64) -> Vec<Vec<Passes>> {
        let passes = simulate(schedule, stages, micro_batches, 100.0);
        (0..stages)
            .map(|stage| {
                let mine: Vec<_> = passes.iter().filter(|p| p.stage == stage).collect();
                // Each rank's clock is off by `skew`, which the shared clock takes out.
                let first_us = mine.iter().map(|p| p.start).fold(f64::INFINITY, f64::min) + skew * stage as f64;
                let last_us = mine.iter().map(|p| p.end()).fold(0.0, f64::max) + skew * stage as f64;
                let busy_us = mine.iter().map(|p| p.length).sum();
                let mut chunks: Vec<usize> = mine.iter().map(|p| p.chunk).collect();
                chunks.sort_unstable();
                chunks.dedup();
                vec![Passes { step: 5, first_us, last_us, busy_us, micro_batches, chunks }]
            })
            .collect()
    }

    #[test]
    fn the_measured_bubble_of_a_schedule_run_as_drawn_is_its_idle_share() {
        for (schedule, stages, m) in [(Schedule::GPipe, 4, 8), (Schedule::OneFOneB, 2, 4), (Schedule::Interleaved(2), 4, 8)] {
            let ranks = summaries(schedule, stages, m, 0.0);
            let measured = bubbles(&ranks.iter().map(Vec::as_slice).collect::<Vec<_>>());
            let expected = idle_share(&simulate(schedule, stages, m, 100.0), stages);
            assert_eq!(measured.len(), 1);
            assert!((measured[0].fraction - expected).abs() < 1e-9, "{schedule:?}: {} vs {expected}", measured[0].fraction);
            assert_eq!((measured[0].step, measured[0].ranks, measured[0].stages, measured[0].micro_batches), (5, stages, stages, m));
            // The picture's schedule idles exactly what its formula says.
            assert!((measured[0].formula - expected).abs() < 1e-9, "{schedule:?}: formula {}", measured[0].formula);
        }
    }

    #[test]
    fn a_bubble_is_told_beside_its_formula() {
        let bubble = Bubble {
            step: 5,
            pipeline_us: 41_200.0,
            fraction: 0.35,
            ranks: 2,
            stages: 2,
            micro_batches: 2,
            virtual_stages: 1,
            formula: 1.0 / 3.0,
        };
        assert_eq!(bubble.to_string(), "step 5: the pipeline ran 41.2 ms; its 2 ranks idled 35 % of it, (p−1)/(m+p−1) = 33 % (p 2, m 2)");
        let interleaved = Bubble { virtual_stages: 2, formula: 0.2, ..bubble };
        assert!(interleaved.to_string().ends_with("(p−1)/(v·m+p−1) = 20 % (p 2, m 2, v 2)"), "{interleaved}");
    }

    #[test]
    fn a_step_without_passes_has_no_bubble() {
        assert!(bubbles(&[&[]]).is_empty());
    }
}
