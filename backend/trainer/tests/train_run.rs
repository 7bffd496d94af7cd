//! A whole run of the real binary on generated data: its outputs, its log lines, the
//! learning it shows, and resume = uninterrupted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use scalebook_shared::config::data_dir_overrides;
use scalebook_shared::metrics::{MetricPoint, tags};
use tch::Tensor;

const BIN: &str = env!("CARGO_BIN_EXE_scalebook-train");

fn workspace() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..")
}

/// A fresh directory, removed when the test ends (pass or fail).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("sb-train-{name}-")).tempdir().unwrap()
}

/// Synthetic data a bit larger than cpu_tiny's 36x72 crop, so the crop path is exercised.
fn generate(dir: &Path) {
    let out = Command::new(BIN)
        .args(["datagen", "--years", "1", "--steps-per-year", "48", "--height", "40", "--width", "80", "--seed", "3", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "datagen failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn train(run_dir: &Path, data: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(workspace()).args(["train", "--config", "cpu_tiny", "--seed", "11", "--run-dir"]).arg(run_dir);
    for o in data_dir_overrides(&data.display().to_string()) {
        cmd.args(["--set", &o]);
    }
    cmd.args(extra).output().unwrap()
}

fn points(run_dir: &Path) -> Vec<MetricPoint> {
    let text = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn series(points: &[MetricPoint], tag: &str) -> Vec<(u64, f64)> {
    points.iter().filter(|p| p.tag == tag).map(|p| (p.step, p.value)).collect()
}

fn checkpoint(run_dir: &Path) -> HashMap<String, Tensor> {
    Tensor::load_multi(run_dir.join("checkpoints/last.ot")).unwrap().into_iter().collect()
}

#[test]
fn a_run_writes_the_tutorials_outputs_and_resumes_exactly() {
    let scratch_dir = scratch("run");
    let root = scratch_dir.path();
    let data = root.join("data");
    generate(&data);

    // cpu_tiny: 16 samples / batch 4 = 4 iterations per epoch, 8 iterations = 2 epochs. With
    // two loader workers, which start on epoch 2 while epoch 1 validates: the resumed run
    // below reads epoch 2 afresh, so its equal checkpoint says the early read kept the order.
    let workers = ["--set", "num_data_workers=2"];
    let full = root.join("full");
    let out = train(&full, &data, &workers);
    assert!(out.status.success(), "train failed: {}", String::from_utf8_lossy(&out.stderr));

    let log = std::fs::read_to_string(full.join("out.log")).unwrap();
    let line = |needle: &str| log.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in out.log:\n{log}"));
    let epoch_line = line("Time taken for epoch 1 is ");
    // `2025-06-19 17:48:55,185 - root - INFO - Time taken for epoch 1 is 61.229223 sec, avg 8.362020 samples/sec`
    let (stamp, message) = epoch_line.split_once(" - root - INFO - ").unwrap();
    assert_eq!(stamp.len(), 23, "{stamp}");
    assert_eq!(&stamp[19..20], ",");
    let words: Vec<&str> = message.split(' ').collect();
    assert_eq!(words[6].split('.').nth(1).unwrap().len(), 6, "%f prints 6 decimals: {message}");
    assert!(message.ends_with(" samples/sec"));
    assert!(line("  Avg train loss=").split('=').nth(1).unwrap().split('.').nth(1).unwrap().len() == 6);
    line("  Avg val loss=");
    line("  Total validation time: ");
    line("Starting Training Loop...");
    line("DONE ---- rank 0");

    let pts = points(&full);
    for tag in tags::ALL {
        assert!(pts.iter().any(|p| p.tag == tag), "metrics.jsonl has no {tag}");
    }
    let valid = series(&pts, tags::LOSS_VALID);
    assert_eq!(valid.iter().map(|v| v.0).collect::<Vec<_>>(), vec![0, 4, 8], "step 0 and one point per epoch");
    // The peak resident set, once per epoch, never falling: libtorch alone holds more than
    // 100 MB, and a cpu_tiny run far less than a few GB.
    let peak = series(&pts, tags::run::PEAK_MEMORY);
    assert_eq!(peak.iter().map(|v| v.0).collect::<Vec<_>>(), vec![4, 8]);
    assert!(peak.iter().all(|v| (0.1..4.0).contains(&v.1)) && peak[1].1 >= peak[0].1, "{peak:?}");
    line("  Peak memory: ");
    assert_eq!(series(&pts, tags::step::LOSS_TRAIN).len(), 8);
    // The tutorial's cosine schedule: the LR logged after epoch 1 is lr_at(4) of 8.
    let lr = series(&pts, tags::LEARNING_RATE);
    assert!((lr[0].1 - 2.5e-4 * 0.5 * (1.0 + (std::f64::consts::PI * 4.0 / 8.0).cos())).abs() < 1e-12);
    let events: Vec<_> = std::fs::read_dir(full.join("logs")).unwrap().collect();
    assert_eq!(events.len(), 1);

    // The same run in two invocations: one epoch, then --resume.
    let split = root.join("split");
    let out = train(&split, &data, &[&workers[..], &["--max-epochs", "1"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(series(&points(&split), tags::LOSS_VALID).len(), 2);
    let out = train(&split, &data, &[&workers[..], &["--resume"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (a, b) = (checkpoint(&full), checkpoint(&split));
    assert_eq!(a.len(), b.len());
    for (name, t) in &a {
        let diff = f64::try_from((t - &b[name]).abs().max()).unwrap();
        assert!(diff < 1e-6, "{name} differs by {diff} after resume");
    }
    // The resumed curve continues: the same steps, each once.
    let steps = |d: &Path| series(&points(d), tags::step::LOSS_TRAIN).iter().map(|s| s.0).collect::<Vec<_>>();
    assert_eq!(steps(&split), steps(&full));
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    let scratch_dir = scratch("bad");
    let root = scratch_dir.path();
    let run_dir = root.join("run");
    // A config rule: exit status 2, the field named, nothing created.
    let out = Command::new(BIN)
        .current_dir(workspace())
        .args(["train", "--config", "cpu_tiny", "--set", "num_heads=5", "--run-dir"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("num_heads"));
    assert!(!run_dir.exists());
    // A missing data directory names the path.
    let missing = root.join("nowhere");
    let out = train(&run_dir, &missing, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere"));
    // A run directory that cannot be created (a file is in the way).
    let blocker = root.join("file");
    std::fs::write(&blocker, b"").unwrap();
    let out = train(&blocker.join("run"), &missing, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run directory"), "{}", String::from_utf8_lossy(&out.stderr));
    // Resuming a run that has no checkpoint.
    let out = train(&root.join("fresh"), &missing, &["--resume"]);
    assert_eq!(out.status.code(), Some(2));
}

/// SC22's benchy trials: `io` only reads (no losses, no checkpoint), `synthetic` trains on one
/// batch; both report the throughput the bottleneck block compares.
#[test]
fn benchy_trials_time_loading_alone_and_steps_alone() {
    let scratch_dir = scratch("benchy");
    let root = scratch_dir.path();
    let data = root.join("data");
    generate(&data);
    for (trial, trains) in [("io", false), ("synthetic", true)] {
        let run_dir = root.join(trial);
        let out = train(&run_dir, &data, &["--set", &format!("benchy_trial={trial}"), "--set", "optimizer=SGD"]);
        assert!(out.status.success(), "{trial}: {}", String::from_utf8_lossy(&out.stderr));
        let points = points(&run_dir);
        let throughput = series(&points, tags::SAMPLES_PER_SEC);
        assert_eq!(throughput.len(), 2, "{trial}: one throughput per epoch");
        assert!(throughput.iter().all(|(_, v)| v.is_finite() && *v > 0.0), "{trial}: {throughput:?}");
        let train_losses = series(&points, tags::step::LOSS_TRAIN);
        assert_eq!(train_losses.len(), if trains { 8 } else { 0 }, "{trial}: step losses");
        assert_eq!(run_dir.join("checkpoints/last.ot").exists(), trains, "{trial}: checkpoint");
    }
}
