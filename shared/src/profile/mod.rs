//! Step profiles: which steps a run records with libtorch's profiler (`profile: 5:8`), the
//! names of the ranges the trainer marks inside a step, and where each rank's trace lands.
//!
//! The trainer writes one Chrome-trace JSON file per rank ([`trace_file`] inside
//! [`crate::rundir::PROFILE_DIR`]); the browser's timeline reads the same files. The range
//! names are the contract between them: the trainer opens exactly these, the timeline draws
//! them on top of the ops and the tests look for each on every rank.

pub mod recorded;
pub mod trace;

use std::fmt;
use std::ops::Range;

/// The ranges the trainer marks around the parts of a training step (user annotations in the
/// Chrome trace; NVTX ranges as well on a CUDA build, so `nsys` shows them).
pub mod ranges {
    /// Waiting for the loader's next batch.
    pub const DATA_WAIT: &str = "data_wait";
    /// The forward pass and the loss.
    pub const FORWARD: &str = "forward";
    /// The backward pass.
    pub const BACKWARD: &str = "backward";
    /// The dp gradient all-reduce (DDP's buckets), only on runs with dp > 1.
    pub const GRAD_ALLREDUCE: &str = "grad_allreduce";
    /// The optimizer step (and, with fp16, the loss scaler's unscale and update).
    pub const OPTIMIZER: &str = "optimizer";
    /// The ranges of every step of every run, in the order a step runs them.
    pub const STEP: [&str; 4] = [DATA_WAIT, FORWARD, BACKWARD, OPTIMIZER];
    /// The prefix of a collective's range: `c10d::all_reduce`, `c10d::all_gather`,
    /// `c10d::broadcast`, ...
    pub const COLLECTIVE_PREFIX: &str = "c10d::";
    /// The range around one whole profiled step, named `step N`.
    pub const STEP_PREFIX: &str = "step ";

    /// A pipeline pass's range, inside the step's `forward` or `backward` range: `forward mb 3
    /// chunk 1` is micro-batch 3's forward pass through model chunk 1 (chunk c runs on
    /// pipeline rank c mod pp), so a rank's lane shows its passes and the bubble between them.
    pub fn pipeline_pass(backward: bool, micro_batch: usize, chunk: usize) -> String {
        format!("{} mb {micro_batch} chunk {chunk}", if backward { BACKWARD } else { FORWARD })
    }

    /// A pipeline pass's range read back: (backward, micro-batch, chunk), or `None` when
    /// `name` is not one ([`pipeline_pass`]).
    pub fn read_pipeline_pass(name: &str) -> Option<(bool, usize, usize)> {
        let (backward, rest) = match name.strip_prefix(FORWARD) {
            Some(rest) => (false, rest),
            None => (true, name.strip_prefix(BACKWARD)?),
        };
        let (micro_batch, chunk) = rest.strip_prefix(" mb ")?.split_once(" chunk ")?;
        Some((backward, micro_batch.parse().ok()?, chunk.parse().ok()?))
    }
}

/// The file of `rank`'s trace inside the run's profile directory.
pub fn trace_file(rank: usize) -> String {
    format!("rank{rank}.trace.json")
}

/// The rank a trace file belongs to, from its name (`rank3.trace.json` is rank 3).
pub fn trace_rank(file: &str) -> Option<usize> {
    file.strip_prefix("rank")?.strip_suffix(".trace.json")?.parse().ok()
}

/// The steps a run profiles, `START:END` as a Python slice: `5:8` is steps 5, 6 and 7.
/// Steps count from 1 like the charts' step axis (step N is the N-th optimizer step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepWindow {
    pub start: usize,
    pub end: usize,
}

impl StepWindow {
    /// Reads a config's `profile` value: empty is no profile; otherwise `START:END` with
    /// 1 ≤ START < END. The error is the rule, to be reported against the field.
    pub fn parse(text: &str) -> Result<Option<StepWindow>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let rule = || format!("`{text}` is not a step window START:END like 5:8 (steps 5, 6 and 7; empty for none)");
        let (start, end) = text.split_once(':').ok_or_else(rule)?;
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| rule());
        let (start, end) = (number(start)?, number(end)?);
        if start == 0 {
            return Err(format!("`{text}` starts at step 0; steps count from 1"));
        }
        if end <= start {
            return Err(format!("`{text}` holds no step: END must be greater than START"));
        }
        Ok(Some(StepWindow { start, end }))
    }

    /// The steps, as a range of step numbers.
    pub fn steps(self) -> Range<usize> {
        self.start..self.end
    }

    pub fn contains(self, step: usize) -> bool {
        self.steps().contains(&step)
    }
}

impl fmt::Display for StepWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_like_python_slices() {
        assert_eq!(StepWindow::parse("5:8").unwrap(), Some(StepWindow { start: 5, end: 8 }));
        assert_eq!(StepWindow::parse(" 1 : 2 ").unwrap().unwrap().steps().collect::<Vec<_>>(), vec![1]);
        assert_eq!(StepWindow::parse("").unwrap(), None);
        assert!(StepWindow::parse("5-8").unwrap_err().contains("START:END"));
        assert!(StepWindow::parse("0:3").unwrap_err().contains("count from 1"));
        assert!(StepWindow::parse("4:4").unwrap_err().contains("no step"));
        assert_eq!(StepWindow { start: 5, end: 8 }.to_string(), "5:8");
    }

    #[test]
    fn trace_files_name_their_rank() {
        assert_eq!(trace_rank(&trace_file(3)), Some(3));
        assert_eq!(trace_rank("rank.trace.json"), None);
        assert_eq!(trace_rank("other.json"), None);
    }
}
