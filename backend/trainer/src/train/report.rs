//! Every scalar goes to both `metrics.jsonl` (what the server streams) and the TensorBoard
//! event file (what TensorBoard users open), under the same tag and step.

use std::path::Path;

use crate::Error;
use crate::output::{EventWriter, MetricsWriter};

pub struct Reporter {
    metrics: MetricsWriter,
    events: EventWriter,
}

impl Reporter {
    /// `resumed_at` is the step of the checkpoint a resumed run continues from.
    pub fn open(run_dir: &Path, resumed_at: Option<u64>) -> Result<Reporter, Error> {
        Ok(Reporter {
            metrics: MetricsWriter::open(&run_dir.join("metrics.jsonl"), resumed_at)?,
            events: EventWriter::create(&run_dir.join("logs"))?,
        })
    }

    pub fn scalar(&mut self, step: u64, epoch: u64, tag: &str, value: f64) -> Result<(), Error> {
        self.metrics.write(step, epoch, tag, value)?;
        self.events.scalar(tag, step, value as f32)
    }

    pub fn flush(&mut self) -> Result<(), Error> {
        self.events.flush()
    }
}
