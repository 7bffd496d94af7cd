//! This machine's measured rates (`scalebook_shared::machine`), which local runs are predicted
//! from: measured once by the trainer (`scalebook-train machine --json`, about five seconds)
//! and cached in a file, read back every time after.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use scalebook_shared::machine::MachineModel;

use crate::Error;

/// One measurement at a time in this process: a launch that comes while the start-up
/// measurement runs waits for it and reads its result.
static MEASURING: Mutex<()> = Mutex::new(());

/// The cached measurement in `cache`, or a new one made by `trainer` and cached there. A cache
/// made on a machine with another number of cores is measured again.
pub fn load_or_measure(cache: &Path, trainer: &Path) -> Result<MachineModel, Error> {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Ok(text) = std::fs::read_to_string(cache)
        && let Ok(model) = serde_json::from_str::<MachineModel>(&text)
        && model.cores == cores
    {
        return Ok(model);
    }
    tracing::info!("measuring this machine for local predictions ({} machine)", trainer.display());
    let out = Command::new(trainer)
        .args(["machine", "--json"])
        .env("OMP_WAIT_POLICY", "PASSIVE")
        .output()
        .map_err(|e| Error::Machine(format!("cannot run {}: {e}", trainer.display())))?;
    if !out.status.success() {
        return Err(Error::Machine(format!("{} machine failed: {}", trainer.display(), String::from_utf8_lossy(&out.stderr).trim())));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let model: MachineModel = serde_json::from_str(text.trim())
        .map_err(|e| Error::Machine(format!("{} machine printed what this server cannot read: {e}", trainer.display())))?;
    if let Some(dir) = cache.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Written whole under another name, then renamed: a reader never sees half a file.
    let partial = cache.with_extension("json.partial");
    std::fs::write(&partial, text.trim())?;
    std::fs::rename(&partial, cache)?;
    Ok(model)
}
