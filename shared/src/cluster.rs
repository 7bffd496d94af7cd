//! Where runs execute: the machines of `config/clusters.yaml`, with the hardware figures the
//! estimates use and the Slurm settings a batch script is rendered from.
//!
//! Slurm values end up in `#SBATCH` lines, so validation admits only plain tokens there: a
//! cluster file can never smuggle a second option or a shell word into a job script.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::{Error, Problems};

/// How a cluster starts the ranks of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// One process per rank on this machine.
    Local,
    /// A batch job submitted with `sbatch`.
    Slurm,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    pub executor: ExecutorKind,
    #[serde(default)]
    pub description: String,
    /// 0 means the ranks run on CPU cores.
    pub gpus_per_node: usize,
    /// Where the dataset lives on this cluster (relative paths: to the project root).
    pub data_root: String,
    #[serde(default)]
    pub interconnect: Option<Interconnect>,
    /// The GPU models nodes may have; a run picks one.
    #[serde(default)]
    pub gpus: Vec<GpuKind>,
    #[serde(default)]
    pub slurm: Option<SlurmDefaults>,
    /// The assumptions behind step estimates on this cluster; without them it has none.
    #[serde(default)]
    pub estimate: Option<EstimateFactors>,
}

/// Link speeds per GPU and per direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interconnect {
    /// Inside a node.
    pub nvlink_gb_per_s: f64,
    /// Between nodes.
    pub network_gb_per_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuKind {
    pub name: String,
    pub memory_gb: f64,
    pub hbm_tb_per_s: f64,
    pub peak_tflops: PeakTflops,
    /// The Slurm `--constraint` that selects nodes with this GPU.
    #[serde(default)]
    pub constraint: Option<String>,
}

/// The number format matmuls run in: what picks the peak rate and the efficiency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    /// fp32 storage, tensor-core matmuls with a 10-bit mantissa.
    Tf32,
    Fp16,
    Bf16,
}

impl Precision {
    pub const ALL: [Precision; 4] = [Precision::Fp32, Precision::Tf32, Precision::Fp16, Precision::Bf16];

    pub const fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }

    /// Whether tensors are stored in 16 bits (autocast's fp16 and bf16).
    pub const fn is_half(self) -> bool {
        matches!(self, Precision::Fp16 | Precision::Bf16)
    }
}

/// One number per precision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByPrecision {
    pub fp32: f64,
    pub tf32: f64,
    pub fp16: f64,
    pub bf16: f64,
}

impl ByPrecision {
    pub const fn get(&self, precision: Precision) -> f64 {
        match precision {
            Precision::Fp32 => self.fp32,
            Precision::Tf32 => self.tf32,
            Precision::Fp16 => self.fp16,
            Precision::Bf16 => self.bf16,
        }
    }
}

/// Dense peak rates by precision.
pub type PeakTflops = ByPrecision;

/// What the estimates assume beyond the data sheet, each a named value in the cluster file so
/// that a learner can see (and change) why an estimate says what it says. `config/clusters.yaml`
/// records where each value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateFactors {
    /// Sustained fraction of the peak rate, by matmul precision, for the GPU kinds of this
    /// cluster (one architecture).
    pub compute_efficiency: ByPrecision,
    /// Fused half-precision attention runs at the full efficiency only from this head size up;
    /// smaller heads run proportionally slower.
    pub attention_full_rate_head_dim: usize,
    /// Bus bandwidth of a large ring collective inside a node, as a fraction of the NVLink figure.
    pub nvlink_efficiency: f64,
    /// Bus bandwidth of a ring collective across nodes, as a fraction of the NICs' figure.
    pub network_efficiency: f64,
    /// Device memory used before any tensor of the model: CUDA context, cuBLAS and NCCL
    /// workspaces, allocator-cached start-up buffers (GiB).
    pub runtime_overhead_gb: f64,
    /// Extra device memory of the DALI data loader (`data_loader_config: dali`) (GiB).
    pub dali_overhead_gb: f64,
    /// Device memory the caching allocator holds per byte of activations (at least 1).
    pub allocator_factor: f64,
    /// Attention's sustained rate as a fraction of the matmuls': 1 where the compute efficiency
    /// already holds it (the GPUs, calibrated on whole runs); measured on a CPU.
    #[serde(default = "one")]
    pub attention_efficiency: f64,
    /// What each op of the forward pass costs beyond its arithmetic, its autograd record and
    /// its backward included (s). 0 on a GPU, whose CPU queues kernels ahead of it; on a CPU
    /// every op waits its turn, and a small model is mostly this.
    #[serde(default)]
    pub seconds_per_op: f64,
    /// The same for an op outside autograd (the optimizer's, tensor by tensor) (s).
    #[serde(default)]
    pub seconds_per_plain_op: f64,
    /// What one collective call costs before its bytes (s): 0 where NCCL's few microseconds
    /// vanish beside the step; Gloo between local processes, measured, is about a millisecond.
    #[serde(default)]
    pub collective_latency_s: f64,
    /// Batches each loader worker holds in the memory counted (its queue and the one it
    /// reads), where batches share that memory with the model: 0 on a GPU, whose batches wait
    /// in host memory; a CPU rank's live beside its activations.
    #[serde(default)]
    pub batches_per_worker: f64,
    /// How fast a rank's data loader reads and prepares samples: the step waits for it with 0
    /// workers, and for what the step does not hide with workers. Without it the estimate has
    /// no loader time (this machine's measurement has none yet).
    #[serde(default)]
    pub loader: Option<LoaderFactors>,
}

/// What one reader of the data loader (the training loop itself, a worker, or one of the
/// threads a Scalebook rank shares an inline batch over) costs per sample. A sample is its
/// input and target fields, `(n_in_channels + n_out_channels) × H × W` float32 values, and
/// every cost scales with those bytes: a 90 × 180 sample reads and normalises in a sixteenth
/// of the time of a 360 × 720 one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoaderFactors {
    /// The rate one reader prepares a sample at once its bytes are in host memory (the page
    /// cache), in GB/s of sample bytes: copying them out of the file, normalising, collating
    /// the batch and copying it to pinned memory.
    pub prepare_gb_per_s: f64,
    /// The rate one reader reads the bytes the page cache does not hold from the file system,
    /// GB/s, paid on top of preparing them.
    pub storage_gb_per_s: f64,
    /// Host memory per GPU that can keep the dataset's pages between epochs (GiB): the ranks
    /// of a node share the node's, and the share of the dataset it holds is read from memory.
    pub page_cache_gb_per_gpu: f64,
}

fn one() -> f64 {
    1.0
}

/// Job settings every submission starts from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmDefaults {
    pub account: String,
    /// QOS for jobs that take whole nodes.
    pub qos: String,
    /// QOS for jobs on part of one node (fewer GPUs than a node has), when it differs.
    #[serde(default)]
    pub shared_qos: Option<String>,
    #[serde(default)]
    pub reservation: Option<String>,
    /// Wall-time limit in a Slurm time format (`01:00:00`, `30`, `1-00:00:00`).
    pub time: String,
    pub cpus_per_task: usize,
    /// Container image (shifter) the ranks run in.
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub modules: Vec<String>,
}

impl Cluster {
    pub fn gpu(&self, name: &str) -> Option<&GpuKind> {
        self.gpus.iter().find(|g| g.name == name)
    }
}

/// Every cluster of a `clusters.yaml`, validated by [`Clusters::parse`]. It travels to the
/// browser as JSON (serde), already validated by the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Clusters {
    clusters: IndexMap<String, Cluster>,
}

impl Clusters {
    /// Parses and validates the file, reporting every problem at once (fields are named
    /// `cluster.path.to.key`).
    pub fn parse(text: &str) -> Result<Clusters, Error> {
        let clusters: Option<IndexMap<String, Cluster>> =
            serde_saphyr::from_str(text).map_err(|e| Error::Parse { what: "clusters file".into(), message: e.to_string() })?;
        let clusters = Clusters { clusters: clusters.unwrap_or_default() };
        let mut problems = Problems::default();
        if clusters.clusters.is_empty() {
            problems.push("clusters", "the file defines no clusters");
        }
        for (name, cluster) in &clusters.clusters {
            check_cluster(name, cluster, &mut problems);
        }
        problems.into_result(clusters)
    }

    /// Cluster names in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.clusters.keys().map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Result<&Cluster, Error> {
        self.clusters.get(name).ok_or_else(|| {
            let known = self.names().collect::<Vec<_>>().join(", ");
            Error::Invalid(Problems(vec![crate::Problem::new("cluster", format!("unknown cluster `{name}`; the file defines: {known}"))]))
        })
    }
}

fn check_cluster(name: &str, cluster: &Cluster, problems: &mut Problems) {
    let at = |key: &str| format!("{name}.{key}");
    if cluster.data_root.trim().is_empty() {
        problems.push(at("data_root"), "must not be empty");
    }
    if !cluster.gpus.is_empty() && cluster.gpus_per_node == 0 {
        problems.push(at("gpus_per_node"), "is 0 (CPU ranks) but the cluster lists GPU models");
    }
    if let Some(link) = &cluster.interconnect {
        positive(&at("interconnect.nvlink_gb_per_s"), link.nvlink_gb_per_s, problems);
        positive(&at("interconnect.network_gb_per_s"), link.network_gb_per_s, problems);
    }
    if let Some(factors) = &cluster.estimate {
        check_factors(&at("estimate"), factors, problems);
    }
    let slurm = cluster.executor == ExecutorKind::Slurm;
    for (i, gpu) in cluster.gpus.iter().enumerate() {
        let gpu_at = |key: &str| at(&format!("gpus.{}.{key}", gpu.name));
        if gpu.name.trim().is_empty() {
            problems.push(at(&format!("gpus.{i}.name")), "must not be empty");
        } else if cluster.gpus[..i].iter().any(|g| g.name == gpu.name) {
            problems.push(gpu_at("name"), format!("`{}` is listed twice", gpu.name));
        }
        positive(&gpu_at("memory_gb"), gpu.memory_gb, problems);
        positive(&gpu_at("hbm_tb_per_s"), gpu.hbm_tb_per_s, problems);
        for precision in Precision::ALL {
            positive(&gpu_at(&format!("peak_tflops.{}", precision.name())), gpu.peak_tflops.get(precision), problems);
        }
        match &gpu.constraint {
            Some(constraint) => token(&gpu_at("constraint"), constraint, problems),
            None if slurm => problems.push(gpu_at("constraint"), "is required on a slurm cluster (it selects the nodes)"),
            None => {}
        }
    }
    match (&cluster.slurm, slurm) {
        (Some(defaults), true) => check_slurm(&at("slurm"), defaults, problems),
        (None, true) => problems.push(at("slurm"), "is required when executor is slurm"),
        (Some(_), false) => problems.push(at("slurm"), "only applies to executor slurm"),
        (None, false) => {}
    }
    // A slurm cluster of CPU nodes (`gpus_per_node: 0`, no GPU models) is valid: ranks are
    // CPU tasks, as on the one-node test cluster. One with GPUs needs their models and links.
    if slurm && (cluster.gpus_per_node > 0 || !cluster.gpus.is_empty()) {
        if cluster.gpus.is_empty() {
            problems.push(at("gpus"), "a slurm cluster with GPUs needs at least one GPU model");
        }
        if cluster.interconnect.is_none() {
            problems.push(at("interconnect"), "a slurm cluster with GPUs needs its link speeds");
        }
    }
}

fn check_factors(at: &str, factors: &EstimateFactors, problems: &mut Problems) {
    let field = |key: &str| format!("{at}.{key}");
    let fractions =
        Precision::ALL.map(|p| (format!("compute_efficiency.{}", p.name()), factors.compute_efficiency.get(p))).into_iter().chain([
            ("nvlink_efficiency".to_owned(), factors.nvlink_efficiency),
            ("network_efficiency".to_owned(), factors.network_efficiency),
        ]);
    for (key, value) in fractions {
        if !(value > 0.0 && value <= 1.0) {
            problems.push(field(&key), format!("must be a fraction in (0, 1], got {value}"));
        }
    }
    if factors.attention_full_rate_head_dim == 0 {
        problems.push(field("attention_full_rate_head_dim"), "must be at least 1, got 0");
    }
    for (key, value) in [("runtime_overhead_gb", factors.runtime_overhead_gb), ("dali_overhead_gb", factors.dali_overhead_gb)] {
        if !(value.is_finite() && value >= 0.0) {
            problems.push(field(key), format!("must be a number of GiB, 0 or more, got {value}"));
        }
    }
    if !(factors.allocator_factor.is_finite() && factors.allocator_factor >= 1.0) {
        problems.push(field("allocator_factor"), format!("must be at least 1, got {}", factors.allocator_factor));
    }
    if let Some(loader) = &factors.loader {
        positive(&field("loader.prepare_gb_per_s"), loader.prepare_gb_per_s, problems);
        positive(&field("loader.storage_gb_per_s"), loader.storage_gb_per_s, problems);
        if !(loader.page_cache_gb_per_gpu.is_finite() && loader.page_cache_gb_per_gpu >= 0.0) {
            problems.push(
                field("loader.page_cache_gb_per_gpu"),
                format!("must be a number of GiB, 0 or more, got {}", loader.page_cache_gb_per_gpu),
            );
        }
    }
}

fn check_slurm(at: &str, slurm: &SlurmDefaults, problems: &mut Problems) {
    let field = |key: &str| format!("{at}.{key}");
    token(&field("account"), &slurm.account, problems);
    token(&field("qos"), &slurm.qos, problems);
    let optional = [("shared_qos", &slurm.shared_qos), ("reservation", &slurm.reservation), ("image", &slurm.image)];
    for (key, value) in optional {
        if let Some(value) = value {
            token(&field(key), value, problems);
        }
    }
    for module in &slurm.modules {
        token(&field("modules"), module, problems);
    }
    if !is_slurm_time(&slurm.time) {
        problems.push(field("time"), format!("`{}` is not a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS, not zero)", slurm.time));
    }
    if slurm.cpus_per_task == 0 {
        problems.push(field("cpus_per_task"), "must be at least 1, got 0");
    }
}

fn positive(field: &str, value: f64, problems: &mut Problems) {
    if !(value.is_finite() && value > 0.0) {
        problems.push(field, format!("must be a positive number, got {value}"));
    }
}

/// Characters Slurm names, constraints (`gpu&hbm80g`), images (`nersc/pytorch:24.08.01`) and
/// module names need; no spaces, quotes, `$`, `;` or newlines.
fn token(field: &str, value: &str, problems: &mut Problems) {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.,:&|/+=@".contains(c);
    if value.is_empty() || !value.chars().all(allowed) {
        problems.push(field, format!("`{value}` must be one non-empty word of letters, digits and -_.,:&|/+=@"));
    }
}

/// Slurm's `--time` forms: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, not all zero.
pub(crate) fn is_slurm_time(text: &str) -> bool {
    let (days, rest) = match text.split_once('-') {
        Some((days, rest)) => (Some(days), rest),
        None => (None, text),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let shape_ok = match days {
        Some(d) => numeric(d) && parts.len() <= 3,
        None => parts.len() <= 3,
    };
    // After the leading part, minutes and seconds are below 60.
    let ranges_ok = parts.iter().skip(1).all(|p| p.parse::<u32>().is_ok_and(|v| v < 60));
    let nonzero = days.into_iter().chain(parts.iter().copied()).any(|p| p.bytes().any(|b| b != b'0'));
    shape_ok && parts.iter().all(|p| numeric(p)) && ranges_ok && nonzero
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_slurm_time_forms() {
        for ok in ["30", "00:30:00", "1:00:00", "90:00", "1-00", "2-12:00", "1-00:00:00"] {
            assert!(is_slurm_time(ok), "{ok}");
        }
        for bad in ["", "00:00:00", "1:2:3:4", "1h", "01:60:00", "-1", "1-", "a-01:00:00", "01::00"] {
            assert!(!is_slurm_time(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_reject_shell_and_option_syntax() {
        let mut problems = Problems::default();
        for ok in ["gpu&hbm80g", "nersc/pytorch:24.08.01", "trn011", "nccl-plugin"] {
            token("f", ok, &mut problems);
        }
        assert!(problems.is_empty(), "{problems}");
        for bad in ["", "a b", "x;rm", "$HOME", "a\n#SBATCH", "'q'"] {
            token("f", bad, &mut problems);
        }
        assert_eq!(problems.0.len(), 6);
    }
}
