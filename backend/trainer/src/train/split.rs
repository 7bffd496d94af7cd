//! Where an epoch's training steps spent their time, measured as the estimate splits a step:
//! waiting for data, computing, and each group's collectives (time and bytes, counted by the
//! process groups themselves), reported once an epoch as seconds (and bytes) per step.

use scalebook_shared::layout::Token;
use scalebook_shared::metrics::tags::split;

use super::report::Reporter;
use super::step::StepTimes;
use crate::Error;
use crate::dist::Comm;
use crate::ffi::Traffic;

/// The groups the estimate counts traffic over, in `split::GROUPS`' order.
const GROUPS: [Token; 3] = [Token::TP, Token::CP, Token::DP];

/// An epoch's steps, summed as they go.
pub struct Split {
    steps: u64,
    data_wait: f64,
    /// Forward, backward and optimizer: the collectives inside them included.
    working: f64,
    /// Each group's traffic when the epoch's steps began.
    before: [Traffic; 3],
}

impl Split {
    /// Starts counting at the epoch's first step.
    pub fn start(comm: &Comm) -> Split {
        Split { steps: 0, data_wait: 0.0, working: 0.0, before: GROUPS.map(|t| comm.group(t).traffic()) }
    }

    pub fn step(&mut self, data_wait: f64, times: &StepTimes) {
        self.steps += 1;
        self.data_wait += data_wait;
        self.working += times.forward + times.backward + times.optimizer;
    }

    /// The epoch's averages per step, reported at `step` of epoch `epoch`. Counted before the
    /// validation pass, whose collectives are not a training step's.
    pub fn report(&self, comm: &Comm, report: &mut Reporter, step: u64, epoch: u64) -> Result<(), Error> {
        let steps = self.steps.max(1) as f64;
        let mut communication = 0.0;
        for (i, token) in GROUPS.into_iter().enumerate() {
            let group = comm.group(token);
            if group.size() < 2 {
                continue;
            }
            let spent = group.traffic() - self.before[i];
            communication += spent.seconds;
            let (_, time_tag, bytes_tag) = split::GROUPS[i];
            report.scalar(step, epoch, time_tag, spent.seconds / steps)?;
            report.scalar(step, epoch, bytes_tag, spent.bytes as f64 / steps)?;
        }
        report.scalar(step, epoch, split::DATA_WAIT, self.data_wait / steps)?;
        report.scalar(step, epoch, split::COMPUTE, ((self.working - communication) / steps).max(0.0))
    }
}
