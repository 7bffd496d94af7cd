//! The data pipeline against the tutorial's rules: the generator's on-disk format, the
//! dataset's index rule and normalisation, the sampler's sharding, the loader's batches, and
//! a clear error for every kind of unusable data.

mod common;
mod dataset;
mod errors;
mod generator;
mod loader;
