//! This machine's measured rates (`scalebook_shared::machine`), which local runs are predicted
//! from: measured once by the trainer (`scalebook-train machine --json`, about five seconds)
//! and cached in a file, read back every time after.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use scalebook_shared::estimate::Load;
use scalebook_shared::machine::{MachineModel, is_busy};

use crate::Error;

/// One measurement at a time in this process: a launch that comes while the start-up
/// measurement runs waits for it and reads its result.
static MEASURING: Mutex<()> = Mutex::new(());

/// The cached measurement in `cache`, or a new one made by `trainer` and cached there. A cache
/// made on a machine with another number of cores is measured again, and so is one made while
/// other work was on the cores, once they are idle (until then it is the best there is).
pub fn load_or_measure(cache: &Path, trainer: &Path) -> Result<MachineModel, Error> {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let idle_now = load_now().is_some_and(|load| !is_busy(load.one_minute, load.cores));
    if let Ok(text) = std::fs::read_to_string(cache)
        && let Ok(model) = serde_json::from_str::<MachineModel>(&text)
        && stands(&model, cores, idle_now)
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

/// Whether a cached measurement stands: made on as many cores as there are, and not made
/// while other work had the cores ([`MachineModel::contention`]) when this machine is idle now.
fn stands(model: &MachineModel, cores: usize, idle_now: bool) -> bool {
    model.cores == cores && !(model.contention().is_some() && idle_now)
}

/// Drops the cached measurement in `cache` if it was made by `made_at` (the time of a
/// prediction it was found wrong by), so the next launch measures again; says whether it did.
pub fn forget(cache: &Path, made_at: u64) -> bool {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cached = std::fs::read_to_string(cache).ok().and_then(|text| serde_json::from_str::<MachineModel>(&text).ok());
    if cached.is_none_or(|model| model.measured_at > made_at) {
        return false;
    }
    std::fs::remove_file(cache).map_err(|e| tracing::warn!("cannot remove {}: {e}", cache.display())).is_ok()
}

/// This machine's load now, where the system says it (`/proc/loadavg`).
pub fn load_now() -> Option<Load> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let one_minute = text.split_whitespace().next()?.parse().ok()?;
    Some(Load { one_minute, cores: std::thread::available_parallelism().map_or(1, |n| n.get()) })
}

#[cfg(test)]
pub(crate) mod tests {
    use scalebook_shared::machine::ThreadRates;

    use super::*;

    /// A model of `cores` cores measured at `load`.
    pub(crate) fn measured(cores: usize, load: Option<f64>) -> MachineModel {
        let rates = |threads: usize, share: f64| ThreadRates {
            threads,
            matmul_gflops: vec![threads as f64 * 50.0],
            attention_gflops: vec![10.0],
            copy_gb_per_s: 5.0,
            op_overhead_us: 3.0,
            step_op_us: 10.0,
            cpu_share: Some(share),
        };
        MachineModel {
            cores,
            memory_gb: 8.0,
            process_baseline_gb: 0.1,
            by_threads: vec![rates(1, 0.95), rates(cores, 0.9)],
            collective_latency_s: 1e-3,
            collective_gb_per_s: 1.0,
            measured_at: 0,
            load_at_measurement: load,
        }
    }

    #[test]
    fn a_busy_measurement_is_made_again_once_the_machine_is_idle() {
        assert!(stands(&measured(2, Some(0.2)), 2, true));
        assert!(!stands(&measured(4, Some(0.2)), 2, true), "another number of cores");
        assert!(!stands(&measured(2, Some(1.9)), 2, true), "measured busy, idle now: measure again");
        assert!(stands(&measured(2, Some(1.9)), 2, false), "still busy: the busy one is the best there is");
        assert!(!stands(&measured(2, None), 2, true), "a cache from before the load was recorded");
        let mut crowded = measured(2, Some(0.2));
        crowded.by_threads[0].cpu_share = Some(0.5);
        assert!(!stands(&crowded, 2, true), "a thread that had half its time, under an idle load average");
    }
}
