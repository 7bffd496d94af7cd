//! A CPU step's batch split over the cores.
//!
//! libtorch parallelises each operation over its intra-op threads, and at this model's sizes
//! (matrices of a few hundred columns, 450-token attention) an operation split over two cores
//! runs well short of twice as fast: the threads meet at a barrier after every operation and
//! the matrix kernels' packing work is repeated per thread. Giving each core its own slice of
//! the batch instead (forward and backward on one thread each, the gradients accumulating into
//! the same parameters, as two data-parallel ranks would after their all-reduce) keeps every
//! core in long single-threaded kernels. The loss of each slice is weighted by its share of
//! the batch, so the summed gradients are those of the whole batch.
//!
//! Used only where it cannot change a result: the serial model on the CPU, without dropout
//! (whose random masks would be drawn in a thread-dependent order).

use std::time::{Duration, Instant};

use scalebook_shared::config::AmpMode;
use scalebook_shared::profile::ranges;
use tch::{Device, Tensor};

use crate::Error;
use crate::ffi::{ProfiledThread, Range, SharedForward};
use crate::model::Forward;
use crate::train::loss::training_loss;

/// How a step's batch is split: `count` slices, each on a thread computing with
/// `threads_each` intra-op threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lanes {
    count: usize,
    threads_each: i32,
}

/// What one step's lanes did: the loss of the whole batch (detached) and the longest lane's
/// forward and backward times.
pub struct LanesOutcome {
    pub loss: Tensor,
    pub forward: Duration,
    pub backward: Duration,
}

impl Lanes {
    /// Lanes for a process computing with `threads` intra-op threads on batches of up to
    /// `batch` samples; `None` when a single lane would do (one thread, a batch of one) or
    /// when splitting is not safe for this run.
    pub fn for_run(device: Device, serial_model: bool, dropout: f64, threads: i32, batch: usize) -> Option<Lanes> {
        let count = usize::try_from(threads).ok()?.min(batch);
        let safe = device == Device::Cpu && serial_model && dropout == 0.0;
        (safe && count > 1).then(|| Lanes { count, threads_each: (threads / count as i32).max(1) })
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// The lanes a batch of `batch` samples is split over (no more than its samples).
    pub fn count_for(&self, batch: i64) -> usize {
        self.count.min(batch.max(1) as usize)
    }

    /// Forward, loss (weighted by `weight`) and backward of `input` and `target`, one slice of
    /// the batch per lane; the gradients of the whole batch end up in the model's parameters.
    pub fn forward_backward(
        &self,
        model: &dyn Forward,
        input: &Tensor,
        target: &Tensor,
        amp: AmpMode,
        weight: f64,
    ) -> Result<LanesOutcome, Error> {
        let batch = input.size()[0];
        let forward = |x: &Tensor, train: bool| model.forward(x, train);
        let model = &SharedForward(&forward);
        let threads = self.threads_each;
        let results = std::thread::scope(|scope| {
            let lanes: Vec<_> = slices(batch, self.count_for(batch))
                .map(|(start, len)| {
                    let (x, y) = (input.narrow(0, start, len), target.narrow(0, start, len));
                    let weight = weight * len as f64 / batch as f64;
                    scope.spawn(move || -> Result<(Tensor, Duration, Duration), Error> {
                        // Thread-local in libtorch's OpenMP build: this lane's operations run on
                        // `threads` threads, the caller's setting is untouched.
                        tch::set_num_threads(threads);
                        let _profiled = ProfiledThread::join();
                        let start = Instant::now();
                        let loss = training_loss(model, Device::Cpu, amp, &x, &y)? * weight;
                        let forward = start.elapsed();
                        let backward = Range::enter(ranges::BACKWARD);
                        loss.backward();
                        drop(backward);
                        Ok((loss.detach(), forward, start.elapsed() - forward))
                    })
                })
                .collect();
            lanes
                .into_iter()
                .map(|lane| {
                    lane.join().unwrap_or_else(|_| Err(Error::Native { what: "a training lane".into(), message: "panicked".into() }))
                })
                .collect::<Vec<_>>()
        });
        let mut outcome = LanesOutcome { loss: Tensor::from(0.0f32), forward: Duration::ZERO, backward: Duration::ZERO };
        for result in results {
            let (loss, forward, backward) = result?;
            outcome.loss += loss;
            outcome.forward = outcome.forward.max(forward);
            outcome.backward = outcome.backward.max(backward);
        }
        Ok(outcome)
    }
}

/// (start, length) of `count` slices of a batch of `batch`, as even as can be.
pub(crate) fn slices(batch: i64, count: usize) -> impl Iterator<Item = (i64, i64)> {
    let count = count as i64;
    (0..count).map(move |i| {
        let start = batch * i / count;
        (start, batch * (i + 1) / count - start)
    })
}

/// The lanes' shared forward pass is a model like any other to the loss.
impl Forward for SharedForward<'_> {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        self.run(x, train)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_batch_evenly() {
        assert_eq!(slices(8, 2).collect::<Vec<_>>(), [(0, 4), (4, 4)]);
        assert_eq!(slices(7, 3).collect::<Vec<_>>(), [(0, 2), (2, 2), (4, 3)]);
    }

    #[test]
    fn lanes_only_where_they_cannot_change_a_result() {
        let cpu = Device::Cpu;
        assert_eq!(Lanes::for_run(cpu, true, 0.0, 2, 8), Some(Lanes { count: 2, threads_each: 1 }));
        assert_eq!(Lanes::for_run(cpu, true, 0.0, 16, 4), Some(Lanes { count: 4, threads_each: 4 }));
        assert_eq!(Lanes::for_run(cpu, true, 0.0, 1, 8), None);
        assert_eq!(Lanes::for_run(cpu, true, 0.0, 2, 1), None);
        assert_eq!(Lanes::for_run(cpu, false, 0.0, 2, 8), None, "tensor or context parallel");
        assert_eq!(Lanes::for_run(cpu, true, 0.1, 2, 8), None, "dropout");
        assert_eq!(Lanes::for_run(Device::Cuda(0), true, 0.0, 2, 8), None);
    }
}
