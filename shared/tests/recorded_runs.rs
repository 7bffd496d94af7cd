//! The recorded GPU runs the chapters open (`static/recorded/`): each says where it was
//! measured and loads as a timeline with the step's ranges and a CUDA stream, and the 0-worker
//! one shows what the profiling and data-loading chapters point at: the batch's host-to-device
//! copy in the compute stream, before the forward pass's first kernel.

use std::io::Read;
use std::path::PathBuf;

use scalebook_shared::profile::recorded::{self, Recording};
use scalebook_shared::profile::trace::{LaneKind, Timeline, Trace};
use scalebook_shared::profile::{ranges, trace_file};

const RECORDINGS: [&str; 3] = ["h200-short-0workers", "h200-short-8workers", "h200-short_opt"];

fn dir(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../static")).join(recorded::DIR).join(name)
}

fn timeline(name: &str) -> Timeline {
    let file = std::fs::File::open(dir(name).join(format!("{}.gz", trace_file(0)))).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).unwrap();
    Timeline::new([(0, Trace::parse(&text).unwrap())])
}

/// The spans of the GPU's stream lane (Kineto labels the device's process `GPU 0`, and names
/// each stream's thread `stream N`), as (name, start, end).
fn stream(timeline: &Timeline) -> Vec<(String, f64, f64)> {
    let lane =
        timeline.lanes().iter().find(|l| l.kind == LaneKind::Thread && l.label.starts_with("GPU 0 · stream")).expect("a CUDA stream lane");
    let mut spans: Vec<_> =
        lane.rows.iter().flat_map(|row| row.spans()).map(|s| (timeline.name(s.name).to_owned(), s.start, s.end)).collect();
    spans.sort_by(|a, b| a.1.total_cmp(&b.1));
    spans
}

#[test]
fn every_recording_says_where_it_ran_and_draws_its_steps_on_a_gpu_stream() {
    for name in RECORDINGS {
        let about: Recording = serde_json::from_str(&std::fs::read_to_string(dir(name).join(recorded::ABOUT_FILE)).unwrap()).unwrap();
        assert!(about.gpu.starts_with("NVIDIA") && about.measured_by == "Scalebook", "{name}: {about:?}");
        let timeline = timeline(name);
        for range in ranges::STEP {
            assert!(timeline.range_names(0).contains(&range), "{name}: no {range} range");
        }
        assert!(stream(&timeline).len() > 1000, "{name}: the stream lane holds few kernels");
    }
}

#[test]
fn without_workers_the_batch_is_copied_in_the_compute_stream_before_the_forward_kernels() {
    let timeline = timeline("h200-short-0workers");
    let ranges_lane = timeline.lanes().iter().find(|l| l.kind == LaneKind::Ranges).unwrap();
    let forward = ranges_lane.rows.iter().flat_map(|r| r.spans()).find(|s| timeline.name(s.name) == ranges::FORWARD).unwrap();
    let spans = stream(&timeline);
    let first_forward_kernel = spans.iter().find(|(name, start, _)| *start >= forward.start && !name.starts_with("Memcpy")).unwrap();
    let copies: Vec<_> = spans.iter().filter(|(name, _, end)| name.starts_with("Memcpy HtoD") && *end <= first_forward_kernel.1).collect();
    // The input and the target of the first profiled step, each one 331,776,000-byte batch.
    assert!(copies.len() >= 2, "host-to-device copies before the first forward kernel: {copies:?}");
}
