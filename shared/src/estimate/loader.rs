//! The data loader's part of a step: how long a rank's batch takes to read and prepare, by
//! whom, and how much of it the step waits for.
//!
//! One reader (the training loop, a worker, or a thread) spends on each sample its bytes over
//! the rate it prepares bytes already in host memory at (`loader.prepare_gb_per_s`: copying
//! them out of the file, normalising, collating, pinning), plus the bytes the page cache does
//! not hold over the file system's rate (`loader.storage_gb_per_s`). The page cache holds the
//! share of the training set that fits in the memory of the run's GPUs on one node
//! (`loader.page_cache_gb_per_gpu` each): all of `short`'s 512 samples (10.6 GB) from its
//! second epoch on, a twelfth of `base`'s 37,960 (787 GB) on one GPU's share of a node. Each
//! epoch shuffles the samples over the ranks again, so every node reads the whole set in time.
//!
//! Who reads, as the config says:
//! - `num_data_workers` W > 0: W readers, each preparing a whole batch beside the step; a
//!   batch is ready every read/W, and the step waits for max(0, read/W − its own time);
//! - 0 workers with `serial_read`: the training loop reads each batch one sample after
//!   another, as the tutorial's `DataLoader` does with `num_workers=0`, and the step waits for
//!   all of it;
//! - 0 workers otherwise: Scalebook's trainer shares the batch's samples over its compute
//!   threads (the Slurm script sets `OMP_NUM_THREADS` to the job's `cpus_per_task`), still
//!   inside the step: it waits for read/threads. Memory bandwidth caps that speed-up in
//!   practice; the estimate does not;
//! - `data_loader_config: dali`: no loader time, as before this term existed: DALI reads in
//!   threads of its own and copies each batch on a CUDA stream of its own, ahead of the step;
//!   the estimate counts only its device buffers (`dali_overhead_gb`).
//!
//! Not modelled: workers competing with each other and the step for cores and memory
//! bandwidth (why the tutorial's 16 workers ran slower than 4), and the first epoch, which
//! reads from the file system what later epochs find in memory.

use super::{FP32, GIB, Shape};
use crate::cluster::LoaderFactors;
use crate::config::DataLoaderKind;

/// Who reads a rank's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readers {
    /// `num_data_workers` workers, beside the step.
    Workers { count: u64 },
    /// The training loop, one sample after another (`serial_read`, 0 workers).
    Serial,
    /// The rank's compute threads, sharing each batch inside the step (0 workers).
    Threads { count: u64 },
}

impl Readers {
    /// How many read at once.
    pub const fn count(self) -> u64 {
        match self {
            Readers::Workers { count } | Readers::Threads { count } => count,
            Readers::Serial => 1,
        }
    }

    /// Whether the reading runs beside the step rather than inside it.
    pub const fn overlapped(self) -> bool {
        matches!(self, Readers::Workers { .. })
    }

    pub fn words(self) -> String {
        match self {
            Readers::Workers { count } => format!("{count} loader worker(s), beside the step"),
            Readers::Serial => "the training loop reads one sample after another: serial_read, 0 workers".into(),
            Readers::Threads { count } => format!("{count} compute thread(s) sharing each batch, inside the step"),
        }
    }
}

/// A rank's loader in one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Loader {
    pub factors: LoaderFactors,
    /// Bytes of one sample: its input and target fields, float32.
    pub sample_bytes: f64,
    /// Bytes of the training set: one field per sample (a sample's target is another's input).
    pub dataset_bytes: f64,
    /// The share of the training set the page cache holds.
    pub cached_share: f64,
    /// One reader's seconds per sample.
    pub seconds_per_sample: f64,
    pub readers: Readers,
    /// The seconds per step the loader needs: the batch's reading over its readers.
    pub seconds: f64,
}

/// The loader of one rank of `shape`, with `threads` compute threads per rank and
/// `gpus_per_node`; `None` where its time is not modelled (no loader factors, or DALI).
pub(super) fn loader(shape: &Shape, factors: Option<&LoaderFactors>, gpus_per_node: u64, threads: u64) -> Option<Loader> {
    let factors = *factors?;
    if shape.data_loader == DataLoaderKind::Dali {
        return None;
    }
    let sample_bytes = FP32 * (shape.in_pixels + shape.out_pixels) as f64;
    let dataset_bytes = FP32 * (shape.train_samples * shape.in_pixels.max(shape.out_pixels)) as f64;
    let ranks_on_a_node = (shape.tp * shape.cp * shape.dp).min(gpus_per_node.max(1));
    let cache_bytes = factors.page_cache_gb_per_gpu * GIB * ranks_on_a_node as f64;
    let cached_share = if dataset_bytes > 0.0 { (cache_bytes / dataset_bytes).min(1.0) } else { 1.0 };
    let seconds_per_sample =
        sample_bytes / (factors.prepare_gb_per_s * 1e9) + sample_bytes * (1.0 - cached_share) / (factors.storage_gb_per_s * 1e9);
    let readers = match (shape.loader_workers, shape.serial_read) {
        (0, true) => Readers::Serial,
        (0, false) => Readers::Threads { count: threads.max(1) },
        (count, _) => Readers::Workers { count },
    };
    let seconds = shape.local_batch as f64 * seconds_per_sample / readers.count() as f64;
    Some(Loader { factors, sample_bytes, dataset_bytes, cached_share, seconds_per_sample, readers, seconds })
}

/// The part of the loader's `seconds` a step of `compute_s` (everything else it does) waits
/// for: all of it when the reading is inside the step, what the step does not hide otherwise.
pub(super) fn exposed(loader: &Loader, compute_s: f64) -> f64 {
    if loader.readers.overlapped() { (loader.seconds - compute_s).max(0.0) } else { loader.seconds }
}

#[cfg(test)]
mod tests {
    use super::super::tests::shape;
    use super::*;

    const FACTORS: LoaderFactors = LoaderFactors { prepare_gb_per_s: 1.0, storage_gb_per_s: 0.5, page_cache_gb_per_gpu: 64.0 };

    #[test]
    fn bytes_cache_and_readers_follow_the_config() {
        // mp at tp 4: 16 ranks, local batch 16, 20 + 20 channels of 360 × 720, the whole set.
        let mut s = shape(1536, 4);
        let l = loader(&s, Some(&FACTORS), 4, 32).unwrap();
        assert_eq!(l.sample_bytes, 4.0 * 40.0 * 360.0 * 720.0);
        assert_eq!(l.dataset_bytes, 4.0 * 20.0 * 360.0 * 720.0 * 37_960.0);
        // Four ranks on a node share its 4 × 64 GiB.
        assert!((l.cached_share - 4.0 * 64.0 * GIB / l.dataset_bytes).abs() < 1e-12);
        let per_sample = l.sample_bytes / 1e9 + l.sample_bytes * (1.0 - l.cached_share) / 0.5e9;
        assert!((l.seconds_per_sample - per_sample).abs() < 1e-12);
        s.loader_workers = 8;
        let workers = loader(&s, Some(&FACTORS), 4, 32).unwrap();
        assert_eq!(workers.readers, Readers::Workers { count: 8 });
        assert!((workers.seconds - 16.0 * per_sample / 8.0).abs() < 1e-12);
        s.loader_workers = 0;
        assert_eq!(loader(&s, Some(&FACTORS), 4, 32).unwrap().readers, Readers::Threads { count: 32 });
        s.serial_read = true;
        let serial = loader(&s, Some(&FACTORS), 4, 32).unwrap();
        assert_eq!((serial.readers, serial.seconds), (Readers::Serial, 16.0 * per_sample));
        // A set that fits is read from memory alone.
        s.train_samples = 512;
        assert_eq!(loader(&s, Some(&FACTORS), 4, 32).unwrap().cached_share, 1.0);
    }

    #[test]
    fn dali_and_a_cluster_without_loader_factors_have_no_loader_time() {
        let mut s = shape(1536, 1);
        assert!(loader(&s, None, 4, 32).is_none());
        s.data_loader = DataLoaderKind::Dali;
        assert!(loader(&s, Some(&FACTORS), 4, 32).is_none());
    }

    #[test]
    fn workers_wait_only_for_what_the_step_does_not_hide() {
        let mut s = shape(1536, 1);
        s.loader_workers = 2;
        let l = loader(&s, Some(&FACTORS), 4, 32).unwrap();
        assert_eq!(exposed(&l, l.seconds + 1.0), 0.0);
        assert!((exposed(&l, l.seconds - 0.25) - 0.25).abs() < 1e-12);
        s.loader_workers = 0;
        s.serial_read = true;
        let serial = loader(&s, Some(&FACTORS), 4, 32).unwrap();
        assert_eq!(exposed(&serial, 100.0), serial.seconds, "inside the step, all of it");
    }
}
