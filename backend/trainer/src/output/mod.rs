//! What a run leaves in its directory: the tutorial's log lines (`out.log`), `metrics.jsonl`
//! (one point a line, flushed as written, what the server tails), TensorBoard event files
//! (`logs/`), and the checkpoints.

mod log;
mod metrics;
mod tfevents;

pub use log::{Logger, py_float, timestamp};
pub use metrics::MetricsWriter;
pub use tfevents::EventWriter;
