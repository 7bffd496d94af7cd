//! Every scalar goes to both `metrics.jsonl` (what the server streams) and the TensorBoard
//! event file (what TensorBoard users open), under the same tag and step.

use std::path::Path;

use scalebook_shared::rundir;

use crate::Error;
use crate::output::{EventWriter, MetricsWriter};

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
