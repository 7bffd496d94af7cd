//! Batches fed to the device one step ahead: before step k runs, batch k+1 is taken from the
//! loader and its copy to the GPU started on a stream of its own ([`InFlight`]), so it travels
//! while step k computes; step k+1 then waits for it on the GPU, ordered by an event. On the
//! CPU the same order holds and the copy is no copy at all.
//!
//! The loader's wait for batch k+1 happens before step k, so it is carried with the batch and
//! reported as step k+1's data wait, where the tutorial's log puts it.

use std::time::Instant;

use scalebook_shared::profile::ranges;
use tch::Device;

use crate::Error;
use crate::data::Batch;
use crate::ffi::{InFlight, Range};

/// A batch on its way, and the seconds the loader kept the loop waiting for it.
struct Incoming {
    input: InFlight,
    target: InFlight,
    indices: Vec<usize>,
    data_wait: f64,
}

pub struct Feed<'a> {
    batches: Box<dyn Iterator<Item = Result<Batch, Error>> + 'a>,
    device: Device,
    next: Option<Incoming>,
}

impl<'a> Feed<'a> {
    /// At most `steps` batches of `batches`, for `device`.
    pub fn new(batches: Box<dyn Iterator<Item = Result<Batch, Error>> + 'a>, steps: usize, device: Device) -> Feed<'a> {
        Feed { batches: Box::new(batches.take(steps)), device, next: None }
    }

    /// The next batch on the device with the seconds waited for it (`None` when the epoch has
    /// no more), the one after it already on its way.
    pub fn next_batch(&mut self) -> Result<Option<(Batch, f64)>, Error> {
        let current = match self.next.take() {
            Some(incoming) => incoming,
            None => match self.fetch()? {
                Some(incoming) => incoming,
                None => return Ok(None),
            },
        };
        self.next = self.fetch()?;
        let batch = Batch { input: current.input.finish()?, target: current.target.finish()?, indices: current.indices };
        Ok(Some((batch, current.data_wait)))
    }

    /// Takes a batch from the loader and starts its copy.
    fn fetch(&mut self) -> Result<Option<Incoming>, Error> {
        let wait_start = Instant::now();
        let wait_range = Range::enter(ranges::DATA_WAIT);
        let Some(batch) = self.batches.next().transpose()? else { return Ok(None) };
        drop(wait_range);
        let data_wait = wait_start.elapsed().as_secs_f64();
        let (input, target) = (InFlight::start(&batch.input, self.device)?, InFlight::start(&batch.target, self.device)?);
        Ok(Some(Incoming { input, target, indices: batch.indices, data_wait }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Kind, Tensor};

    fn batches(n: usize) -> Box<dyn Iterator<Item = Result<Batch, Error>>> {
        Box::new((0..n).map(|k| {
            let t = Tensor::full([2, 3], k as f64, (Kind::Float, Device::Cpu));
            Ok(Batch { input: t.shallow_clone(), target: t * 2.0, indices: vec![k] })
        }))
    }

    #[test]
    fn batches_arrive_in_order_and_no_more_than_the_steps() {
        let mut feed = Feed::new(batches(5), 3, Device::Cpu);
        let mut seen = Vec::new();
        while let Some((batch, wait)) = feed.next_batch().unwrap() {
            assert!(wait >= 0.0);
            assert_eq!(f64::try_from(batch.target.mean(Kind::Float)).unwrap(), 2.0 * batch.indices[0] as f64);
            seen.push(batch.indices[0]);
        }
        assert_eq!(seen, [0, 1, 2]);
    }

    #[test]
    fn an_error_of_the_loader_reaches_the_step() {
        let failing: Box<dyn Iterator<Item = Result<Batch, Error>>> =
            Box::new(batches(1).chain(std::iter::once(Err(Error::DataSetting("broken file".into())))));
        let mut feed = Feed::new(failing, 4, Device::Cpu);
        let err = feed.next_batch().unwrap_err().to_string();
        assert!(err.contains("broken file"), "{err}");
    }
}
