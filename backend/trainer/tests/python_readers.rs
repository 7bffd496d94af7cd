//! Our files as the Python tools the tutorial's users have read them: h5py for the data,
//! TensorBoard's own event reader for the event files.

use std::process::Command;

use scalebook_trainer::output::EventWriter;

mod support;
use support::python::run_python;

/// A fresh directory, removed when the test ends (pass or fail).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("sb-py-{name}-")).tempdir().unwrap()
}

#[test]
fn tensorboard_reads_our_event_files() {
    let scratch_dir = scratch("tb");
    let dir = scratch_dir.path();
    let mut writer = EventWriter::create(dir).unwrap();
    for step in 0..5u64 {
        writer.scalar("Loss/train", step * 10, 1.0 / (step as f32 + 1.0)).unwrap();
        writer.scalar("RMSE(u10m)/valid", step * 10, step as f32).unwrap();
    }
    writer.flush().unwrap();
    let script = r#"
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1]); acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    print(tag, ",".join(f"{e.step}:{e.value:.6f}" for e in acc.Scalars(tag)))
"#;
    let out = run_python(script, dir);
    let expected = "Loss/train 0:1.000000,10:0.500000,20:0.333333,30:0.250000,40:0.200000\n\
                    RMSE(u10m)/valid 0:0.000000,10:1.000000,20:2.000000,30:3.000000,40:4.000000\n";
    assert_eq!(out, expected);
}

#[test]
fn h5py_reads_generated_data_in_the_tutorials_layout() {
    let scratch_dir = scratch("h5");
    let dir = scratch_dir.path();
    let status = Command::new(env!("CARGO_BIN_EXE_scalebook-train"))
        .args(["datagen", "--years", "2", "--steps-per-year", "12", "--height", "18", "--width", "36", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let script = r#"
import sys, glob, os, h5py, numpy as np
root = sys.argv[1]
for split in ("train", "valid", "test"):
    for path in sorted(glob.glob(os.path.join(root, split, "*.h5"))):
        with h5py.File(path, "r") as f:
            d = f["fields"]
            print(split, os.path.basename(path)[-7:-3], d.shape, d.dtype, d.chunks, bool(np.isfinite(d[...]).all()))
for name in ("global_means", "global_stds", "time_means"):
    a = np.load(os.path.join(root, "stats", name + ".npy"))
    print(name, a.shape, a.dtype)
"#;
    let out = run_python(script, dir);
    let lines: Vec<&str> = out.lines().collect();
    let train: Vec<&&str> = lines.iter().filter(|l| l.starts_with("train ")).collect();
    assert_eq!(train.len(), 2, "{out}");
    for l in lines.iter().filter(|l| l.starts_with("train ") || l.starts_with("valid ") || l.starts_with("test ")) {
        assert!(l.ends_with("(12, 20, 18, 36) float32 (1, 20, 18, 36) True"), "{l}");
    }
    assert!(out.contains("global_means (1, 20, 1, 1) float32"), "{out}");
    assert!(out.contains("global_stds (1, 20, 1, 1) float32"), "{out}");
}
