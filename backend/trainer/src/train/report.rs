//! Every scalar goes to both `metrics.jsonl` (what the server streams) and the TensorBoard
//! event file (what TensorBoard users open), under the same tag and step. What a step and an
//! epoch report is written by one table each, from field to tag: a new per-step metric is a
//! field of [`StepReport`] and a line of its table.

use std::path::Path;

use scalebook_shared::metrics::tags;
use scalebook_shared::rundir;

use super::StepTimes;

use crate::Error;
use crate::output::{EventWriter, MetricsWriter};

/// What one step measured.
pub struct StepReport {
    /// Seconds waiting for the batch.
    pub data_wait: f64,
    pub samples_per_sec: f64,
    /// What the step trained (none when the benchy trial only reads data).
    pub trained: Option<StepTrained>,
}

/// What a training step adds to its report.
pub struct StepTrained {
    pub loss: f64,
    pub lr: f64,
    pub times: StepTimes,
}

impl StepReport {
    /// Tag by tag, in the order they are written.
    fn scalars(&self) -> Vec<(&'static str, f64)> {
        match &self.trained {
            Some(t) => vec![
                (tags::step::LOSS_TRAIN, t.loss),
                (tags::step::LEARNING_RATE, t.lr),
                (tags::step::SAMPLES_PER_SEC, self.samples_per_sec),
                (tags::step::DATA_WAIT, self.data_wait),
                (tags::step::FORWARD, t.times.forward),
                (tags::step::BACKWARD, t.times.backward),
                (tags::step::OPTIMIZER, t.times.optimizer),
            ],
            None => vec![(tags::step::DATA_WAIT, self.data_wait), (tags::step::SAMPLES_PER_SEC, self.samples_per_sec)],
        }
    }
}

/// What one epoch measured.
pub struct EpochReport {
    pub iters_per_sec: f64,
    pub samples_per_sec: f64,
    /// The epoch's mean training loss and its last learning rate (none when it trained nothing).
    pub trained: Option<(f64, f64)>,
}

impl EpochReport {
    /// Tag by tag, in the order they are written.
    fn scalars(&self) -> Vec<(&'static str, f64)> {
        let speed = [(tags::ITERS_PER_SEC, self.iters_per_sec), (tags::SAMPLES_PER_SEC, self.samples_per_sec)];
        match self.trained {
            Some((loss, lr)) => [(tags::LOSS_TRAIN, loss), (tags::LEARNING_RATE, lr)].into_iter().chain(speed).collect(),
            None => speed.to_vec(),
        }
    }
}

/// What a validation pass measured.
pub struct ValidReport {
    pub loss: f64,
    pub rmse_u10: f64,
}

/// Only rank 0 writes; on the other ranks a reporter is silent.
pub struct Reporter {
    writers: Option<(MetricsWriter, EventWriter)>,
}

impl Reporter {
    /// `resumed_at` is the step of the checkpoint a resumed run continues from.
    pub fn open(run_dir: &Path, resumed_at: Option<u64>) -> Result<Reporter, Error> {
        let metrics = MetricsWriter::open(&run_dir.join(rundir::METRICS), resumed_at)?;
        let events = EventWriter::create(&run_dir.join(rundir::EVENTS_DIR))?;
        Ok(Reporter { writers: Some((metrics, events)) })
    }

    pub fn silent() -> Reporter {
        Reporter { writers: None }
    }

    pub fn scalar(&mut self, step: u64, epoch: u64, tag: &str, value: f64) -> Result<(), Error> {
        match &mut self.writers {
            Some((metrics, events)) => {
                metrics.write(step, epoch, tag, value)?;
                events.scalar(tag, step, value as f32)
            }
            None => Ok(()),
        }
    }

    /// Step `step` of epoch `epoch`.
    pub fn step(&mut self, step: u64, epoch: u64, report: &StepReport) -> Result<(), Error> {
        self.scalars(step, epoch, report.scalars())
    }

    /// Epoch `epoch`, ending at step `step`.
    pub fn epoch(&mut self, step: u64, epoch: u64, report: &EpochReport) -> Result<(), Error> {
        self.scalars(step, epoch, report.scalars())
    }

    /// A validation pass after step `step` (at step 0: before training).
    pub fn valid(&mut self, step: u64, epoch: u64, report: &ValidReport) -> Result<(), Error> {
        self.scalars(step, epoch, vec![(tags::LOSS_VALID, report.loss), (tags::RMSE_U10M_VALID, report.rmse_u10)])
    }

    fn scalars(&mut self, step: u64, epoch: u64, scalars: Vec<(&'static str, f64)>) -> Result<(), Error> {
        scalars.into_iter().try_for_each(|(tag, value)| self.scalar(step, epoch, tag, value))
    }

    /// Whether this reporter writes (rank 0's does).
    pub fn writes(&self) -> bool {
        self.writers.is_some()
    }

    /// An image for TensorBoard (only the event file has images).
    pub fn image(&mut self, step: u64, tag: &str, png: &[u8], height: u32, width: u32) -> Result<(), Error> {
        match &mut self.writers {
            Some((_, events)) => events.image(tag, step, png, height, width),
            None => Ok(()),
        }
    }

    pub fn flush(&mut self) -> Result<(), Error> {
        match &mut self.writers {
            Some((_, events)) => events.flush(),
            None => Ok(()),
        }
    }
}
