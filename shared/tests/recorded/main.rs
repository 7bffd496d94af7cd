//! The recorded GPU runs the chapters open (`static/recorded/`): what each shows
//! ([`runs`]), and every figure a chapter quotes from one, read off it ([`figures`]).

mod figures;
mod runs;
#[path = "../support/links.rs"]
mod support;

use std::io::Read;
use std::path::PathBuf;

use scalebook_shared::profile::trace::{LaneKind, Timeline, Trace};
use scalebook_shared::profile::{ranges, recorded, trace_file};

const RECORDINGS: [&str; 7] = [
    "h200-short-0workers",
    "h200-short-8workers",
    "h200-short_opt",
    "h200-short_opt-fed",
    "h200-dp2-nccl",
    "h200-short-serial-0workers",
    "h200-short-serial-8workers",
];

/// The project's root.
fn root() -> PathBuf {
    PathBuf::from(format!("{}/..", std::env::var("CARGO_MANIFEST_DIR").unwrap()))
}

fn dir(name: &str) -> PathBuf {
    root().join("static").join(recorded::DIR).join(name)
}

fn timeline(name: &str) -> Timeline {
    let file = std::fs::File::open(dir(name).join(format!("{}.gz", trace_file(0)))).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).unwrap();
    Timeline::new([(0, Trace::parse(&text).unwrap())])
}

/// Spans of a lane as (name, start, end).
type Spans = Vec<(String, f64, f64)>;

/// Each CUDA stream's lane (Kineto labels the device's process `GPU 0`, and names each
/// stream's thread `stream N`) as its label and its spans (name, start, end), in time order.
fn streams(timeline: &Timeline) -> Vec<(String, Spans)> {
    let lanes = timeline.lanes().iter().filter(|l| l.kind == LaneKind::Thread && l.label.starts_with("GPU 0 · stream"));
    lanes
        .map(|lane| {
            let mut spans: Vec<_> =
                lane.rows.iter().flat_map(|row| row.spans()).map(|s| (timeline.name(s.name).to_owned(), s.start, s.end)).collect();
            spans.sort_by(|a, b| a.1.total_cmp(&b.1));
            (lane.label.clone(), spans)
        })
        .collect()
}

/// The compute stream: the one that runs the most kernels.
fn stream(timeline: &Timeline) -> Spans {
    streams(timeline).into_iter().map(|(_, spans)| spans).max_by_key(Vec::len).expect("a CUDA stream lane")
}

/// The spans of range `name` on the CPU (the trainer's named ranges).
fn ranges_named(timeline: &Timeline, name: &str) -> Vec<(f64, f64)> {
    let lane = timeline.lanes().iter().find(|l| l.kind == LaneKind::Ranges).expect("a ranges lane");
    lane.rows.iter().flat_map(|r| r.spans()).filter(|s| timeline.name(s.name) == name).map(|s| (s.start, s.end)).collect()
}

/// Each step's backward pass as the GPU ran it: from the end of the step's forward range on a
/// CUDA stream (Kineto's copy there of the trainer's range) to the start of its optimizer
/// range. The host's own backward range ends when it has queued the work, long before.
fn gpu_backwards(timeline: &Timeline) -> Vec<(f64, f64)> {
    let spans: Spans = streams(timeline).into_iter().flat_map(|(_, spans)| spans).collect();
    let starts = |range: &'static str| spans.iter().filter(move |(name, ..)| name == range).map(|s| (s.1, s.2));
    starts(ranges::FORWARD)
        .filter_map(|(_, forward_end)| {
            let optimizer = starts(ranges::OPTIMIZER).map(|s| s.0).filter(|start| *start >= forward_end).reduce(f64::min)?;
            Some((forward_end, optimizer))
        })
        .collect()
}
