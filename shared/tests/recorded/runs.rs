//! The recorded GPU runs the chapters open (`static/recorded/`): each says where it was
//! measured and loads as a timeline with the step's ranges and a CUDA stream, and each shows
//! what the chapters point at in it: the 0-worker run's host-to-device copy of the batch in the
//! compute stream before the forward pass's first kernel, the fed `short_opt` run's copies on a
//! stream of their own, the dp = 2 run's NCCL all-reduce kernels during backward, and the
//! serial read's wait for every batch that 8 workers take away.

use scalebook_shared::profile::ranges;
use scalebook_shared::profile::recorded::{self, Recording};

use crate::{RECORDINGS, dir, gpu_backwards, ranges_named, stream, streams, timeline};

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
