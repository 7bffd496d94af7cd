//! This machine as a step estimate sees it, for runs whose ranks compute on CPU cores: the
//! rates a rank reaches with a given number of threads, measured once by the trainer
//! (`scalebook-train machine`, libtorch's own kernels at the model's shapes) and cached, so
//! that local runs get a prediction from the same model as GPU runs.

use serde::{Deserialize, Serialize};

use crate::cluster::{ByPrecision, Cluster, EstimateFactors, ExecutorKind, GpuKind, Interconnect};
use crate::config::TrainConfig;
use crate::error::{Error, Problems};
use crate::estimate::{Prediction, STATED_ERROR};

/// The file a measurement is cached in (in the runs directory).
pub const FILE: &str = "machine.json";

/// The attention shapes its rate is measured at, (tokens, head size): cpu_tiny's 72 tokens in
/// heads of 12, cpu_short's 450 in heads of 32. A config takes the one nearest its tokens.
pub const ATTENTION_SHAPES: [(u64, u64); 2] = [(72, 12), (450, 32)];

/// Resident memory per byte of the activations the backward pass keeps, on a CPU rank: the
/// activations' gradients and the backward's temporaries live beside them at the peak, and the
/// heap keeps what they freed (the trainer asks malloc to, so no step returns memory to the
/// system only to ask for it again). Calibrated once, on cpu_short at 1 rank without loader
/// workers (0.52 GiB peak resident set on this project's 2-core machine: BENCHMARKS.md), and
/// used unchanged elsewhere.
const CPU_ALLOCATOR_FACTOR: f64 = 2.3;

/// What a training process holds beyond the measured baseline (libtorch loaded, a model
/// built) before any activation: HDF5 and its chunk caches, the loader's and the collectives'
/// threads, the event writer. Calibrated once, on cpu_tiny at 1 rank, whose activations are a
/// few MB (0.164 GiB peak: BENCHMARKS.md).
const TRAINER_EXTRA_GB: f64 = 0.035;

/// The batches' worth of memory each loader worker holds at the peak: its queue, the batch it
/// assembles and the samples it reads and normalises on the way, in a heap of its own that
/// keeps what they freed. Calibrated once, on cpu_short at 1 rank with 1, 2 and 4 workers
/// (0.15 GiB more per worker, at 0.019 GiB a batch: BENCHMARKS.md).
const CPU_BATCHES_PER_WORKER: f64 = 7.7;

/// The embedding widths the matrix-multiply rate is measured at: the CPU configs' (cpu_tiny
/// 48, cpu_short 128) and the tutorial's (384). A config between them takes the nearer one's
/// rate on a log scale.
pub const WIDTHS: [u64; 3] = [48, 128, 384];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineModel {
    /// Cores the trainer may use (`available_parallelism`).
    pub cores: usize,
    /// The machine's memory, GiB: what a run must fit in.
    pub memory_gb: f64,
    /// Resident memory of a trainer process once libtorch is loaded and a model built, GiB.
    pub process_baseline_gb: f64,
    /// One entry per thread count measured (1 and all cores).
    pub by_threads: Vec<ThreadRates>,
    /// What one all-reduce between two local ranks costs before its bytes (Gloo over the
    /// loopback): a 4 KiB message's time, s.
    pub collective_latency_s: f64,
    /// Bus bandwidth of a large all-reduce between two local ranks, GB/s.
    pub collective_gb_per_s: f64,
    /// Unix time of the measurement.
    pub measured_at: u64,
    /// The machine's one-minute load average as the measurement began: other work on the cores
    /// takes from every rate measured, so a measurement made on a busy machine is made again
    /// once it is idle ([`MachineModel::contention`]).
    #[serde(default)]
    pub load_at_measurement: Option<f64>,
}

/// The least share of its threads' time a measurement may have had on the cores
/// ([`ThreadRates::cpu_share`]) to stand for the machine: below it, other work took the rest.
pub const MIN_CPU_SHARE: f64 = 0.8;

/// How much slower all cores may measure than one thread before the measurement is taken for
/// contention rather than the machine (more threads are never slower on an idle machine; a
/// little noise is allowed).
pub const MAX_THREAD_SLOWDOWN: f64 = 0.9;

/// What one rank reaches with `threads` intra-op threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRates {
    pub threads: usize,
    /// float32 matrix-multiply GFLOP/s of a `[tokens, D] x [D, 4D]` product, one per
    /// [`WIDTHS`] entry.
    pub matmul_gflops: Vec<f64>,
    /// Scaled-dot-product attention, forward and backward, GFLOP/s (counting 4·T²·d forward
    /// and twice that backward), one per [`ATTENTION_SHAPES`] entry.
    pub attention_gflops: Vec<f64>,
    /// Bytes read plus bytes written per second by a large tensor copy, GB/s.
    pub copy_gb_per_s: f64,
    /// The cost of one tiny op (dispatch and call), µs.
    pub op_overhead_us: f64,
    /// The cost of one op of a training step on tiny tensors, µs: the op, the autograd node it
    /// records and its backward, per op of the forward pass. What a step of many small ops pays
    /// beyond its arithmetic.
    pub step_op_us: f64,
    /// The share of its threads' time the widest matrix product got on the cores while it was
    /// measured: the process's CPU time over the wall time and the threads. About 1 on an idle
    /// machine; other work on the cores takes the rest (a load average, lagging by a minute,
    /// can miss it). `None` in measurements made before it was recorded.
    #[serde(default)]
    pub cpu_share: Option<f64>,
}

/// Whether a load average is more than half the cores busy with other work.
pub fn is_busy(load: f64, cores: usize) -> bool {
    load > 0.5 * cores as f64
}

/// Why a local run's steady speed says the model it was predicted from is wrong, if it does:
/// off its prediction by more than the estimate's stated error, on a run that launched on an
/// idle machine (on a busy one the load explains a slow run, and the page says so).
pub fn refuted_by(prediction: &Prediction, samples_per_sec: f64) -> Option<String> {
    let launched_idle = prediction.load_at_launch.is_some_and(|load| !is_busy(load.one_minute, load.cores));
    let predicted = prediction.estimate.samples_per_sec;
    let ratio = samples_per_sec / predicted;
    (launched_idle && predicted > 0.0 && (ratio - 1.0).abs() > STATED_ERROR)
        .then(|| format!("a run measured {samples_per_sec:.3} samples/s against {predicted:.3} predicted ({ratio:.2} of it)"))
}

impl MachineModel {
    /// Why the measurement reads other work on the cores rather than the machine, if it does:
    /// a busy load average as it began (or none recorded), a thread count that had less than
    /// [`MIN_CPU_SHARE`] of its time, or every core slower than one thread. Such a model serves
    /// until the machine is idle, then is measured again.
    pub fn contention(&self) -> Option<String> {
        match self.load_at_measurement {
            None => return Some("the load as it was measured is not recorded".into()),
            Some(load) if is_busy(load, self.cores) => return Some(format!("measured at a load of {load:.2} on {} cores", self.cores)),
            Some(_) => {}
        }
        if let Some(r) = self.by_threads.iter().find(|r| r.cpu_share.is_none_or(|share| share < MIN_CPU_SHARE)) {
            return Some(match r.cpu_share {
                Some(share) => {
                    format!("{} thread(s) had {:.0}% of their time on the cores: other work took the rest", r.threads, 100.0 * share)
                }
                None => "the cores' share of the measurement is not recorded".into(),
            });
        }
        let widest = |r: &ThreadRates| r.matmul_gflops.last().copied().unwrap_or(0.0);
        let (first, last) = (self.by_threads.first()?, self.by_threads.last()?);
        (last.threads > first.threads && widest(last) < MAX_THREAD_SLOWDOWN * widest(first)).then(|| {
            format!(
                "{} threads measured slower than 1 ({:.0} against {:.0} GFLOP/s): other work on the cores",
                last.threads,
                widest(last),
                widest(first)
            )
        })
    }

    /// The rates of the measured thread count nearest `threads` (from below where it can).
    pub fn rates(&self, threads: usize) -> Option<&ThreadRates> {
        self.by_threads.iter().filter(|r| r.threads <= threads.max(1)).max_by_key(|r| r.threads).or_else(|| self.by_threads.first())
    }
}

impl MachineModel {
    /// This machine as an estimate's cluster and device for `config` on `world` ranks: each
    /// rank computes at the rate its share of the cores reaches, at the model's width and the
    /// tokens a rank holds (its context-parallel chunk).
    pub fn for_run(&self, config: &TrainConfig, world: usize) -> Result<(Cluster, GpuKind), Error> {
        let derived = config.derived(world, None)?;
        let tokens = derived.cp_split.iter().copied().max().unwrap_or(derived.tokens_per_sample) as u64;
        self.as_cluster(world, config.embed_dim as u64, tokens)
    }

    /// This machine as an estimate's cluster and device, for `ranks` ranks on its cores (the
    /// launcher gives each `cores / ranks` threads) running a model `width` wide with `tokens`
    /// tokens per rank: the measured rates stand where a GPU's data sheet and calibrated
    /// efficiencies stand, so that every rate is sustained at an efficiency of one. A
    /// measurement without rates is refused rather than predicted from made-up ones.
    ///
    /// bf16 and fp16 take the float32 rate: CPU autocast runs without matrix units for half
    /// precision on most machines, and nothing here measures it yet.
    fn as_cluster(&self, ranks: usize, width: u64, tokens: u64) -> Result<(Cluster, GpuKind), Error> {
        let threads = (self.cores / ranks.max(1)).max(1);
        let Some(rates) = self.rates(threads) else {
            let mut problems = Problems::default();
            problems.push("machine", "the measurement holds no rates; measure again with `scalebook-train machine`");
            return Err(Error::Invalid(problems));
        };
        let matmul = rates.matmul_flops(width);
        let tflops = matmul / 1e12;
        let all = |v: f64| ByPrecision { fp32: v, tf32: v, fp16: v, bf16: v };
        let gpu = GpuKind {
            name: format!("this machine's CPU ({threads} thread(s) per rank)"),
            memory_gb: self.memory_gb / ranks.max(1) as f64,
            hbm_tb_per_s: rates.copy_gb_per_s / 1e3,
            peak_tflops: all(tflops),
            constraint: None,
        };
        let link = self.collective_gb_per_s;
        let cluster = Cluster {
            executor: ExecutorKind::Local,
            description: "This machine's cores, as measured by `scalebook-train machine`".into(),
            gpus_per_node: ranks.max(1),
            data_root: String::new(),
            interconnect: Some(Interconnect { nvlink_gb_per_s: link, network_gb_per_s: link }),
            gpus: vec![gpu.clone()],
            slurm: None,
            estimate: Some(EstimateFactors {
                compute_efficiency: all(1.0),
                attention_full_rate_head_dim: 1,
                nvlink_efficiency: 1.0,
                network_efficiency: 1.0,
                runtime_overhead_gb: self.process_baseline_gb + TRAINER_EXTRA_GB,
                dali_overhead_gb: 0.0,
                allocator_factor: CPU_ALLOCATOR_FACTOR,
                attention_efficiency: if matmul > 0.0 { rates.attention_flops(tokens) / matmul } else { 1.0 },
                seconds_per_op: rates.step_op_us * 1e-6,
                seconds_per_plain_op: rates.op_overhead_us * 1e-6,
                collective_latency_s: self.collective_latency_s,
                batches_per_worker: CPU_BATCHES_PER_WORKER,
                // The measurement has no loader rates yet (it would take `scalebook-train
                // machine` reading the run's files), so a CPU run's estimate has no loader time.
                loader: None,
            }),
        };
        Ok((cluster, gpu))
    }
}

impl ThreadRates {
    /// The matrix-multiply rate for embedding width `width`, FLOP/s: the measured width
    /// nearest it on a log scale.
    pub fn matmul_flops(&self, width: u64) -> f64 {
        let nearest = WIDTHS
            .iter()
            .zip(&self.matmul_gflops)
            .min_by(|a, b| log_distance(*a.0, width).total_cmp(&log_distance(*b.0, width)))
            .map_or(0.0, |(_, rate)| *rate);
        nearest * 1e9
    }
}

impl ThreadRates {
    /// The attention rate for `tokens` tokens, FLOP/s: the measured shape nearest it.
    pub fn attention_flops(&self, tokens: u64) -> f64 {
        let nearest = ATTENTION_SHAPES
            .iter()
            .zip(&self.attention_gflops)
            .min_by(|a, b| log_distance(a.0.0, tokens).total_cmp(&log_distance(b.0.0, tokens)))
            .map_or(0.0, |(_, rate)| *rate);
        nearest * 1e9
    }
}

fn log_distance(a: u64, b: u64) -> f64 {
    ((a.max(1) as f64).ln() - (b.max(1) as f64).ln()).abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> MachineModel {
        let rates = |threads, scale| ThreadRates {
            threads,
            matmul_gflops: vec![10.0 * scale, 40.0 * scale, 60.0 * scale],
            attention_gflops: vec![5.0 * scale, 20.0 * scale],
            copy_gb_per_s: 8.0,
            op_overhead_us: 3.0,
            step_op_us: 12.0,
            cpu_share: Some(0.97),
        };
        MachineModel {
            cores: 4,
            memory_gb: 16.0,
            process_baseline_gb: 0.3,
            by_threads: vec![rates(1, 1.0), rates(4, 3.0)],
            collective_latency_s: 1e-4,
            collective_gb_per_s: 1.2,
            measured_at: 0,
            load_at_measurement: Some(0.3),
        }
    }

    #[test]
    fn a_measurement_that_had_to_share_the_cores_says_so() {
        assert_eq!(model().contention(), None);
        let said = |m: MachineModel| m.contention().unwrap_or_default();
        assert!(said(MachineModel { load_at_measurement: Some(2.5), ..model() }).contains("load of 2.50 on 4 cores"));
        assert!(said(MachineModel { load_at_measurement: None, ..model() }).contains("not recorded"), "an old cache that did not say");
        // A load average of an idle machine, but a thread that got 60% of its time...
        let mut shared = model();
        shared.by_threads[0].cpu_share = Some(0.6);
        assert!(said(shared).contains("1 thread(s) had 60% of their time"));
        // ...or every core slower than one thread: the cores were not the measurement's alone.
        let mut slower = model();
        slower.by_threads[1].matmul_gflops = vec![8.0, 30.0, 50.0];
        assert!(said(slower).contains("4 threads measured slower than 1 (50 against 60 GFLOP/s)"));
    }

    #[test]
    fn a_rank_gets_the_rates_of_its_thread_count_or_the_next_below() {
        let m = model();
        assert_eq!(m.rates(1).unwrap().threads, 1);
        assert_eq!(m.rates(2).unwrap().threads, 1);
        assert_eq!(m.rates(4).unwrap().threads, 4);
        assert_eq!(m.rates(0).unwrap().threads, 1);
    }

    #[test]
    fn a_width_takes_the_nearest_measured_one_on_a_log_scale() {
        let r = model().rates(1).unwrap().clone();
        assert_eq!(r.matmul_flops(48), 10e9);
        assert_eq!(r.matmul_flops(100), 40e9);
        assert_eq!(r.matmul_flops(1024), 60e9);
        assert_eq!(r.matmul_flops(70), 10e9, "70 is nearer 48 than 128 on a log scale");
        assert_eq!((r.attention_flops(72), r.attention_flops(4050)), (5e9, 20e9));
    }

    /// A prediction for cpu_short on one rank of [`model`], launched at `load`.
    fn prediction(load: f64) -> Prediction {
        let config = crate::config::ConfigFile::parse(include_str!("../shipped/ViT.yaml")).unwrap().get("cpu_short").unwrap();
        let (cluster, gpu) = model().for_run(&config, 1).unwrap();
        let estimate = crate::estimate::estimate(&config, &config.layout(1).unwrap(), &cluster, &gpu, &Default::default()).unwrap();
        let load_at_launch = Some(crate::estimate::Load { one_minute: load, cores: 4 });
        Prediction { made_at: 1, basis: String::new(), estimate, load_at_launch }
    }

    #[test]
    fn a_run_far_from_its_prediction_on_an_idle_machine_refutes_the_model() {
        let idle = prediction(0.3);
        let predicted = idle.estimate.samples_per_sec;
        assert_eq!(refuted_by(&idle, predicted * 1.2), None, "within the stated error");
        assert_eq!(refuted_by(&idle, predicted * 0.8), None);
        assert!(refuted_by(&idle, predicted * 2.0).unwrap().contains("(2.00 of it)"));
        assert!(refuted_by(&idle, predicted * 0.5).is_some(), "slower counts too");
        assert_eq!(refuted_by(&prediction(3.0), predicted * 0.5), None, "a busy launch explains a slow run");
        let unknown = Prediction { load_at_launch: None, ..idle };
        assert_eq!(refuted_by(&unknown, predicted * 0.5), None, "a Slurm run's prediction is not this machine's");
    }

    #[test]
    fn a_measurement_without_rates_is_refused_not_made_up() {
        let empty = MachineModel { by_threads: Vec::new(), ..model() };
        let err = empty.as_cluster(2, 128, 450).unwrap_err().to_string();
        assert!(err.starts_with("machine: "), "{err}");
        let (_, gpu) = model().as_cluster(2, 128, 450).unwrap();
        assert_eq!(gpu.peak_tflops.fp32, 0.04, "two ranks on four cores take the rates of the 1-thread entry below 2");
    }
}
