//! Every parallel path on a GPU, over NCCL: whole runs of the real trainer in each layout learn
//! what one rank learns on the same GPU, step by step and epoch by epoch (the agreement sweep's
//! measure). On a machine with fewer GPUs than ranks the launcher has the ranks share them, and
//! NCCL carries their collectives over sockets: slowly, but through the same calls as NVLink.
//!
//! Ignored by default, like `tests/gpu.rs`: run with `--ignored` on a GPU machine (the trainer
//! built with `--features cuda`, see `bench/gpu/`). Each test prints its measured differences,
//! the figures of BENCHMARKS.md's agreement table.

mod support;

use std::path::Path;

use scalebook_shared::metrics::{MetricPoint, tags};
use support::runs::{generate_sized, launch_config, points, scratch};

/// Float32 layouts differ from one rank only in the order of their sums (TF32 off).
const FP32: f64 = 1e-4;
/// Half-precision layouts round their partial sums at 8 or 11 bits.
const HALF: f64 = 1e-2;

/// A small model of the tutorial's shape (cpu_short: 450 tokens, 4 heads, 4 blocks), on 16
/// training samples a step apart: 4 epochs of 4 steps of 8 samples.
const RUN: [&str; 4] = ["limit_nsamples=32", "limit_nsamples_val=16", "num_iters=16", "num_data_workers=0"];

struct Curves {
    /// `Step/Loss/train` at every step.
    train: Vec<f64>,
    /// `Loss/valid` at step 0 and after every epoch.
    valid: Vec<f64>,
}

fn series(points: &[MetricPoint], tag: &str) -> Vec<f64> {
    points.iter().filter(|p| p.tag == tag).map(|p| p.value).collect()
}

/// One run of `nproc` ranks with `extra` overrides on `data`, float32 matmuls in full float32.
fn train(data: &Path, name: &str, nproc: usize, extra: &[&str]) -> Curves {
    let dir = scratch(&format!("gpu-{name}"));
    let run = dir.path().join("run");
    let sets: Vec<&str> = RUN.iter().chain(extra).copied().collect();
    let out = launch_config("cpu_short", nproc, data, &run, &sets).args(["--tf32", "false", "--dist-timeout", "60"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stderr}");
    let pts = points(&run);
    let curves = Curves { train: series(&pts, tags::step::LOSS_TRAIN), valid: series(&pts, tags::LOSS_VALID) };
    assert_eq!(curves.train.len(), 16, "{name}: {stderr}");
    assert_eq!(curves.valid.len(), 5, "{name}: {stderr}");
    curves
}

/// The largest relative difference of `b` from `a`, point by point.
fn worst(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| ((y - x) / x).abs()).fold(0.0, f64::max)
}

/// Runs the one-rank reference and each layout; every layout's curves within `bound` of it.
fn agree(test: &str, reference: &[&str], layouts: &[(&str, usize, &[&str])], bound: f64) {
    // Each rank takes the GPU of its local rank (shared round-robin) unless there is none.
    assert!(tch::Cuda::is_available(), "no CUDA device: these tests need a GPU");
    let dir = scratch(&format!("gpu-data-{test}"));
    let data = dir.path().join("data");
    generate_sized(&data, 48, [90, 180]);
    let one = train(&data, &format!("{test}-one-rank"), 1, reference);
    // Every layout is measured before any is judged, so one failure still reports them all.
    let measured: Vec<(&str, f64, f64)> = layouts
        .iter()
        .map(|(name, nproc, sets)| {
            let sets: Vec<&str> = reference.iter().chain(sets.iter()).copied().collect();
            let layout = train(&data, name, *nproc, &sets);
            let (train, valid) = (worst(&one.train, &layout.train), worst(&one.valid, &layout.valid));
            eprintln!("agreement {test} {name} ({nproc} ranks): train loss {train:.2e}, validation loss {valid:.2e} (bound {bound:.0e})");
            (*name, train, valid)
        })
        .collect();
    for (name, train, valid) in measured {
        assert!(train.is_finite() && train < bound && valid < bound, "{name}: train {train:e}, valid {valid:e} against one rank");
    }
}

#[test]
#[ignore = "needs a CUDA GPU and the `cuda` build"]
fn float32_layouts_over_nccl_learn_what_one_gpu_learns() {
    agree(
        "fp32",
        &[],
        &[
            // Small buckets: backward issues many all-reduces from autograd's thread.
            ("dp2-overlapped", 2, &["bucket_cap_mb=0.05", "first_bucket_cap_mb=0.05", "overlap_grad_reduce=true"]),
            ("dp2-serial", 2, &["overlap_grad_reduce=false"]),
            ("tp2", 2, &["tensor_parallel=2"]),
            ("cp2", 2, &["context_parallel=2"]),
            ("tp2-dp2", 4, &["tensor_parallel=2"]),
            ("tp2-cp2", 4, &["tensor_parallel=2", "context_parallel=2"]),
        ],
        FP32,
    );
}

#[test]
#[ignore = "needs a CUDA GPU and the `cuda` build"]
fn half_precision_layouts_over_nccl_learn_what_one_gpu_learns() {
    // fp16 with the loss scaler (its overflow check after the all-reduce), bf16 without.
    agree(
        "fp16",
        &["amp_mode=fp16"],
        &[("fp16-dp2", 2, &["bucket_cap_mb=0.05", "first_bucket_cap_mb=0.05"]), ("fp16-tp2", 2, &["tensor_parallel=2"])],
        HALF,
    );
    agree(
        "bf16",
        &["amp_mode=bf16"],
        &[("bf16-dp2", 2, &["bucket_cap_mb=0.05", "first_bucket_cap_mb=0.05"]), ("bf16-cp2", 2, &["context_parallel=2"])],
        HALF,
    );
}

#[test]
#[ignore = "needs a CUDA GPU and the `cuda` build"]
fn recomputation_replays_the_gpus_dropout() {
    // With dropout, recomputing a block in backward must draw the masks the forward pass drew:
    // the CUDA generator's state is saved and restored around the replay.
    agree("dropout", &["dropout=0.1"], &[("recompute", 1, &["activation_checkpointing=true"])], FP32);
    // Two ranks draw their own masks for their halves of the batch, so their curve is another
    // one; the test is that recomputation and the overlapped all-reduces train together.
    agree(
        "dropout-dp2",
        &["dropout=0.1", "activation_checkpointing=true"],
        &[("recompute-dp2", 2, &["bucket_cap_mb=0.05", "first_bucket_cap_mb=0.05"])],
        f64::INFINITY,
    );
}
