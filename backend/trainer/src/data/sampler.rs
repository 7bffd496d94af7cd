//! Which samples one data-parallel rank reads in one epoch: PyTorch's `DistributedSampler`
//! semantics, which the tutorial relies on. Every shard gets the same number of samples (the
//! permutation is padded by repeating its start), shards take a strided pick
//! `indices[shard_id::num_shards]`, and the permutation changes with the epoch but is the same
//! on every rank, so shards never overlap within an epoch. The shuffle uses this crate's own
//! generator: the order is reproducible, though not equal to `torch.randperm`'s.

use super::rng::Rng;
use crate::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedSampler {
    len: usize,
    num_shards: usize,
    shard_id: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
}

impl ShardedSampler {
    /// Pads rather than drops, PyTorch's default. `shuffle` and `seed` as in
    /// `DistributedSampler(shuffle=..., seed=...)`; the tutorial shuffles training data, and
    /// validation data too when not distributed.
    pub fn new(len: usize, num_shards: usize, shard_id: usize, shuffle: bool, seed: u64) -> Result<ShardedSampler, Error> {
        if num_shards == 0 || shard_id >= num_shards {
            return Err(Error::DataSetting(format!("data shard {shard_id} does not exist among {num_shards} shards")));
        }
        Ok(ShardedSampler { len, num_shards, shard_id, shuffle, seed, drop_last: false })
    }

    /// Drop the tail instead of padding, so that no sample is seen twice in an epoch.
    #[must_use]
    pub fn with_drop_last(self, drop_last: bool) -> ShardedSampler {
        ShardedSampler { drop_last, ..self }
    }

    /// The dataset length the sampler draws from.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn num_shards(&self) -> usize {
        self.num_shards
    }

    pub fn shard_id(&self) -> usize {
        self.shard_id
    }

    /// Samples this shard gets per epoch: `ceil(len / num_shards)`, or
    /// `floor(len / num_shards)` when dropping the tail.
    pub fn num_samples(&self) -> usize {
        if self.drop_last { self.len / self.num_shards } else { self.len.div_ceil(self.num_shards) }
    }

    /// This shard's sample indices for `epoch`, in reading order.
    pub fn indices(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.len).collect();
        if self.shuffle {
            Rng::stream(self.seed, &[epoch]).shuffle(&mut order);
        }
        let total = self.num_samples() * self.num_shards;
        if order.is_empty() {
            return order;
        }
        // Padding repeats the permutation from its start as often as needed (only when the
        // dataset is smaller than the shard count does it wrap more than once).
        let padded = order.iter().copied().cycle().take(total);
        padded.skip(self.shard_id).step_by(self.num_shards).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_pytorch() {
        let count = |len, shards, drop_last| ShardedSampler::new(len, shards, 0, true, 0).unwrap().with_drop_last(drop_last).num_samples();
        assert_eq!(count(10, 4, false), 3);
        assert_eq!(count(10, 4, true), 2);
        assert_eq!(count(8, 4, false), 2);
        assert_eq!(count(8, 4, true), 2);
        assert_eq!(count(3, 4, false), 1);
        assert_eq!(count(3, 4, true), 0);
        assert_eq!(count(0, 2, false), 0);
    }

    /// The trainer takes its epoch length from `shared` (what the browser shows); the loader
    /// must step exactly that many batches.
    #[test]
    fn batches_per_epoch_are_what_shared_derives() {
        for (len, shards, batch) in [(37_960, 1, 16), (37_960, 4, 16), (10, 4, 2), (7, 3, 1), (1_000, 8, 64), (5, 8, 1)] {
            let batches = ShardedSampler::new(len, shards, shards - 1, true, 0).unwrap().num_samples() / batch;
            assert_eq!(
                batches,
                scalebook_shared::config::iters_per_epoch(len, shards, batch),
                "{len} samples, {shards} shards, batch {batch}"
            );
        }
    }

    #[test]
    fn rejects_shards_that_do_not_exist() {
        assert!(ShardedSampler::new(10, 0, 0, true, 0).is_err());
        let err = ShardedSampler::new(10, 2, 2, true, 0).unwrap_err();
        assert!(err.is_user_input());
        assert!(err.to_string().contains("shard 2"), "{err}");
    }

    #[test]
    fn small_datasets_wrap_around_more_than_once() {
        // 2 samples over 5 shards: the padded order is the permutation repeated.
        let shards: Vec<Vec<usize>> = (0..5).map(|id| ShardedSampler::new(2, 5, id, false, 0).unwrap().indices(0)).collect();
        assert_eq!(shards, vec![vec![0], vec![1], vec![0], vec![1], vec![0]]);
    }

    #[test]
    fn empty_dataset_gives_no_indices() {
        assert!(ShardedSampler::new(0, 3, 1, true, 0).unwrap().indices(4).is_empty());
    }
}
