//! Whole runs of the real `scalebook-train` binary: generated data, a launch of N ranks with
//! overrides, and the metric points the run wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

use scalebook_shared::config::data_dir_overrides;
use scalebook_shared::metrics::MetricPoint;

/// The trainer binary: the one cargo built beside these tests, or `SCALEBOOK_TRAIN` where the
/// tests run elsewhere (the GPU bundle carries both, `bench/gpu/`).
pub fn trainer() -> PathBuf {
    std::env::var_os("SCALEBOOK_TRAIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_scalebook-train")), PathBuf::from)
}

/// A fresh directory, removed when the test ends (pass or fail).
pub fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("sb-{name}-")).tempdir().unwrap()
}

/// `datagen` into `dir`: one year of `steps` time steps of `h` x `w` fields.
pub fn generate_sized(dir: &Path, steps: usize, [h, w]: [usize; 2]) {
    let out = Command::new(trainer())
        .args(["datagen", "--years", "1", "--steps-per-year", &steps.to_string(), "--height", &h.to_string(), "--width", &w.to_string()])
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `launch --nproc N -- train --config CONFIG --seed 4` on `data` into `run_dir`, plus `extra`
/// overrides.
pub fn launch_config(config: &str, nproc: usize, data: &Path, run_dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(trainer());
    cmd.current_dir(format!("{}/../..", std::env::var("CARGO_MANIFEST_DIR").unwrap()))
        .args(["launch", "--nproc", &nproc.to_string(), "--", "train", "--config", config, "--seed", "4", "--run-dir"])
        .arg(run_dir);
    for o in data_dir_overrides(&data.display().to_string()) {
        cmd.args(["--set", &o]);
    }
    for e in extra {
        cmd.args(["--set", e]);
    }
    cmd
}

/// Every metric point the run has written so far.
pub fn points(run_dir: &Path) -> Vec<MetricPoint> {
    std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
