//! The arithmetic behind the notebook's line charts, kept out of the browser code so it is
//! tested natively: TensorBoard's smoothing, the x axes (step, relative time, wall time),
//! linear and logarithmic scales with readable ticks, folding a long series into one
//! min/max/last column per pixel, the tutorial's baseline curve, and CSV export.
//!
//! A series is a list of [`Bucket`]s (the shape the server sends history in); a live point is
//! a bucket of one. Charts read a bucket's `last` value as its value and its `min`/`max` as
//! the spread the bucket stands for, so spikes folded into a bucket stay visible.

mod axis;
mod baseline;
mod export;
mod per_pixel;
mod scale;
mod smoothing;
mod ticks;

pub use axis::{XAxis, format_clock, format_duration};
pub use baseline::{BASELINE_COLUMNS, baseline_event_file, parse_baseline, parse_baseline_events};
pub use export::{CSV_HEADER, CsvSeries, to_csv};
pub use per_pixel::{Sample, per_pixel, samples};
pub use scale::Scale;
pub use smoothing::{DEFAULT_SMOOTHING, MAX_SMOOTHING, smooth};
pub use ticks::{format_number, format_tick, linear_ticks, log_ticks, time_ticks};

pub use crate::metrics::Bucket;
