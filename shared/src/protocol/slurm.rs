//! The Slurm side of a launch: the few job settings a browser may choose, and the complete job
//! they resolve to on a cluster of `clusters.yaml`.
//!
//! Resolution lives here, not in the server, so the browser shows the same problems as the
//! learner types that the server reports when it refuses a submission. Every value that can
//! reach an `#SBATCH` line is a checked word (the cluster file's are checked when it loads,
//! the browser's here), so no choice can add a second option or a shell word to a job script.

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, Clusters, ExecutorKind, SlurmDefaults, is_slurm_time};
use crate::layout::Layout;
use crate::{Error, Problem, Problems};

/// The longest value a browser may give for one Slurm field; real ones are a few characters.
pub const MAX_FIELD_LEN: usize = 64;

/// What the browser chooses for a batch job. Only `cluster` is required: everything else
/// defaults from the cluster file and the layout.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmRequest {
    /// A cluster of `clusters.yaml` whose executor is `slurm`.
    pub cluster: String,
    /// The GPU model to run on (its constraint selects the nodes); default: the first listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// Nodes to spread the ranks over; default: as few as hold one rank per GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Wall-time limit (Slurm's forms: `30`, `01:00:00`, `1-00:00:00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

/// A batch job with every setting decided: what the `#SBATCH` lines say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmJob {
    pub job_name: String,
    pub account: String,
    pub qos: String,
    pub reservation: Option<String>,
    /// Selects nodes with the chosen GPU model; none on CPU nodes.
    pub constraint: Option<String>,
    pub nodes: u32,
    /// Ranks per node: the layout's world divided by the nodes.
    pub tasks_per_node: u32,
    /// GPUs asked for per node, one per rank; 0 on CPU nodes.
    pub gpus_per_node: u32,
    pub cpus_per_task: u32,
    pub time: String,
    /// The container image the ranks run in (shifter), as the tutorial's scripts do.
    pub image: Option<String>,
    pub modules: Vec<String>,
}

/// What people ask of a batch job besides its state (Open OnDemand's and jupyterlab-slurm's
/// users ask for these): while it waits, its place in the queue and when Slurm expects to
/// start it; once it runs, its nodes; once it ended, how long it ran and the CPU and GPU time
/// it held. The server learns them in its one poll for every job, so they are as old as that
/// poll (`ServerMessage::Heartbeat` says when Slurm last answered).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmStatus {
    /// 1 for the next job Slurm starts in the job's partition: the pending jobs ahead of it by
    /// priority (then by age), plus one. Only while the job pends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<u32>,
    /// Of how many pending jobs in the partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<u32>,
    /// Slurm's estimate of the start (seconds since the Unix epoch), where its scheduler made
    /// one (`squeue --start`). Only while the job pends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start: Option<f64>,
    /// The nodes the job holds or held, in Slurm's notation (`node[1-2]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// Wall-clock seconds it ran, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// The CPUs it held (CPU time held = CPUs x elapsed, as Slurm bills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// The GPUs it held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// CPU seconds its processes used (`sacct`'s TotalCPU: only where the site keeps accounting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_used_s: Option<f64>,
}

impl SlurmStatus {
    /// CPU and GPU hours held, once the job ended.
    pub fn hours_held(&self) -> Option<(f64, f64)> {
        let elapsed_h = self.elapsed_s? / 3600.0;
        Some((f64::from(self.cpus.unwrap_or(0)) * elapsed_h, f64::from(self.gpus.unwrap_or(0)) * elapsed_h))
    }
}

impl SlurmRequest {
    /// The job this request makes for `layout` on its cluster, or every problem with it
    /// (fields `cluster` and `slurm.<field>`).
    pub fn resolve(&self, clusters: &Clusters, layout: &Layout) -> Result<SlurmJob, Error> {
        let cluster = clusters.get(&self.cluster)?;
        let defaults = match (&cluster.slurm, cluster.executor) {
            (Some(defaults), ExecutorKind::Slurm) => defaults,
            _ => {
                let message = format!("`{}` runs on this machine, not through Slurm: choose a slurm cluster", self.cluster);
                return Err(Error::Invalid(Problems(vec![Problem::new("cluster", message)])));
            }
        };
        let mut problems = Problems::default();
        for (key, value) in
            [("account", &self.account), ("qos", &self.qos), ("reservation", &self.reservation), ("job_name", &self.job_name)]
        {
            if let Some(value) = value {
                word(key, value, &mut problems);
            }
        }
        if let Some(time) = &self.time
            && (time.len() > MAX_FIELD_LEN || !is_slurm_time(time))
        {
            let message = format!("`{}` is not a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, not zero)", time.escape_debug());
            problems.push("slurm.time", message);
        }
        let constraint = self.constraint(cluster, &mut problems);
        let (nodes, tasks_per_node) = placement(cluster, self.nodes, layout.world(), &mut problems);
        let gpus_per_node = if cluster.gpus_per_node > 0 { tasks_per_node } else { 0 };
        let job = SlurmJob {
            job_name: self.job_name.clone().unwrap_or_else(|| default_job_name(layout)),
            account: self.account.clone().unwrap_or_else(|| defaults.account.clone()),
            qos: self.qos.clone().unwrap_or_else(|| default_qos(cluster, defaults, nodes * tasks_per_node)),
            reservation: self.reservation.clone().or_else(|| defaults.reservation.clone()),
            constraint,
            nodes,
            tasks_per_node,
            gpus_per_node,
            cpus_per_task: u32::try_from(defaults.cpus_per_task).unwrap_or(u32::MAX),
            time: self.time.clone().unwrap_or_else(|| defaults.time.clone()),
            image: defaults.image.clone(),
            modules: defaults.modules.clone(),
        };
        problems.into_result(job)
    }

    /// The chosen GPU model's constraint (the first model's by default).
    fn constraint(&self, cluster: &Cluster, problems: &mut Problems) -> Option<String> {
        let kind = match (&self.gpu, cluster.gpus.first()) {
            (None, first) => first,
            (Some(name), None) => {
                problems.push("slurm.gpu", format!("`{}` has CPU nodes only; it has no GPU `{}`", self.cluster, name.escape_debug()));
                None
            }
            (Some(name), Some(_)) => {
                let kind = cluster.gpu(name);
                if kind.is_none() {
                    let known: Vec<&str> = cluster.gpus.iter().map(|g| g.name.as_str()).collect();
                    problems.push(
                        "slurm.gpu",
                        format!("`{}` has no GPU `{}`; it has: {}", self.cluster, name.escape_debug(), known.join(", ")),
                    );
                }
                kind
            }
        };
        kind.and_then(|k| k.constraint.clone())
    }
}

/// Nodes and ranks per node for `world` ranks: the requested nodes, or as few as give each
/// rank its own GPU (one node on a CPU cluster). The ranks must split evenly.
fn placement(cluster: &Cluster, requested: Option<u32>, world: u32, problems: &mut Problems) -> (u32, u32) {
    let per_node = u32::try_from(cluster.gpus_per_node).unwrap_or(u32::MAX);
    let nodes = requested.unwrap_or(if per_node > 0 { world.div_ceil(per_node) } else { 1 });
    if nodes == 0 {
        problems.push("slurm.nodes", "must be at least 1, got 0");
        return (1, world);
    }
    if !world.is_multiple_of(nodes) {
        problems.push("slurm.nodes", format!("the layout's {world} ranks do not split evenly over {nodes} nodes"));
    }
    let tasks = (world / nodes).max(1);
    if per_node > 0 && tasks > per_node {
        let least = world.div_ceil(per_node);
        problems.push("slurm.nodes", format!("{tasks} ranks per node, but a node has {per_node} GPUs: use at least {least} nodes"));
    }
    (nodes, tasks)
}

/// The whole-node QOS, or the cluster's shared one for a job on part of one node (the
/// tutorial's single-GPU runs use `-q shared`).
fn default_qos(cluster: &Cluster, defaults: &SlurmDefaults, gpus: u32) -> String {
    let part_of_a_node = cluster.gpus_per_node > 0 && (gpus as usize) < cluster.gpus_per_node;
    match (&defaults.shared_qos, part_of_a_node) {
        (Some(shared), true) => shared.clone(),
        _ => defaults.qos.clone(),
    }
}

/// The tutorial's job names: `vit-era5`, `-dp` for data parallelism, `-mp` when the model
/// itself is split (tensor or context parallelism).
fn default_job_name(layout: &Layout) -> String {
    let sizes = layout.sizes();
    if sizes.tp * sizes.cp > 1 {
        "vit-era5-mp".into()
    } else if sizes.dp > 1 {
        "vit-era5-dp".into()
    } else {
        "vit-era5".into()
    }
}

/// A browser-chosen word for an `#SBATCH` line (account, QOS, reservation, job name, which
/// also names output files as `%x`): letters, digits, `-`, `_` and `.`, as real names are. The
/// cluster file may use Slurm's wider syntax (`gpu&hbm80g`); a browser may not.
fn word(key: &str, value: &str, problems: &mut Problems) {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if value.is_empty() || value.len() > MAX_FIELD_LEN || !value.chars().all(ok) {
        let message = format!("`{}` must be 1 to {MAX_FIELD_LEN} letters, digits, `-`, `_` or `.`", crate::excerpt(value));
        problems.push(format!("slurm.{key}"), message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Sizes;
    use crate::protocol::ExecutorSpec;

    /// The shipped clusters plus a one-node CPU cluster like the test setup's.
    fn clusters() -> Clusters {
        let shipped = include_str!("../../shipped/clusters.yaml");
        let cpu = "
cpubox:
  executor: slurm
  gpus_per_node: 0
  data_root: data
  slurm: { account: lab, qos: normal, time: '10', cpus_per_task: 1 }
";
        Clusters::parse(&format!("{shipped}{cpu}")).unwrap()
    }

    fn layout(tp: u32, dp: u32) -> Layout {
        Layout::new(Sizes { tp, dp, ..Sizes::default() }, "tp-cp-dp").unwrap()
    }

    fn request(cluster: &str) -> SlurmRequest {
        SlurmRequest { cluster: cluster.into(), ..SlurmRequest::default() }
    }

    fn fields(err: Error) -> Vec<String> {
        err.problems().0.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn one_rank_on_perlmutter_is_the_tutorials_single_gpu_job() {
        let job = request("perlmutter").resolve(&clusters(), &layout(1, 1)).unwrap();
        let expected = SlurmJob {
            job_name: "vit-era5".into(),
            account: "trn011".into(),
            qos: "shared".into(),
            reservation: None,
            constraint: Some("gpu".into()),
            nodes: 1,
            tasks_per_node: 1,
            gpus_per_node: 1,
            cpus_per_task: 32,
            time: "01:00:00".into(),
            image: Some("nersc/pytorch:24.08.01".into()),
            modules: vec!["gpu".into(), "nccl-plugin".into()],
        };
        assert_eq!(job, expected);
    }

    #[test]
    fn ranks_fill_whole_nodes_of_four_gpus() {
        let job = request("perlmutter").resolve(&clusters(), &layout(1, 8)).unwrap();
        assert_eq!((job.nodes, job.tasks_per_node, job.gpus_per_node), (2, 4, 4));
        assert_eq!((job.qos.as_str(), job.job_name.as_str()), ("regular", "vit-era5-dp"));
        let mp = request("perlmutter").resolve(&clusters(), &layout(4, 2)).unwrap();
        assert_eq!(mp.job_name, "vit-era5-mp");
        let spread = SlurmRequest { nodes: Some(4), ..request("perlmutter") }.resolve(&clusters(), &layout(1, 8)).unwrap();
        assert_eq!((spread.nodes, spread.tasks_per_node, spread.gpus_per_node), (4, 2, 2));
    }

    #[test]
    fn choices_override_the_cluster_defaults() {
        let req = SlurmRequest {
            gpu: Some("a100-80gb".into()),
            time: Some("00:20:00".into()),
            account: Some("m4321".into()),
            qos: Some("debug".into()),
            reservation: Some("dl4sci".into()),
            job_name: Some("my-run.2".into()),
            ..request("perlmutter")
        };
        let job = req.resolve(&clusters(), &layout(1, 4)).unwrap();
        assert_eq!(job.constraint.as_deref(), Some("gpu&hbm80g"));
        assert_eq!(
            [job.time, job.account, job.qos, job.reservation.unwrap(), job.job_name],
            ["00:20:00", "m4321", "debug", "dl4sci", "my-run.2"]
        );
    }

    #[test]
    fn placements_that_do_not_fit_say_how_to_fix_them() {
        let uneven = SlurmRequest { nodes: Some(3), ..request("perlmutter") }.resolve(&clusters(), &layout(1, 8)).unwrap_err();
        assert!(uneven.to_string().contains("8 ranks do not split evenly over 3 nodes"), "{uneven}");
        let crowded = SlurmRequest { nodes: Some(1), ..request("perlmutter") }.resolve(&clusters(), &layout(1, 8)).unwrap_err();
        assert!(crowded.to_string().contains("8 ranks per node, but a node has 4 GPUs: use at least 2 nodes"), "{crowded}");
        let zero = SlurmRequest { nodes: Some(0), ..request("perlmutter") }.resolve(&clusters(), &layout(1, 1)).unwrap_err();
        assert_eq!(fields(zero), ["slurm.nodes"]);
    }

    #[test]
    fn hostile_values_are_refused_field_by_field() {
        let req = SlurmRequest {
            gpu: Some("h100".into()),
            time: Some("1h; reboot".into()),
            account: Some("x; rm -rf /".into()),
            qos: Some("regular\n#SBATCH --uid=0".into()),
            reservation: Some("$(id)".into()),
            job_name: Some("../../etc/passwd".into()),
            nodes: None,
            cluster: "perlmutter".into(),
        };
        let err = req.resolve(&clusters(), &layout(1, 1)).unwrap_err();
        let mut fields = fields(err);
        fields.sort();
        assert_eq!(fields, ["slurm.account", "slurm.gpu", "slurm.job_name", "slurm.qos", "slurm.reservation", "slurm.time"]);
        let long = SlurmRequest { account: Some("a".repeat(MAX_FIELD_LEN + 1)), ..request("perlmutter") };
        assert!(long.resolve(&clusters(), &layout(1, 1)).unwrap_err().to_string().contains("must be 1 to 64"));
    }

    #[test]
    fn only_slurm_clusters_of_the_file_take_jobs() {
        let local = request("local").resolve(&clusters(), &layout(1, 1)).unwrap_err();
        assert!(local.to_string().contains("not through Slurm"), "{local}");
        assert_eq!(fields(request("frontier").resolve(&clusters(), &layout(1, 1)).unwrap_err()), ["cluster"]);
    }

    #[test]
    fn cpu_nodes_take_every_rank_on_one_node_and_no_gpus() {
        let job = request("cpubox").resolve(&clusters(), &layout(1, 2)).unwrap();
        assert_eq!((job.nodes, job.tasks_per_node, job.gpus_per_node, job.constraint), (1, 2, 0, None));
        assert_eq!((job.account.as_str(), job.qos.as_str(), job.time.as_str()), ("lab", "normal", "10"));
        let gpu = SlurmRequest { gpu: Some("a100-40gb".into()), ..request("cpubox") }.resolve(&clusters(), &layout(1, 1)).unwrap_err();
        assert!(gpu.to_string().contains("CPU nodes only"), "{gpu}");
    }

    #[test]
    fn the_wire_format_is_flat_and_strict() {
        let spec: ExecutorSpec = serde_json::from_str(r#"{"kind": "slurm", "cluster": "perlmutter", "nodes": 2}"#).unwrap();
        assert_eq!(spec, ExecutorSpec::Slurm(Box::new(SlurmRequest { nodes: Some(2), ..request("perlmutter") })));
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json, serde_json::json!({"kind": "slurm", "cluster": "perlmutter", "nodes": 2}));
        let err = serde_json::from_str::<ExecutorSpec>(r#"{"kind": "slurm", "cluster": "p", "script": "rm -rf /"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `script`"), "{err}");
    }
}
