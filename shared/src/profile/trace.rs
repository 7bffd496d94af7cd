//! Step timelines: the ranks' Chrome-trace files (what libtorch's Kineto profiler writes, or
//! any other Chrome-trace JSON) turned into what the browser draws and tabulates.
//!
//! - [`Trace::parse`] reads one file leniently: the object form with `traceEvents` and the
//!   bare array form, complete (`X`) events and `B`/`E` pairs; every other event (instants,
//!   flows, counters) and every odd value is skipped, never an error, so a trace from a newer
//!   profiler still opens.
//! - [`Timeline::new`] puts the ranks on one clock and builds their lanes: per rank, the
//!   trainer's named ranges on top, then one lane per process and thread, each split into rows
//!   by nesting depth.
//! - [`OpsTable`] sums the ops by name (count, total, self time, mean).
//! - [`ProfileSummary`] is what the server tells of a run's profile without sending its traces:
//!   each rank's steps split by range, its top ops, its overlap, and the stragglers.
//! - [`ExcerptOf`] is the part of a trace a timeline window shows: the whole trace and the
//!   window each at the width drawn, what a column cannot show merged, read as a stream.
//! - [`Compact`] is a trace's events as read, 28 bytes each, written beside the trace by the
//!   pass that summarises it, so that windows are read without parsing the JSON again.
//! - [`bars`] is what a window of the timeline draws at a given width: events narrower than a
//!   pixel are merged into per-pixel bars, so a trace of 100k events stays a few thousand
//!   shapes however far it is zoomed out.
//! - [`Window`] is the visible span with zoom and pan, and [`format_micros`] labels durations.
//!
//! Times are microseconds, as in the files, counted from the first event of any rank.

mod bars;
mod bubble;
mod compact;
mod excerpt;
mod lenient;
mod ops;
mod plain;
mod read;
mod scan;
mod summary;
mod timeline;
mod value_end;
mod window;

pub use bars::{Bar, BarKind, bar_at, bars};
pub use bubble::{Bubble, Passes, bubbles};
pub use compact::{Compact, CompactWriter};
pub use excerpt::{EXCERPT_PIXELS, ExcerptOf, MAX_PIXELS};
pub use ops::{OpOrder, OpStat, OpsTable};
pub use read::Trace;
pub use summary::{MAX_STRAGGLERS, OpTotal, ProfileSummary, RangeTime, RankSummary, StepSplit, Straggler, TOP_OPS};
pub use timeline::{Lane, LaneKind, NameId, Row, Span, Timeline};
pub use window::{Window, format_micros, micros_ticks};

/// What the server answers for a run's profile (`api/runs/ID/profile`): its ranks' traces,
/// by rank; empty until the profiled steps are done.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceList {
    pub traces: Vec<RankTrace>,
}

/// One rank's trace file of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankTrace {
    pub rank: usize,
    /// Its size, so the browser can say how much it is loading.
    pub bytes: u64,
}

/// The category of the ranges a program marks itself (`record_function` in PyTorch, the
/// trainer's ranges here): drawn in each rank's ranges lane, not counted as ops.
pub const RANGE_CATEGORY: &str = "user_annotation";

/// Whether events of `category` are ranges, not ops: the program's own, and their copies on
/// a GPU's streams (`gpu_user_annotation`).
pub(crate) fn marks_a_range(category: &str) -> bool {
    category.ends_with(RANGE_CATEGORY)
}
