//! Scratch working directories, with the tiny synthetic dataset where the CPU configs look for
//! their data (`data/synthetic`), so a server started there can train `cpu_tiny` for real.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::ensure;

use crate::workspace_binary;

/// A directory removed when dropped.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(prefix: &str) -> anyhow::Result<ScratchDir> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.subsec_nanos();
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scratch directory with one small year of synthetic data in `data/synthetic` (48 steps of
/// 40 × 80, enough for `cpu_tiny`'s 36 × 72 crops).
pub fn with_tiny_data(prefix: &str) -> anyhow::Result<ScratchDir> {
    let dir = ScratchDir::new(prefix)?;
    let status = Command::new(workspace_binary("scalebook-train")?)
        .args(["datagen", "--years", "1", "--steps-per-year", "48", "--height", "40", "--width", "80", "--out"])
        .arg(dir.0.join("data/synthetic"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    ensure!(status.success(), "scalebook-train datagen failed");
    Ok(dir)
}
