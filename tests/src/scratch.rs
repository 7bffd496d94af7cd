//! Scratch working directories, with the tiny synthetic dataset where the CPU configs look for
//! their data (`data/synthetic`), so a server started there can train `cpu_tiny` for real.

use std::process::{Command, Stdio};

use anyhow::ensure;
use tempfile::TempDir;

use crate::workspace_binary;

/// A fresh directory (removed when dropped) with one small year of synthetic data in
/// `data/synthetic` (48 steps of 40 × 80, enough for `cpu_tiny`'s 36 × 72 crops).
pub fn with_tiny_data(prefix: &str) -> anyhow::Result<TempDir> {
    let dir = tempfile::Builder::new().prefix(&format!("{prefix}-")).tempdir()?;
    let status = Command::new(workspace_binary("scalebook-train")?)
        .args(["datagen", "--years", "1", "--steps-per-year", "48", "--height", "40", "--width", "80", "--out"])
        .arg(dir.path().join("data/synthetic"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    ensure!(status.success(), "scalebook-train datagen failed");
    Ok(dir)
}

/// A fresh directory (removed when dropped) whose `data` is the project's own dataset (a link
/// to it: the 90 × 180 years the setup generates), for tests that train `cpu_short` or
/// `cpu_mp` as a learner would.
pub fn with_project_data(prefix: &str) -> anyhow::Result<TempDir> {
    let dir = tempfile::Builder::new().prefix(&format!("{prefix}-")).tempdir()?;
    let data = crate::workspace_root().join("data");
    ensure!(data.join("synthetic/train").is_dir(), "no dataset in {}: the README's test command generates it", data.display());
    std::os::unix::fs::symlink(&data, dir.path().join("data"))?;
    Ok(dir)
}
