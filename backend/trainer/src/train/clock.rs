//! Where a step's time goes, measured without making the host wait for the GPU: on a GPU each
//! phase is the time between two events in its stream, read when the step's loss is read
//! (which waits for the step anyway); on the CPU, the host's clock.
//!
//! A device synchronisation after each phase, as the trainer timed them before, empties the
//! GPU's queue three times a step: the GPU then idles until the host has queued enough of
//! the next phase, which the small kernels around the optimizer and the loss make slow.

use std::time::Instant;

use tch::Device;

use crate::Error;
use crate::ffi::GpuMark;

/// A point in a step's time on one device.
pub struct Mark {
    at: Instant,
    gpu: Option<GpuMark>,
}

impl Mark {
    /// Now: the host's clock, and on a GPU an event in its current stream.
    pub fn now(device: Device) -> Result<Mark, Error> {
        let gpu = match device {
            Device::Cuda(index) => Some(GpuMark::record(index)?),
            _ => None,
        };
        Ok(Mark { at: Instant::now(), gpu })
    }
}

/// The time of one phase (forward, backward, optimizer), over the spans of a step.
#[derive(Default)]
pub struct Phase {
    host: f64,
    gpu: Vec<(GpuMark, GpuMark)>,
}

impl Phase {
    /// The span from `start` to `end`: GPU time where both are GPU marks, host time otherwise.
    pub fn add(&mut self, start: Mark, end: Mark) {
        match (start.gpu, end.gpu) {
            (Some(start), Some(end)) => self.gpu.push((start, end)),
            _ => self.host += end.at.saturating_duration_since(start.at).as_secs_f64(),
        }
    }

    /// Seconds measured elsewhere (the CPU's lanes time themselves).
    pub fn add_seconds(&mut self, seconds: f64) {
        self.host += seconds;
    }

    /// The phase's seconds; on a GPU, once it has passed the phase's last mark.
    pub fn seconds(&self) -> Result<f64, Error> {
        self.gpu.iter().try_fold(self.host, |sum, (start, end)| Ok(sum + start.seconds_to(end)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_spans_add_up() {
        let mut phase = Phase::default();
        let start = Mark::now(Device::Cpu).unwrap();
        let end = Mark::now(Device::Cpu).unwrap();
        let span = end.at.duration_since(start.at).as_secs_f64();
        phase.add(start, end);
        phase.add_seconds(1.0);
        assert_eq!(phase.seconds().unwrap(), 1.0 + span);
    }
}
