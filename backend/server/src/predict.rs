//! The prediction recorded with every run at launch (`prediction.json`,
//! `scalebook_shared::estimate::Prediction`): the estimate of one step on the hardware the run
//! is sent to, made before the trainer starts and never fitted to it afterwards. A Slurm run is
//! estimated on its cluster's GPU from the clusters file; a local run on this machine's cores,
//! from their measurement ([`crate::machine`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use scalebook_shared::cluster::Clusters;
use scalebook_shared::estimate::{EstimateOptions, Prediction, estimate};
use scalebook_shared::machine::MachineModel;
use scalebook_shared::protocol::ExecutorSpec;

use crate::plan::LaunchPlan;

/// What a prediction needs besides the plan: the clusters (for Slurm runs) and where this
/// machine's measurement is cached and who makes it (for local ones), kept once read.
pub struct Predictor {
    clusters: Option<Clusters>,
    machine_cache: PathBuf,
    trainer: PathBuf,
    machine: Mutex<Option<MachineModel>>,
}

impl Predictor {
    pub fn new(clusters: Option<Clusters>, machine_cache: PathBuf, trainer: PathBuf) -> Self {
        Self { clusters, machine_cache, trainer, machine: Mutex::new(None) }
    }

    /// The prediction for `plan`, or why there is none (a cluster without estimate factors, a
    /// machine that could not be measured). A local run is predicted on this machine's cores:
    /// the trainer picks a GPU where there is one, which the measurement does not cover.
    pub fn predict(&self, plan: &LaunchPlan, now: u64) -> Result<Prediction, String> {
        let options = EstimateOptions::default();
        let (cluster, gpu, basis) = match &plan.executor {
            ExecutorSpec::Slurm(request) => {
                let clusters = self.clusters.as_ref().ok_or("no clusters file")?;
                let cluster = clusters.get(&request.cluster).map_err(|e| e.to_string())?;
                let gpu = match &request.gpu {
                    Some(name) => cluster.gpu(name),
                    None => cluster.gpus.first(),
                }
                .ok_or("the cluster lists no such GPU")?;
                let basis = format!("{} on {}", gpu.name, request.cluster);
                (cluster.clone(), gpu.clone(), basis)
            }
            ExecutorSpec::Local => {
                let machine = self.machine()?;
                let (cluster, gpu) = machine.for_run(&plan.effective, plan.layout.world() as usize).map_err(|e| e.to_string())?;
                let basis = format!("{} ({})", gpu.name, measured_words(&machine));
                (cluster, gpu, basis)
            }
        };
        let estimate = estimate(&plan.effective, &plan.layout, &cluster, &gpu, &options).map_err(|e| e.to_string())?;
        let load_at_launch = matches!(plan.executor, ExecutorSpec::Local).then(crate::machine::load_now).flatten();
        Ok(Prediction { made_at: now, basis, estimate, load_at_launch })
    }

    /// This machine's measurement: read (or made) at the first local launch, kept after; one
    /// made while other work had the cores is looked at again at each launch, and measured
    /// again once the machine is idle ([`crate::machine::load_or_measure`]). A failed one is
    /// tried again at the next launch.
    pub fn machine(&self) -> Result<MachineModel, String> {
        let mut kept = self.machine.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(machine) = kept.as_ref().filter(|m| m.contention().is_none()) {
            return Ok(machine.clone());
        }
        let measured = crate::machine::load_or_measure(&self.machine_cache, &self.trainer).map_err(|e| e.to_string())?;
        Ok(kept.insert(measured).clone())
    }
}

/// When and under what load this machine's model was measured, and, where other work shared
/// the cores then, that its rates are low for it: what the run view shows under a local
/// prediction.
fn measured_words(machine: &MachineModel) -> String {
    let at = crate::clock::readable_utc(machine.measured_at);
    let load = machine.load_at_measurement.map_or_else(|| "load not recorded".to_owned(), |load| format!("load {load:.2}"));
    match machine.contention() {
        Some(why) => format!("measured by scalebook-train machine at {at}, {load}; {why}, so it predicts slow until measured again"),
        None => format!("measured by scalebook-train machine at {at}, {load}"),
    }
}

/// Where this machine's measurement is cached for every Scalebook of this user: measured once,
/// not once per server (`$SCALEBOOK_MACHINE`, else the user's cache directory).
pub fn default_machine_cache() -> PathBuf {
    if let Some(path) = std::env::var_os("SCALEBOOK_MACHINE") {
        return PathBuf::from(path);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("scalebook").join(scalebook_shared::machine::FILE)
}
