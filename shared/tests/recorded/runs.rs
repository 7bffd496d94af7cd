//! The recorded GPU runs the chapters open (`static/recorded/`): each says where it was
//! measured and loads as a timeline with the step's ranges and a CUDA stream, and each shows
//! what the chapters point at in it: the 0-worker run's host-to-device copy of the batch in the
//! compute stream before the forward pass's first kernel, the fed `short_opt` run's copies on a
//! stream of their own, the dp = 2 run's NCCL all-reduce kernels during backward, and the
//! serial read's wait for every batch that 8 workers take away.

use std::io::Read;
use std::path::PathBuf;

use scalebook_shared::profile::recorded::{self, Recording};
use scalebook_shared::profile::trace::{LaneKind, Timeline, Trace};
use scalebook_shared::profile::{ranges, trace_file};

const RECORDINGS: [&str; 7] = [
    "h200-short-0workers",
    "h200-short-8workers",
    "h200-short_opt",
    "h200-short_opt-fed",
    "h200-dp2-nccl",
    "h200-short-serial-0workers",
    "h200-short-serial-8workers",
];

fn dir(name: &str) -> PathBuf {
    PathBuf::from(format!("{}/../static", std::env::var("CARGO_MANIFEST_DIR").unwrap())).join(recorded::DIR).join(name)
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
    let (forward_start, _) = ranges_named(&timeline, ranges::FORWARD)[0];
    let spans = stream(&timeline);
    let first_forward_kernel = spans.iter().find(|(name, start, _)| *start >= forward_start && !name.starts_with("Memcpy")).unwrap();
    let copies: Vec<_> = spans.iter().filter(|(name, _, end)| name.starts_with("Memcpy HtoD") && *end <= first_forward_kernel.1).collect();
    // The input and the target of the first profiled step, each one 331,776,000-byte batch.
    assert!(copies.len() >= 2, "host-to-device copies before the first forward kernel: {copies:?}");
}

#[test]
fn the_fed_run_copies_its_batches_on_a_stream_of_their_own() {
    let timeline = timeline("h200-short_opt-fed");
    let streams = streams(&timeline);
    let compute = stream(&timeline);
    assert!(!compute.iter().any(|(name, ..)| name.starts_with("Memcpy HtoD")), "a batch copied in the compute stream");
    let copies: Vec<&String> = streams
        .iter()
        .filter(|(_, spans)| spans.iter().any(|(name, ..)| name.starts_with("Memcpy HtoD")))
        .map(|(label, _)| label)
        .collect();
    assert_eq!(copies.len(), 1, "one copy stream: {copies:?}");
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

#[test]
fn the_data_parallel_runs_nccl_all_reduces_run_during_backward_on_their_own_stream() {
    let timeline = timeline("h200-dp2-nccl");
    let backward = gpu_backwards(&timeline);
    assert_eq!(backward.len(), 2, "two profiled steps: {backward:?}");
    let nccl: Vec<(String, f64)> = streams(&timeline)
        .into_iter()
        .flat_map(|(label, spans)| {
            spans.into_iter().filter(|(name, ..)| name.starts_with("ncclDevKernel_AllReduce")).map(move |s| (label.clone(), s.1))
        })
        .collect();
    let compute = stream(&timeline);
    assert!(!compute.iter().any(|(name, ..)| name.starts_with("ncclDevKernel")), "NCCL's kernels share the compute stream");
    let during = nccl.iter().filter(|(_, start)| backward.iter().any(|(b0, b1)| b0 <= start && start < b1)).count();
    // DDP's buckets: every one but the last filled as backward ran, in both profiled steps; the
    // loss averaged for the log is the one all-reduce of each step after its optimizer.
    assert!(during >= 2 && during * 2 > nccl.len(), "{during} of {} all-reduce kernels start inside backward", nccl.len());
}

#[test]
fn the_serial_read_makes_each_step_wait_for_its_batch_and_workers_take_the_wait_away() {
    let waits = |name: &str| -> Vec<f64> { ranges_named(&timeline(name), ranges::DATA_WAIT).iter().map(|(a, b)| b - a).collect() };
    let (serial, workers) = (waits("h200-short-serial-0workers"), waits("h200-short-serial-8workers"));
    assert!(serial.len() == 2 && workers.len() == 2, "two profiled steps each: {serial:?} {workers:?}");
    // A batch of 16 samples read one after another takes about 0.2 s (µs here); 8 workers
    // have the next batch ready before the step asks.
    let least_serial = serial.iter().copied().fold(f64::INFINITY, f64::min);
    let most_workers = workers.iter().copied().fold(0.0, f64::max);
    assert!(least_serial > 100_000.0 && most_workers < 1_000.0, "serial {serial:?}, 8 workers {workers:?}");
}
