//! Throughput measurements behind `scalebook-train bench`: training samples/s of a config
//! (model, loss, backward and Adam on synthetic batches, so no data loading is timed), and
//! data-loader samples/s alone (no model) for a number of worker threads.

use std::time::Instant;

use scalebook_shared::config::TrainConfig;
use tch::{Device, Kind, Tensor};

use crate::Error;
use crate::data::{Batch, DataLoader};
use crate::train::Learner;

/// Samples per second over `steps` training steps at the config's global batch size, after
/// `warmup` steps that are not timed (allocator and kernel selection warm-up).
pub fn training(config: &TrainConfig, device: Device, warmup: usize, steps: usize) -> Result<f64, Error> {
    let (_vs, mut learner) = Learner::build(config, device, None)?;
    let [h, w] = config.img_size.map(|v| v as i64);
    let shape = [config.global_batch_size as i64, config.n_in_channels as i64, h, w];
    let batch = Batch {
        input: Tensor::randn(shape, (Kind::Float, device)),
        target: Tensor::randn(shape, (Kind::Float, device)),
        indices: Vec::new(),
    };
    for _ in 0..warmup {
        learner.train_step(&batch, config.lr)?;
    }
    let start = Instant::now();
    for _ in 0..steps {
        learner.train_step(&batch, config.lr)?;
    }
    Ok((steps * config.global_batch_size) as f64 / start.elapsed().as_secs_f64())
}

/// Samples per second of reading, normalising and batching `batches` batches of epoch 1,
/// after the same batches of epoch 0 were read untimed (the page cache warmed, as the
/// reference measurement does with its first pass).
pub fn data_loading(loader: &DataLoader, batches: usize) -> Result<f64, Error> {
    for batch in loader.epoch(0).take(batches) {
        batch?;
    }
    let start = Instant::now();
    let mut samples = 0;
    for batch in loader.epoch(1).take(batches) {
        samples += batch?.indices.len();
    }
    Ok(samples as f64 / start.elapsed().as_secs_f64())
}
