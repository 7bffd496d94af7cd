//! The tutorial's `DataLoader`: batches of `local_batch_size` samples in the sampler's order,
//! the incomplete last batch dropped, read either inline (0 workers, the tutorial's baseline:
//! the batch is read when the step asks for it, its samples shared over the process's compute
//! threads, or read one by one as the tutorial's loader does with `serial_read`) or by worker
//! threads that read and normalise ahead of the training step.
//!
//! Like PyTorch, batch k is produced by worker k mod W and handed over through that worker's
//! own bounded queue, so batches arrive in sampler order whatever the timing, and a worker
//! is never more than [`PREFETCH_PER_WORKER`] batches ahead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use tch::{Device, Kind, Tensor};

use super::{Era5Dataset, ShardedSampler};
use crate::Error;
use crate::ffi::float_values_mut;

pub use scalebook_shared::config::PREFETCH_PER_WORKER;

/// One batch: inputs and targets of shape (B, C, H, W), float32, normalised, and the dataset
/// indices they came from.
#[derive(Debug)]
pub struct Batch {
    pub input: Tensor,
    pub target: Tensor,
    pub indices: Vec<usize>,
}

impl Batch {
    /// The same batch again, sharing the tensors' storage.
    pub fn shallow_clone(&self) -> Batch {
        Batch { input: self.input.shallow_clone(), target: self.target.shallow_clone(), indices: self.indices.clone() }
    }
}

pub struct DataLoader {
    dataset: Arc<Era5Dataset>,
    sampler: ShardedSampler,
    batch_size: usize,
    num_workers: usize,
    pinned: bool,
    serial: bool,
}

impl DataLoader {
    pub fn new(dataset: Arc<Era5Dataset>, sampler: ShardedSampler, batch_size: usize, num_workers: usize) -> Result<DataLoader, Error> {
        if batch_size == 0 {
            return Err(Error::DataSetting("the local batch size must be at least 1".into()));
        }
        if sampler.len() != dataset.len() {
            return Err(Error::DataSetting(format!(
                "the sampler draws from {} samples but the dataset has {}",
                sampler.len(),
                dataset.len()
            )));
        }
        Ok(DataLoader { dataset, sampler, batch_size, num_workers, pinned: false, serial: false })
    }

    /// Batches for `device`: in pinned host memory when it is a GPU, unchanged otherwise.
    pub fn for_device(mut self, device: Device) -> DataLoader {
        self.pinned = device.is_cuda();
        self
    }

    /// With 0 workers, batches read one sample after another on the calling thread, as the
    /// tutorial's loader does (`serial_read`), instead of over the compute threads.
    pub fn serial(mut self, serial: bool) -> DataLoader {
        self.serial = serial;
        self
    }

    /// Iterations per epoch: `floor(num_samples / batch_size)`.
    pub fn len(&self) -> usize {
        self.sampler.num_samples() / self.batch_size
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dataset(&self) -> &Arc<Era5Dataset> {
        &self.dataset
    }

    pub fn sampler(&self) -> &ShardedSampler {
        &self.sampler
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// The batches of `epoch` (which seeds the shuffle, like `set_epoch`). A resumed run starts
    /// at an epoch's beginning (checkpoints are written at epochs' ends), so an epoch is always
    /// read whole.
    pub fn epoch(&self, epoch: u64) -> Epoch {
        let order = self.sampler.indices(epoch);
        let plan = Arc::new(Plan {
            dataset: Arc::clone(&self.dataset),
            order: order[..self.len() * self.batch_size].to_vec(),
            batch_size: self.batch_size,
            pinned: self.pinned,
        });
        let count = self.len();
        let source = if self.num_workers == 0 {
            let threads = if self.serial { 1 } else { usize::try_from(tch::get_num_threads()).unwrap_or(1).max(1) };
            Source::Inline { threads }
        } else {
            Source::spawn(&plan, self.num_workers)
        };
        Epoch { plan, source, next: 0, count, failed: false }
    }
}

/// What to read in one epoch: `order` holds the samples of its batches.
struct Plan {
    dataset: Arc<Era5Dataset>,
    order: Vec<usize>,
    batch_size: usize,
    /// Whether the batches go to a GPU: then they are allocated in pinned memory.
    pinned: bool,
}

impl Plan {
    /// Batch `k`, each sample read and normalised straight into the batch tensors' memory,
    /// its samples shared out over `threads` threads.
    fn read(&self, k: usize, threads: usize) -> Result<Batch, Error> {
        let indices = self.order[k * self.batch_size..(k + 1) * self.batch_size].to_vec();
        let dataset = &self.dataset;
        let [h, w] = dataset.img_size();
        let shape = [indices.len(), dataset.channels(), h, w].map(|dim| dim as i64);
        let (mut input, mut target) = (self.batch_tensor(shape)?, self.batch_tensor(shape)?);
        let n = dataset.sample_len();
        let per_thread = indices.len().div_ceil(threads.max(1)) * n;
        let (inputs, targets) = (float_values_mut(&mut input)?, float_values_mut(&mut target)?);
        let parts = indices.chunks(per_thread / n).zip(inputs.chunks_mut(per_thread)).zip(targets.chunks_mut(per_thread));
        let read_part = |((indices, inputs), targets): ((&[usize], &mut [f32]), &mut [f32])| -> Result<(), Error> {
            for ((&index, input), target) in indices.iter().zip(inputs.chunks_exact_mut(n)).zip(targets.chunks_exact_mut(n)) {
                dataset.read_into(index, input, target)?;
            }
            Ok(())
        };
        std::thread::scope(|scope| {
            let mut parts = parts.collect::<Vec<_>>().into_iter();
            let first = parts.next();
            let others: Vec<_> = parts.map(|part| scope.spawn(move || read_part(part))).collect();
            first.map_or(Ok(()), read_part)?;
            others.into_iter().try_for_each(|other| other.join().unwrap_or(Err(Error::LoaderWorker { worker: 0, batch: k })))
        })?;
        Ok(Batch { input, target, indices })
    }

    /// An uninitialised float tensor on the CPU, in page-locked memory when the batches go to
    /// a GPU (so the copy there is one DMA transfer, as PyTorch's `pin_memory=True`).
    fn batch_tensor(&self, shape: [i64; 4]) -> Result<Tensor, Error> {
        if self.pinned { crate::ffi::empty_pinned(&shape) } else { Ok(Tensor::f_empty(shape, (Kind::Float, Device::Cpu))?) }
    }
}

enum Source {
    /// Read when asked, on as many threads as this process computes with (libtorch's
    /// intra-op threads: the launcher gives each rank its share of the cores).
    Inline {
        threads: usize,
    },
    Workers {
        queues: Vec<Receiver<Result<Batch, Error>>>,
        handles: Vec<JoinHandle<()>>,
        stop: Arc<AtomicBool>,
    },
}

impl Source {
    fn spawn(plan: &Arc<Plan>, workers: usize) -> Source {
        let stop = Arc::new(AtomicBool::new(false));
        let (queues, handles) = (0..workers)
            .map(|worker| {
                let (sender, queue) = sync_channel(PREFETCH_PER_WORKER);
                let (plan, stop) = (Arc::clone(plan), Arc::clone(&stop));
                let handle = std::thread::Builder::new()
                    .name(format!("data-worker-{worker}"))
                    .spawn(move || work(&plan, worker, workers, &stop, &sender));
                (queue, handle)
            })
            .unzip::<_, _, Vec<_>, Vec<_>>();
        // A worker that could not be started shows up as a closed queue when its first batch
        // is due, reported like any worker that stopped early.
        Source::Workers { queues, handles: handles.into_iter().flatten().collect(), stop }
    }
}

/// One worker's loop: batches `worker`, `worker + workers`, ... until the epoch ends, the
/// consumer goes away, or a read fails (the error is its last delivery).
fn work(plan: &Plan, worker: usize, workers: usize, stop: &AtomicBool, queue: &SyncSender<Result<Batch, Error>>) {
    let batches = plan.order.len() / plan.batch_size;
    for k in (worker..batches).step_by(workers) {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let batch = plan.read(k, 1);
        let failed = batch.is_err();
        if queue.send(batch).is_err() || failed {
            return;
        }
    }
}

/// The batches of one epoch, in order. Ends after the first error. Dropping it early stops
/// and joins its workers.
pub struct Epoch {
    plan: Arc<Plan>,
    source: Source,
    next: usize,
    count: usize,
    failed: bool,
}

impl Iterator for Epoch {
    type Item = Result<Batch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next >= self.count {
            return None;
        }
        let k = self.next;
        self.next += 1;
        let batch = match &self.source {
            Source::Inline { threads } => self.plan.read(k, *threads),
            Source::Workers { queues, .. } => {
                let worker = k % queues.len();
                queues[worker].recv().unwrap_or(Err(Error::LoaderWorker { worker, batch: k }))
            }
        };
        self.failed = batch.is_err();
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.failed { 0 } else { self.count - self.next };
        (0, Some(left))
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        if let Source::Workers { queues, handles, stop } = &mut self.source {
            stop.store(true, Ordering::Relaxed);
            // Closing the queues wakes any worker blocked on a full one.
            queues.clear();
            for handle in handles.drain(..) {
                // A worker that panicked has already been reported as a closed queue.
                let _ = handle.join();
            }
        }
    }
}
