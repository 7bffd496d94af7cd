//! The sampler's sharding and the loader's batches: the same with any number of workers,
//! resumable mid-epoch, and stopped cleanly.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use scalebook_trainer::data::{Batch, DataLoader, Era5Dataset, ShardedSampler};

use crate::common::{file_stats, generate, labelled_years, raw_stats, small, temp_dir};

/// Tests that start loader workers run one at a time, so that counting worker threads sees
/// only their own.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn to_vec(tensor: &tch::Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(tensor.reshape([-1])).unwrap()
}

fn batches(loader: &DataLoader, epoch: u64) -> Vec<(Vec<usize>, Vec<f32>, Vec<f32>)> {
    loader
        .epoch(epoch)
        .map(|batch| {
            let Batch { input, target, indices } = batch.unwrap();
            (indices, to_vec(&input), to_vec(&target))
        })
        .collect()
}

/// The worker-thread count once it equals `expected`, or what it is after a generous deadline:
/// a joined thread can stay listed in /proc for a moment after `join` returns, and starting
/// threads take a moment to appear.
fn worker_threads_reaching(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let n = worker_threads();
        if n == expected || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn worker_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("data-worker"))
        .count()
}

#[test]
fn shards_partition_the_padded_permutation() {
    let (len, shards) = (10, 3);
    let picks: Vec<Vec<usize>> = (0..shards).map(|id| ShardedSampler::new(len, shards, id, true, 5).unwrap().indices(2)).collect();
    assert!(picks.iter().all(|pick| pick.len() == 4), "ceil(10 / 3) each");
    // Undo the strided pick: padded[k] = shard (k mod 3), position k / 3.
    let padded: Vec<usize> = (0..12).map(|k| picks[k % shards][k / shards]).collect();
    let mut permutation = padded[..len].to_vec();
    assert_ne!(permutation, (0..len).collect::<Vec<_>>(), "shuffled");
    permutation.sort_unstable();
    assert_eq!(permutation, (0..len).collect::<Vec<_>>());
    assert_eq!(padded[len..], padded[..2], "padding repeats the start");
}

#[test]
fn unshuffled_shards_are_strided() {
    let pick = |id| ShardedSampler::new(10, 3, id, false, 0).unwrap().indices(0);
    assert_eq!(pick(0), vec![0, 3, 6, 9]);
    assert_eq!(pick(1), vec![1, 4, 7, 0]);
    assert_eq!(pick(2), vec![2, 5, 8, 1]);
}

#[test]
fn dropping_the_tail_never_repeats_a_sample() {
    let mut all: Vec<usize> =
        (0..3).flat_map(|id| ShardedSampler::new(10, 3, id, true, 1).unwrap().with_drop_last(true).indices(0)).collect();
    assert_eq!(all.len(), 9);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 9);
}

#[test]
fn order_depends_on_seed_and_epoch_only() {
    let order = |seed, epoch| ShardedSampler::new(100, 2, 1, true, seed).unwrap().indices(epoch);
    assert_eq!(order(3, 4), order(3, 4));
    assert_ne!(order(3, 4), order(3, 5));
    assert_ne!(order(3, 4), order(4, 4));
}

fn synthetic_train(dir: &Path) -> Arc<Era5Dataset> {
    generate(dir, &small(2, 12, 8, 16));
    Arc::new(Era5Dataset::open(&dir.join("train"), [6, 12], 20, 1, None, file_stats(dir)).unwrap())
}

#[test]
fn workers_and_the_serial_read_deliver_the_same_batches_as_inline_reading() {
    let _serial = serial();
    let dir = temp_dir("workers");
    let dataset = synthetic_train(dir.path());
    let loader = |workers| {
        let sampler = ShardedSampler::new(dataset.len(), 2, 1, true, 9).unwrap();
        DataLoader::new(Arc::clone(&dataset), sampler, 3, workers).unwrap()
    };
    let inline = loader(0);
    assert_eq!(inline.len(), 4, "floor(ceil(24 / 2) / 3)");
    let expected = batches(&inline, 1);
    assert_eq!(expected.len(), 4);
    let sampler_order: Vec<usize> = expected.iter().flat_map(|(indices, _, _)| indices.clone()).collect();
    assert_eq!(sampler_order, inline.sampler().indices(1)[..12]);
    for (indices, input, target) in &expected {
        let first = dataset.get(indices[0]).unwrap();
        assert_eq!(input[..first.input.len()], first.input[..]);
        assert_eq!(target[..first.target.len()], first.target[..]);
    }
    for workers in [1, 3] {
        assert_eq!(batches(&loader(workers), 1), expected, "{workers} workers");
    }
    // The tutorial's serial read: the same batches, read one sample after another.
    assert_eq!(batches(&loader(0).serial(true), 1), expected, "serial read");
    assert_ne!(batches(&inline, 2), expected, "another epoch, another order");

    let batch = inline.epoch(0).next().unwrap().unwrap();
    assert_eq!(batch.input.size(), vec![3, 20, 6, 12]);
    assert_eq!(batch.input.kind(), tch::Kind::Float);
    assert_eq!(batch.target.size(), vec![3, 20, 6, 12]);
}

#[test]
fn dropping_an_epoch_early_stops_its_workers() {
    let _serial = serial();
    let dir = temp_dir("drop");
    let dataset = synthetic_train(dir.path());
    let sampler = ShardedSampler::new(dataset.len(), 1, 0, true, 0).unwrap();
    let loader = DataLoader::new(dataset, sampler, 1, 3).unwrap();
    assert_eq!(worker_threads_reaching(0), 0);
    let mut epoch = loader.epoch(0);
    epoch.next().unwrap().unwrap();
    assert_eq!(worker_threads_reaching(3), 3);
    drop(epoch);
    assert_eq!(worker_threads_reaching(0), 0);
    let unstarted = loader.epoch(1);
    drop(unstarted);
    assert_eq!(worker_threads_reaching(0), 0);
}

/// A year file of 40 steps whose steps in `corrupt` cannot be decompressed; it opens and
/// passes every check, since those read no data.
fn corrupt_year(path: &Path, corrupt: std::ops::Range<usize>) {
    let data = ndarray::Array4::from_shape_fn((40, 20, 8, 8), |(t, ..)| t as f32);
    let file = hdf5::File::create(path).unwrap();
    let fields = file.new_dataset_builder().with_data(&data).chunk((1, 20, 8, 8)).deflate(1).create("fields").unwrap();
    let addresses: Vec<u64> = corrupt.map(|k| fields.chunk_info(k).unwrap().addr).collect();
    drop(fields);
    file.close().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    for address in addresses {
        bytes[address as usize..address as usize + 8].fill(0xff);
    }
    std::fs::write(path, bytes).unwrap();
}

/// An unshuffled loader of batches of 4 over one corrupt year.
fn corrupt_loader(dir: &Path, corrupt: std::ops::Range<usize>, workers: usize) -> DataLoader {
    corrupt_year(&dir.join("1990.h5"), corrupt);
    let dataset = Era5Dataset::open(dir, [8, 8], 20, 1, None, raw_stats(20)).unwrap();
    let sampler = ShardedSampler::new(dataset.len(), 1, 0, false, 0).unwrap();
    DataLoader::new(Arc::new(dataset), sampler, 4, workers).unwrap()
}

#[test]
fn a_failed_read_ends_the_epoch_with_its_error() {
    let _serial = serial();
    for workers in [0, 2] {
        let dir = temp_dir("corrupt-end");
        let loader = corrupt_loader(dir.path(), 20..40, workers);
        let results: Vec<_> = loader.epoch(0).collect();
        // Batches 0 to 3 read steps up to 16; batch 4 needs step 20.
        assert_eq!(results.len(), 5, "{workers} workers: the epoch stops at the error");
        assert!(results[..4].iter().all(Result::is_ok));
        let err = results[4].as_ref().unwrap_err();
        assert!(err.is_user_input() && err.to_string().contains("1990.h5"), "{err}");
    }
}

#[test]
fn loader_rejects_unusable_settings() {
    let dir = temp_dir("settings");
    labelled_years(dir.path());
    let dataset = Arc::new(Era5Dataset::open(dir.path(), [2, 3], 20, 1, None, raw_stats(20)).unwrap());
    let sampler = ShardedSampler::new(dataset.len(), 1, 0, true, 0).unwrap();
    assert!(DataLoader::new(Arc::clone(&dataset), sampler, 0, 0).is_err());
    let other = ShardedSampler::new(dataset.len() + 1, 1, 0, true, 0).unwrap();
    assert!(DataLoader::new(dataset, other, 4, 0).is_err());
}
