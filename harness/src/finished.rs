//! A long finished run written straight into a runs directory, as a server finds one after a
//! restart: what the server's tests and its long-run benchmark stream to their viewers.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use scalebook_shared::layout::{Layout, Sizes};
use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::protocol::{ExecutorSpec, RunId, RunRecord, RunState};
use scalebook_shared::rundir;

/// The per-step tags a long run writes, seven a step as the trainer's do.
pub const STEP_TAGS: [&str; 7] = [
    "Step/Loss/train",
    "Step/Learning Rate",
    "Step/Samples per sec",
    "Step time/data wait",
    "Step time/forward",
    "Step time/backward",
    "Step time/optimizer",
];

/// Writes completed run `id` of `steps` steps (each with every one of [`STEP_TAGS`]) into
/// `runs`; returns the number of lines of its metrics.
pub fn write_finished_run(runs: &Path, id: &RunId, steps: u64) -> io::Result<u64> {
    let dir = runs.join(id.as_str());
    std::fs::create_dir_all(&dir)?;
    let layout = Layout::new(Sizes::default(), "tp-cp-dp").map_err(io::Error::other)?;
    let mut record = RunRecord::new(id.clone(), "cpu_tiny".into(), layout, ExecutorSpec::Local, 1.7e9, RunState::Running);
    record.transition(RunState::Completed, 1.7e9 + steps as f64 * 2.6, None);
    std::fs::write(dir.join(rundir::RECORD), serde_json::to_vec(&record)?)?;
    let mut metrics = BufWriter::new(std::fs::File::create(dir.join(rundir::METRICS))?);
    for step in 0..steps {
        for (i, tag) in STEP_TAGS.iter().enumerate() {
            let value = 1.0 / (1.0 + step as f64 + i as f64);
            let point = MetricPoint { step, epoch: 1 + step / 1000, wall: 1.7e9 + step as f64 * 2.6, tag: (*tag).into(), value };
            serde_json::to_writer(&mut metrics, &point)?;
            metrics.write_all(b"\n")?;
        }
    }
    metrics.flush()?;
    Ok(steps * STEP_TAGS.len() as u64)
}
