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

/// The 20 channels of the tutorial's ERA5 extract, in file order (FourCastNet's convention).
/// The tutorial names two of them: channel 0 (u10, its RMSE metric) and 2 (t2m, its plots).
pub const CHANNEL_NAMES: [&str; 20] = [
    "u10", "v10", "t2m", "sp", "msl", "t850", "u1000", "v1000", "z1000", "u850", "v850", "z850", "u500", "v500", "z500", "t500", "z50",
    "r500", "r850", "tcwv",
];
