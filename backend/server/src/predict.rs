//! The prediction recorded with every run at launch (`prediction.json`,
//! `scalebook_shared::estimate::Prediction`): the estimate of one step on the hardware the run
//! is sent to, made before the trainer starts and never fitted to it afterwards. A Slurm run is
//! estimated on its cluster's GPU from the clusters file; a local run on this machine's cores,
//! from their measurement ([`crate::machine`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use scalebook_shared::cluster::Clusters;
use scalebook_shared::estimate::{EstimateOptions, Prediction, estimate};
use scalebook_shared::machine::{MachineModel, refuted_by};
use scalebook_shared::metrics::{self, MetricPoint, tags};
use scalebook_shared::protocol::ExecutorSpec;
use scalebook_shared::rundir;

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

    /// Looks at a finished local run beside its prediction: where its steady speed refutes the
    /// machine's model ([`refuted_by`]) and the machine is idle now, so that the model rather
    /// than other work is to blame, the model it was predicted from is dropped and measured
    /// again at the next launch (a model measured since is kept). Says why, and whether it did.
    pub fn review(&self, run_dir: &Path, idle_now: bool) -> Option<String> {
        let prediction: Prediction = serde_json::from_slice(&std::fs::read(run_dir.join(rundir::PREDICTION)).ok()?).ok()?;
        let text = std::fs::read_to_string(run_dir.join(rundir::METRICS)).ok()?;
        let points: Vec<MetricPoint> = text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
        let why = refuted_by(&prediction, metrics::steady(&points, tags::SAMPLES_PER_SEC)?)?;
        if !idle_now {
            return None;
        }
        let mut kept = self.machine.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.as_ref().is_some_and(|m| m.measured_at > prediction.made_at) {
            return None;
        }
        let dropped = kept.take().is_some() | crate::machine::forget(&self.machine_cache, prediction.made_at);
        dropped.then(|| {
            tracing::info!("{why}: this machine is measured again at the next local launch");
            why
        })
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

#[cfg(test)]
mod tests {
    use scalebook_shared::estimate::Load;

    use super::*;
    use crate::machine::tests::measured;

    /// A run directory holding a prediction of 10 samples/s made at time 100 on an idle
    /// machine, and a steady speed of `speed` from epoch 2 on.
    fn finished_run(speed: f64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let model = measured(2, Some(0.1));
        let config = scalebook_shared::config::ConfigFile::parse(include_str!("../shipped/ViT.yaml")).unwrap().get("cpu_tiny").unwrap();
        let (cluster, gpu) = model.for_run(&config, 1).unwrap();
        let mut estimate = estimate(&config, &config.layout(1).unwrap(), &cluster, &gpu, &EstimateOptions::default()).unwrap();
        estimate.samples_per_sec = 10.0;
        let prediction =
            Prediction { made_at: 100, basis: String::new(), estimate, load_at_launch: Some(Load { one_minute: 0.1, cores: 2 }) };
        std::fs::write(dir.path().join(rundir::PREDICTION), serde_json::to_vec(&prediction).unwrap()).unwrap();
        let points: String = [(1, 30.0), (2, speed), (3, speed)]
            .map(|(epoch, value)| {
                let point = MetricPoint { step: epoch * 10, epoch, wall: 0.0, tag: tags::SAMPLES_PER_SEC.into(), value };
                format!("{}\n", serde_json::to_string(&point).unwrap())
            })
            .concat();
        std::fs::write(dir.path().join(rundir::METRICS), points).unwrap();
        dir
    }

    /// A predictor whose cached model was measured at `measured_at`.
    fn predictor(cache_dir: &Path, measured_at: u64) -> (Predictor, PathBuf) {
        let cache = cache_dir.join(scalebook_shared::machine::FILE);
        let model = MachineModel { measured_at, ..measured(2, Some(0.1)) };
        std::fs::write(&cache, serde_json::to_vec(&model).unwrap()).unwrap();
        (Predictor::new(None, cache.clone(), PathBuf::from("/nonexistent/scalebook-train")), cache)
    }

    #[test]
    fn a_run_that_refutes_the_machines_model_has_it_measured_again() {
        let cache_dir = tempfile::tempdir().unwrap();
        let (predictor, cache) = predictor(cache_dir.path(), 50);
        assert_eq!(predictor.machine().unwrap().measured_at, 50, "read from the cache");
        // Within the stated error, or on a machine busy now: the model stands.
        assert_eq!(predictor.review(finished_run(12.0).path(), true), None);
        assert_eq!(predictor.review(finished_run(25.0).path(), false), None);
        assert!(cache.exists());
        // 2.5 times the prediction on an idle machine: dropped, cache and all.
        let why = predictor.review(finished_run(25.0).path(), true).unwrap();
        assert!(why.contains("25.000 samples/s against 10.000 predicted"), "{why}");
        assert!(!cache.exists(), "the cached model is gone, so the next launch measures again");
    }

    #[test]
    fn a_model_measured_after_the_runs_prediction_is_kept() {
        let cache_dir = tempfile::tempdir().unwrap();
        let (predictor, cache) = predictor(cache_dir.path(), 150);
        assert_eq!(predictor.review(finished_run(25.0).path(), true), None);
        assert!(cache.exists());
        assert_eq!(predictor.machine().unwrap().measured_at, 150);
    }
}
