//! Turning a browser's launch request into something the server will run. The browser already
//! validated it with the same `shared` code; the server checks it again against the config
//! file it serves, because anything can send a WebSocket message.

use std::time::Duration;

use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::{ConfigFile, TrainConfig};
use scalebook_shared::layout::Layout;
use scalebook_shared::protocol::{ExecutorSpec, LaunchRequest, SlurmJob, TrainDevice};
use scalebook_shared::{Error, Problems, launch};

use crate::learners::LearnerLaunch;
use crate::limits::LaunchLimits;

/// Overrides one launch may carry; a real one has a handful.
pub const MAX_OVERRIDES: usize = 64;
/// The longest override text (`key=value`) accepted.
pub const MAX_OVERRIDE_LEN: usize = 1024;
/// The most ranks one local run may start: a browser must not be able to fork a thousand
/// trainers on the server's machine.
pub const MAX_LOCAL_RANKS: u32 = 32;

/// A validated launch.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    pub config: String,
    pub overrides: Vec<String>,
    pub effective: TrainConfig,
    pub layout: Layout,
    pub executor: ExecutorSpec,
    pub target: Target,
    pub seed: Option<u64>,
    /// The learner launching it (`None`: the instructor).
    pub learner: Option<LearnerLaunch>,
    /// The device the run must train on (`None`: the trainer's choice).
    pub device: Option<TrainDevice>,
    /// How long the run may train before it is stopped (`None`: no limit): a learner's run's.
    pub time_limit: Option<Duration>,
}

/// Who launches, which decides the rules a launch keeps.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// The instructor's link: anything this server may run.
    Instructor,
    /// A learner on the viewer link: only the learners' configs, on this machine's CPU, no
    /// larger than the largest learner config, within their quota (kept with the run records).
    Learner(LearnerLaunch),
}

/// Where a validated launch runs, with everything the executor needs decided.
#[derive(Debug, Clone)]
pub enum Target {
    Local,
    Slurm { cluster: String, job: Box<SlurmJob> },
}

/// What a launch is checked against: the configs and clusters this server serves, and the
/// bounds of its machine.
pub struct Policy<'a> {
    pub configs: &'a ConfigFile,
    pub clusters: Option<&'a Clusters>,
    pub limits: &'a LaunchLimits,
}

/// Checks `request` by `launcher` against the policy, reporting every problem at once: a
/// learner's rules first, then the overrides, the layout, the config's rules for the layout's
/// world, what the executor can run, and the size a learner may launch. The plan is complete:
/// who launches it, the device it trains on and how long it may train included.
pub fn plan(policy: &Policy<'_>, request: LaunchRequest, launcher: Launcher) -> Result<LaunchPlan, Error> {
    let learner = match launcher {
        Launcher::Instructor => None,
        Launcher::Learner(launch) => {
            invalid(launch::learner_problems(&policy.limits.learners, &request))?;
            Some(launch)
        }
    };
    let plan = check(policy.configs, policy.clusters, policy.limits, request)?;
    let (device, time_limit) = match learner {
        None => (plan.device, None),
        // A learner's run trains on this machine's CPU, within the sizes and the time learners
        // may take.
        Some(_) => {
            let (settings, served) = (&policy.limits.learners, policy.configs);
            invalid(launch::learner_size_problems(&plan.effective, plan.layout.world(), settings, served))?;
            (Some(TrainDevice::Cpu), settings.time_limit())
        }
    };
    Ok(LaunchPlan { learner, device, time_limit, ..plan })
}

fn invalid(problems: Problems) -> Result<(), Error> {
    if problems.is_empty() { Ok(()) } else { Err(Error::Invalid(problems)) }
}

/// Checks `request` against `configs` (and, for Slurm, `clusters`), whoever launches it.
fn check(configs: &ConfigFile, clusters: Option<&Clusters>, limits: &LaunchLimits, request: LaunchRequest) -> Result<LaunchPlan, Error> {
    let mut effective = configs.get(&request.config)?;
    let mut problems = Problems::default();
    if request.overrides.len() > MAX_OVERRIDES {
        problems.push("overrides", format!("{} overrides, at most {MAX_OVERRIDES} are accepted", request.overrides.len()));
    }
    if let Some(long) = request.overrides.iter().find(|o| o.len() > MAX_OVERRIDE_LEN) {
        problems.push("overrides", format!("an override of {} bytes, at most {MAX_OVERRIDE_LEN} are accepted", long.len()));
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems));
    }
    // A Slurm run reads the cluster's copy of the data (its `data_root`), not the paths the
    // config names for the tutorial's container; the launch's own overrides still win.
    if let (ExecutorSpec::Slurm(slurm), Some(clusters)) = (&request.executor, clusters)
        && let Ok(cluster) = clusters.get(&slurm.cluster)
    {
        effective.set_data_dir(&cluster.data_root);
    }
    if let Err(e) = effective.apply_overrides(&request.overrides) {
        problems.0.extend(e.problems().0);
    }
    // The config fixes tp, cp and the order; the launch adds only dp. The config's rules for
    // that world are the ones the browser and the trainer check; the job settings are checked
    // too whenever the sizes make a layout, so every problem is reported at once.
    let sizes = effective.sizes(request.dp as usize);
    let world = effective.world(request.dp as usize);
    let known = problems.0.len();
    if request.dp == 0 {
        problems.push("dp", "must be at least 1");
    } else if let Err(e) = effective.validate(world) {
        problems.0.extend(e.problems().0);
    }
    let layout = match Layout::new(sizes, &effective.parallel_order) {
        Ok(layout) => Some(layout),
        // Named by `validate` already, unless the launch's own dp is what breaks it.
        Err(e) => {
            if problems.0.len() == known {
                problems.0.extend(e.problems().0);
            }
            None
        }
    };
    let target = layout.as_ref().and_then(|layout| check_executor(&request.executor, clusters, layout, &mut problems));
    // The machine's and the data directories' bounds.
    match (&target, &layout) {
        (Some(Target::Local), Some(layout)) => limits.check_local(&effective, layout.world(), &request.overrides, &mut problems),
        (Some(Target::Slurm { cluster, .. }), _) => {
            if let Some(cluster) = clusters.and_then(|c| c.get(cluster).ok()) {
                limits.check_slurm(&effective, &cluster.data_root, &mut problems);
            }
        }
        _ => {}
    }
    match (layout, target) {
        (Some(layout), Some(target)) if problems.is_empty() => Ok(LaunchPlan {
            config: request.config,
            overrides: request.overrides,
            effective,
            layout,
            executor: request.executor,
            target,
            seed: request.seed,
            learner: None,
            device: None,
            time_limit: None,
        }),
        _ => Err(Error::Invalid(problems)),
    }
}

fn check_executor(executor: &ExecutorSpec, clusters: Option<&Clusters>, layout: &Layout, problems: &mut Problems) -> Option<Target> {
    match (executor, clusters) {
        (ExecutorSpec::Local, _) if layout.world() > MAX_LOCAL_RANKS => {
            problems.push("world", format!("a local run starts at most {MAX_LOCAL_RANKS} ranks; this layout has {}", layout.world()));
            None
        }
        (ExecutorSpec::Local, _) => Some(Target::Local),
        (ExecutorSpec::Slurm(_), None) => {
            problems.push("cluster", "this server has no clusters file (config/clusters.yaml), so it submits no Slurm jobs");
            None
        }
        (ExecutorSpec::Slurm(request), Some(clusters)) => match request.resolve(clusters, layout) {
            Ok(job) => Some(Target::Slurm { cluster: request.cluster.clone(), job: Box::new(job) }),
            Err(e) => {
                problems.0.extend(e.problems().0);
                None
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalebook_shared::layout::Sizes;
    use scalebook_shared::protocol::{LearnerRuns, SlurmRequest};

    fn configs() -> ConfigFile {
        let path = format!("{}/../../config/ViT.yaml", std::env::var("CARGO_MANIFEST_DIR").unwrap());
        ConfigFile::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn clusters() -> Clusters {
        Clusters::parse(include_str!("../shipped/clusters.yaml")).unwrap()
    }

    /// This machine's limits, reading data from the project's `data/` and the tutorial
    /// container's `/data`.
    fn limits() -> LaunchLimits {
        let workspace = std::path::PathBuf::from(format!("{}/../..", std::env::var("CARGO_MANIFEST_DIR").unwrap()));
        let mut limits = LaunchLimits::of_this_machine(&workspace, &[]).unwrap();
        limits.data_roots.push("/data".into());
        limits
    }

    fn plan(configs: &ConfigFile, request: LaunchRequest) -> Result<LaunchPlan, Error> {
        let (clusters, limits) = (clusters(), limits());
        let policy = Policy { configs, clusters: Some(&clusters), limits: &limits };
        super::plan(&policy, request, Launcher::Instructor)
    }

    fn request(config: &str, overrides: &[&str]) -> LaunchRequest {
        LaunchRequest {
            config: config.into(),
            overrides: overrides.iter().map(|o| o.to_string()).collect(),
            dp: 1,
            executor: ExecutorSpec::Local,
            seed: None,
        }
    }

    fn fields(err: Error) -> Vec<String> {
        err.problems().0.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn a_valid_request_becomes_a_plan_with_the_overrides_applied() {
        let plan = plan(&configs(), request("cpu_tiny", &["num_iters=4", "lr=5E-4"])).unwrap();
        assert_eq!(plan.effective.num_iters, 4);
        assert_eq!(plan.effective.lr, 5e-4);
        assert_eq!(plan.layout.world(), 1);
        assert_eq!(plan.overrides, ["num_iters=4", "lr=5E-4"]);
    }

    /// A learner's run trains on the CPU for at most the learners' time limit, decided with its
    /// plan (and recorded with the run); the instructor's has no limit.
    #[test]
    fn a_learners_plan_carries_the_device_and_the_time_limit() {
        let (configs, clusters, mut limits) = (configs(), clusters(), limits());
        limits.learners =
            LearnerRuns { per_learner: 2, configs: vec!["cpu_tiny".into()], time_limit_minutes: 30, ranks: 2, memory_share_bytes: None };
        let policy = Policy { configs: &configs, clusters: Some(&clusters), limits: &limits };
        let learner = crate::learners::new_identity().unwrap().learner;
        let launcher = Launcher::Learner(LearnerLaunch { learner, per_learner: 2 });
        let planned = super::plan(&policy, request("cpu_tiny", &[]), launcher).unwrap();
        assert_eq!((planned.device, planned.time_limit), (Some(TrainDevice::Cpu), Some(Duration::from_secs(1800))));
        let instructors = super::plan(&policy, request("cpu_tiny", &[]), Launcher::Instructor).unwrap();
        assert_eq!((instructors.device, instructors.time_limit), (None, None));
    }

    #[test]
    fn an_unknown_config_is_named() {
        let err = plan(&configs(), request("no_such_config", &[])).unwrap_err();
        assert!(matches!(err, Error::UnknownConfig { .. }), "{err}");
        assert_eq!(fields(err), ["config"]);
    }

    #[test]
    fn every_problem_is_reported_against_its_field() {
        let slurm = || SlurmRequest { time: Some("1h".into()), ..SlurmRequest::default() };
        let cases: [(&[&str], &[&str]); 3] = [
            // Overrides that do not parse leave the config as it was; the job is still checked.
            (&["nonsense", "no_such_key=1"], &["overrides", "no_such_key", "slurm.time"]),
            (&["num_heads=7"], &["embed_dim", "slurm.time"]),
            (&["parallel_order=tp-xx"], &["parallel_order"]),
        ];
        for (overrides, expected) in cases {
            let fields = fields(plan(&configs(), on_perlmutter(request("cpu_tiny", overrides), slurm())).unwrap_err());
            for field in expected {
                assert!(fields.iter().any(|f| f == field), "no problem for {field} in {fields:?}");
            }
        }
    }

    #[test]
    fn local_runs_of_several_ranks_are_planned_up_to_a_limit() {
        let mut req = request("cpu_tiny", &[]);
        req.dp = 2;
        let planned = plan(&configs(), req.clone()).unwrap();
        assert_eq!(planned.layout.world(), 2);
        assert!(matches!(planned.target, Target::Local));
        req.dp = MAX_LOCAL_RANKS * 2;
        req.overrides = vec![format!("global_batch_size={}", MAX_LOCAL_RANKS * 2)];
        let err = plan(&configs(), req).unwrap_err();
        assert!(err.to_string().contains("at most 32 ranks"), "{err}");
    }

    #[test]
    fn the_layout_is_the_configs_with_the_launchs_dp() {
        let mut req = request("cpu_tiny", &["tensor_parallel=2", "parallel_order=cp-tp-dp"]);
        req.dp = 2;
        let planned = plan(&configs(), req.clone()).unwrap();
        assert_eq!(planned.layout.sizes(), Sizes { tp: 2, cp: 1, dp: 2, pp: 1 });
        assert_eq!(planned.layout.effective_order(), "cp-tp-dp-pp");
        req.dp = 0;
        assert_eq!(fields(plan(&configs(), req).unwrap_err()), ["dp"]);
    }

    fn on_perlmutter(mut req: LaunchRequest, slurm: SlurmRequest) -> LaunchRequest {
        req.executor = ExecutorSpec::Slurm(Box::new(SlurmRequest { cluster: "perlmutter".into(), ..slurm }));
        req
    }

    #[test]
    fn slurm_launches_resolve_their_job_or_name_the_bad_fields() {
        let planned = plan(&configs(), on_perlmutter(request("cpu_tiny", &[]), SlurmRequest::default())).unwrap();
        let Target::Slurm { cluster, job } = planned.target else { panic!("not a Slurm plan") };
        assert_eq!((cluster.as_str(), job.nodes, job.gpus_per_node), ("perlmutter", 1, 1));
        let hostile = SlurmRequest { account: Some("a;b".into()), ..SlurmRequest::default() };
        let fields = fields(plan(&configs(), on_perlmutter(request("cpu_tiny", &["num_heads=7"]), hostile)).unwrap_err());
        assert!(fields.contains(&"slurm.account".to_owned()) && fields.len() >= 2, "{fields:?}");
        let (configs, limits) = (configs(), limits());
        let policy = Policy { configs: &configs, clusters: None, limits: &limits };
        let err = super::plan(&policy, on_perlmutter(request("cpu_tiny", &[]), SlurmRequest::default()), Launcher::Instructor).unwrap_err();
        assert!(err.to_string().contains("no clusters file"), "{err}");
    }

    #[test]
    fn a_slurm_run_reads_its_clusters_data_unless_the_launch_says_otherwise() {
        let root = clusters().get("perlmutter").unwrap().data_root.clone();
        let planned = plan(&configs(), on_perlmutter(request("short", &[]), SlurmRequest::default())).unwrap();
        assert_eq!(planned.effective.train_data_path, format!("{root}/train"));
        assert_eq!(planned.effective.global_stds_path, format!("{root}/stats/global_stds.npy"));
        let mine = format!("valid_data_path={root}/mine/valid");
        let own = plan(&configs(), on_perlmutter(request("short", &[&mine]), SlurmRequest::default())).unwrap();
        assert_eq!(
            (own.effective.train_data_path.as_str(), own.effective.valid_data_path.as_str()),
            (format!("{root}/train").as_str(), format!("{root}/mine/valid").as_str())
        );
        // ...inside the cluster's data: anywhere else is refused by name.
        let elsewhere = on_perlmutter(request("short", &["valid_data_path=/mine/valid"]), SlurmRequest::default());
        assert_eq!(fields(plan(&configs(), elsewhere).unwrap_err()), ["valid_data_path"]);
        // A local run keeps the config's paths.
        assert_eq!(
            plan(&configs(), request("short", &[])).unwrap().effective.train_data_path,
            configs().get("short").unwrap().train_data_path
        );
    }

    #[test]
    fn too_many_or_too_long_overrides_are_refused_before_parsing() {
        let many: Vec<String> = (0..=MAX_OVERRIDES).map(|i| format!("seed{i}=1")).collect();
        let err = plan(&configs(), request("cpu_tiny", &many.iter().map(String::as_str).collect::<Vec<_>>())).unwrap_err();
        assert_eq!(fields(err), ["overrides"]);
        let long = format!("expdir={}", "x".repeat(MAX_OVERRIDE_LEN));
        let err = plan(&configs(), request("cpu_tiny", &[&long])).unwrap_err();
        assert_eq!(fields(err), ["overrides"]);
    }
}
