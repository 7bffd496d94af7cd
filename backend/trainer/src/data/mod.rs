//! The tutorial's data pipeline: ERA5-format HDF5 years ([`Era5Dataset`]), per-channel
//! normalisation ([`Stats`]), data-parallel sharding ([`ShardedSampler`]) and batching with
//! prefetching worker threads ([`DataLoader`]); plus a generator of synthetic data in the same
//! format ([`synth`]), since the real ERA5 extract is not downloadable everywhere.

mod dataset;
mod direct;
mod loader;
pub mod npy;
mod rng;
mod sampler;
mod stats;
pub mod synth;

pub use dataset::{Era5Dataset, FIELDS, Sample};
pub use loader::{Batch, DataLoader, Epoch, PREFETCH_PER_WORKER};
pub use sampler::ShardedSampler;
pub use stats::Stats;
