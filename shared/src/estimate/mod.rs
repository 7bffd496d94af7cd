//! An analytic model of one training step of the tutorial's ViT, for a config, a layout and a
//! GPU of a cluster: parameters and their split over tp, FLOPs, memory per GPU by part, every
//! collective with its bytes, link and time, the data loader's reading and how much of it the
//! step waits for, the step time and samples/s, and whether it fits.
//!
//! Learners use it to choose a layout before spending GPU hours, so every number it uses is a
//! named value (hardware figures and the `estimate` factors of `config/clusters.yaml`, or a
//! documented constant here), and [`Estimate::terms`] lists them all with what they produced.
//! The model reproduces the tutorial's published memory and throughput figures (reference §10);
//! `BENCHMARKS.md` compares them.
//!
//! Units: memory in GiB (2³⁰ bytes), because the tutorial's NVML log lines divide by 1024³ and
//! say "GB"; bandwidths in GB/s (10⁹ bytes) and rates in TFLOP/s, as data sheets give them.

mod comms;
mod compare;
mod flops;
mod loader;
mod memory;
mod params;
mod pipeline;
mod stage;
mod step;
mod terms;

pub use comms::{Collective, GroupTraffic, Link, Operation, Phase};
pub(crate) use comms::{FoundLinks, Network};
pub use compare::{Comparison, Measured, STATED_ERROR};
pub use flops::{Flops, RankFlops};
pub use memory::{MemoryBreakdown, RecomputeWhatIf, SavedTensor, ZeroWhatIf};
pub use params::ParamSplit;
pub use pipeline::{Lifetime, PipelineEstimate, StageEstimate};
pub use step::StepTime;
pub use terms::{Term, TermKind};

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, EstimateFactors, GpuKind, Interconnect, Precision};
use crate::config::{AmpMode, DataLoaderKind, Derived, MLP_RATIO, ParamCount, TrainConfig};
use crate::layout::{Layout, Placement, Sizes};
use crate::pipeline::Schedule;
use crate::{Error, Problems};

/// Bytes per GiB.
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Bytes of an fp32 element: the residual stream (the position embedding is an fp32
/// parameter), LayerNorm under autocast, the parameters AMP keeps, and whatever the
/// distributed layers' fp32 bias adds produce.
const FP32: f64 = 4.0;

/// Choices that are not part of the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EstimateOptions {
    /// TF32 matmuls for fp32 runs (`amp_mode: none`), as the trainer (and the tutorial's
    /// container) does by default; off is the tutorial's `NVIDIA_TF32_OVERRIDE=0`.
    pub tf32: bool,
    /// DDP overlaps the gradient all-reduce with the backward pass (PyTorch's behaviour);
    /// off shows what a synchronous all-reduce after the backward pass would cost.
    pub overlap_dp: bool,
}

impl Default for EstimateOptions {
    fn default() -> Self {
        Self { tf32: true, overlap_dp: true }
    }
}

/// One step of one run, estimated. Its JSON form is what `scalebook estimate --json` prints.
///
/// With a pipeline (pp > 1) one rank holds one stage: `params`, `memory_gb` and
/// `saved_activations` are the heaviest stage's (the run fits when it does), `flops`,
/// `collectives` and `time` the slowest stage's (it sets the pace), and `pipeline` has them all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub layout: Layout,
    pub gpu: String,
    pub precision: Precision,
    pub world: u32,
    pub local_batch_size: u64,
    pub global_batch_size: u64,
    /// Slices the local batch runs through forward and backward in: `num_micro_batches` with a
    /// pipeline, `gradient_accumulation_steps` without.
    #[serde(default = "one")]
    pub micro_batches: u64,
    /// `zero_stage`: what dp shards; `memory_gb` and `collectives` follow it.
    #[serde(default)]
    pub zero_stage: u8,
    /// The schedule, its bubble and every stage, when the run pipelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<PipelineEstimate>,
    /// Tokens of the largest cp chunk: the rank that sets the pace.
    pub tokens_per_rank: u64,
    pub params: ParamSplit,
    pub flops: Flops,
    pub memory_gb: MemoryBreakdown,
    /// The GPU's memory: the run fits when `memory_gb.total` is at most this.
    pub memory_limit_gb: f64,
    pub fits: bool,
    pub saved_activations: Vec<SavedTensor>,
    /// The same run under each ZeRO stage 0–3, for comparison (the tutorial runs stage 0).
    pub zero_what_if: Vec<ZeroWhatIf>,
    /// The same run with `activation_checkpointing` switched the other way.
    pub recompute_what_if: RecomputeWhatIf,
    pub collectives: Vec<Collective>,
    pub time: StepTime,
    pub step_time_s: f64,
    pub samples_per_sec: f64,
    /// FLOPs one GPU computes per second of step time (model FLOPs, not hardware counters).
    pub tflops_per_gpu: f64,
    terms: Vec<Term>,
}

fn one() -> u64 {
    1
}

impl Estimate {
    /// Every input, intermediate and result, named, with unit and origin.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// Bytes and time per step for each rank group, for the rank grid.
    pub fn by_group(&self) -> Vec<GroupTraffic> {
        comms::by_group(&self.collectives)
    }
}

/// What a run was predicted to do, recorded at launch (`rundir::PREDICTION`): the estimate of
/// one step on the hardware the run was sent to, and what that hardware was taken to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Unix time the prediction was made (before the run started).
    pub made_at: u64,
    /// The hardware in words: a cluster's GPU, or this machine's cores as measured.
    pub basis: String,
    pub estimate: Estimate,
    /// For a run on this machine: what else was running as it launched, which a prediction
    /// for an idle machine cannot know (the 1-minute load average, and the cores it is over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_at_launch: Option<Load>,
}

/// The machine's load as a run launched.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Runnable processes, averaged over the last minute (`/proc/loadavg`).
    pub one_minute: f64,
    pub cores: usize,
}

/// Estimates one step of `config` laid out as `layout` on `gpu` of `cluster`.
///
/// The layout must agree with the config's `tensor_parallel`, `context_parallel`,
/// `pipeline_parallel` and `parallel_order`. Every problem with the config, the layout and the
/// cluster is reported at once.
pub fn estimate(
    config: &TrainConfig,
    layout: &Layout,
    cluster: &Cluster,
    gpu: &GpuKind,
    options: &EstimateOptions,
) -> Result<Estimate, Error> {
    estimate_with(config, layout, cluster, gpu, options, true)
}

fn estimate_with(
    config: &TrainConfig,
    layout: &Layout,
    cluster: &Cluster,
    gpu: &GpuKind,
    options: &EstimateOptions,
    with_terms: bool,
) -> Result<Estimate, Error> {
    let mut problems = Problems::default();
    let derived = derived(config, layout, &mut problems)?;
    let inputs = cluster_inputs(cluster, &mut problems);
    let (Some(derived), Some((links, factors, placement))) = (derived, inputs) else {
        return Err(Error::Invalid(problems));
    };
    if !problems.is_empty() {
        return Err(Error::Invalid(problems));
    }
    let network = Network::new(layout, placement, links, factors);
    Ok(estimate_on(config, &derived, &network, cluster, gpu, options, with_terms))
}

/// The links of `layout`'s groups on `cluster` (from `found` where a layout before had them),
/// for the estimates of one layout with other micro-batches ([`estimate_on_network`]): the
/// layout search makes thousands.
pub(crate) fn network<'a>(layout: &'a Layout, cluster: &'a Cluster, found: &mut FoundLinks) -> Result<Network<'a>, Error> {
    let mut problems = Problems::default();
    let Some((links, factors, placement)) = cluster_inputs(cluster, &mut problems) else {
        return Err(Error::Invalid(problems));
    };
    Ok(Network::found(layout, placement, links, factors, found))
}

/// [`estimate`] of `config` on the layout and cluster `network` was found for, without its
/// terms ([`Estimate::terms`] is empty): wording every term costs more than the rest of the
/// estimate, and the layout search makes thousands and reads none.
pub(crate) fn estimate_on_network(
    config: &TrainConfig,
    network: &Network<'_>,
    cluster: &Cluster,
    gpu: &GpuKind,
    options: &EstimateOptions,
) -> Result<Estimate, Error> {
    let mut problems = Problems::default();
    match derived(config, network.layout, &mut problems)? {
        Some(derived) if problems.is_empty() => Ok(estimate_on(config, &derived, network, cluster, gpu, options, false)),
        _ => Err(Error::Invalid(problems)),
    }
}

/// The config's derived values for the layout's world, its problems and the layout's own
/// gathered in `problems` (`None` when the config is invalid there).
fn derived(config: &TrainConfig, layout: &Layout, problems: &mut Problems) -> Result<Option<Derived>, Error> {
    let derived = match config.derived(layout.world() as usize, None) {
        Ok(derived) => Some(derived),
        Err(Error::Invalid(found)) => {
            problems.0.extend(found.0);
            None
        }
        Err(other) => return Err(other),
    };
    check_layout(config, layout, problems);
    Ok(derived)
}

/// One step of a valid `config` on `network`'s layout.
fn estimate_on(
    config: &TrainConfig,
    derived: &Derived,
    network: &Network<'_>,
    cluster: &Cluster,
    gpu: &GpuKind,
    options: &EstimateOptions,
    with_terms: bool,
) -> Estimate {
    let (layout, factors) = (network.layout, network.factors);
    let precision = precision(config, options);
    let shape = Shape::new(config, derived, precision);
    let rates = step::rates(&shape, gpu, factors);
    let threads = cluster.slurm.as_ref().map_or(1, |s| s.cpus_per_task) as u64;
    let loader = loader::loader(&shape, factors.loader.as_ref(), cluster.gpus_per_node as u64, threads);
    let context = stage::Context {
        net: network,
        rates: &rates,
        factors,
        loader: loader.as_ref(),
        overlap_dp: options.overlap_dp,
        memory_limit_gb: gpu.memory_gb,
    };
    let staged = stage::staged(&shape, &context);
    let time = staged.time;
    let mut estimate = Estimate {
        layout: layout.clone(),
        gpu: gpu.name.clone(),
        precision,
        world: layout.world(),
        local_batch_size: shape.local_batch,
        global_batch_size: shape.global_batch,
        micro_batches: shape.micro_batches,
        zero_stage: shape.zero_stage,
        pipeline: staged.pipeline,
        tokens_per_rank: shape.tokens_local,
        params: staged.params,
        flops: staged.flops,
        fits: staged.memory.total <= gpu.memory_gb,
        memory_gb: staged.memory,
        memory_limit_gb: gpu.memory_gb,
        saved_activations: staged.saved,
        zero_what_if: staged.zero_what_if,
        recompute_what_if: staged.recompute_what_if,
        collectives: staged.collectives,
        step_time_s: time.total_s,
        samples_per_sec: shape.global_batch as f64 / time.total_s,
        tflops_per_gpu: staged.flops.rank_step.total() / time.total_s / 1e12,
        time,
        terms: Vec::new(),
    };
    if with_terms {
        let mut terms = terms::inputs(gpu, &network.links, factors, &estimate);
        terms.extend(terms::outputs(&estimate, &rates, loader.as_ref()));
        estimate.terms = terms;
    }
    estimate
}

/// The matmul precision `config` trains in, as the trainer picks it.
fn precision(config: &TrainConfig, options: &EstimateOptions) -> Precision {
    match config.amp_mode {
        AmpMode::Fp16 => Precision::Fp16,
        AmpMode::Bf16 => Precision::Bf16,
        AmpMode::None if options.tf32 => Precision::Tf32,
        AmpMode::None => Precision::Fp32,
    }
}

/// What a run asks whatever machine runs it: the model's own part of the
/// estimate, without a cluster's factors (runtime, allocator cache), so that the page can
/// bound a learner's run before it knows the machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLoad {
    /// One rank's weights, gradients, Adam's moments and activations saved for backward (bytes).
    pub memory_bytes: f64,
    /// FLOPs of one sample on one rank (forward and backward): the ranks a run may have and
    /// the samples it trains on are bounded apart, so a larger batch over fewer steps, as the
    /// large-batch chapter sweeps, asks no more of the machine than the steps it replaces.
    pub flops_per_sample: f64,
    /// Ops of one step (forward with backward, and the optimizer's): on a CPU a deep, narrow
    /// model's step is mostly these, whatever its FLOPs.
    pub ops_per_step: f64,
}

/// The [`RunLoad`] of `config` on `world` ranks, from the same model [`estimate`] uses.
pub fn run_load(config: &TrainConfig, world: u32) -> Result<RunLoad, Error> {
    let derived = config.derived(world as usize, None)?;
    let shape = Shape::new(config, &derived, precision(config, &EstimateOptions::default()));
    let params = ParamSplit::of(&shape);
    let state = 4.0 * FP32 * params.per_rank as f64;
    let activations = memory::activation_bytes(&shape, &memory::saved_tensors(&shape), pipeline::Held::ONE);
    let ops = step::ops(&shape);
    Ok(RunLoad {
        memory_bytes: state + activations,
        flops_per_sample: Flops::of(&shape).rank_step.total() / derived.local_batch_size.max(1) as f64,
        ops_per_step: ops.forward + ops.optimizer,
    })
}

/// The layout must be the one the config describes, so that the estimate and a launch agree.
fn check_layout(config: &TrainConfig, layout: &Layout, problems: &mut Problems) {
    let Sizes { tp, cp, pp, dp } = layout.sizes();
    let pairs = [
        ("tensor_parallel", config.tensor_parallel, tp, "tp"),
        ("context_parallel", config.context_parallel, cp, "cp"),
        ("pipeline_parallel", config.pipeline_parallel, pp, "pp"),
    ];
    for (field, in_config, in_layout, dim) in pairs {
        if in_config != in_layout as usize {
            problems.push(field, format!("is {in_config} in the config but the layout has {dim} {in_layout}"));
        }
    }
    let config_order = Layout::new(Sizes { tp, cp, dp, pp }, &config.parallel_order);
    if let Ok(config_order) = config_order
        && config_order.effective_order() != layout.effective_order()
    {
        problems.push(
            "parallel_order",
            format!("is `{}` in the config but the layout's order is `{}`", config.parallel_order, layout.effective_order()),
        );
    }
}

/// The cluster's link speeds, estimate factors and node size, or the problems why it has none.
fn cluster_inputs<'c>(cluster: &'c Cluster, problems: &mut Problems) -> Option<(Interconnect, &'c EstimateFactors, Placement)> {
    let placement = Placement::new(cluster.gpus_per_node as u32).ok();
    if placement.is_none() {
        problems.push("cluster", "runs ranks on CPU cores (gpus_per_node 0); estimates model GPU clusters");
    }
    if cluster.interconnect.is_none() {
        problems.push("cluster", "has no `interconnect` link speeds, which estimates need");
    }
    if cluster.estimate.is_none() {
        problems.push("cluster", "has no `estimate` section with the factors estimates need");
    }
    Some((cluster.interconnect?, cluster.estimate.as_ref()?, placement?))
}

/// The sizes every part of the model uses, for one rank.
#[derive(Debug, Clone, Copy)]
struct Shape {
    embed_dim: u64,
    /// Blocks this rank runs: its pipeline stage's (all of them without a pipeline).
    depth: u64,
    /// Blocks of the whole model, for the figures of the whole model.
    model_depth: u64,
    /// This rank's stage holds the patch and position embedding (the first stage)...
    embedding: bool,
    /// ...and the final LayerNorm, the head and the loss (the last).
    head: bool,
    head_dim: u64,
    /// Tokens per sample.
    tokens: u64,
    /// Tokens of the largest cp chunk.
    tokens_local: u64,
    /// Inputs of one patch: channels × p².
    patch_fan_in: u64,
    /// Outputs of the head per token: channels × p².
    head_fan_out: u64,
    /// Values of one input sample: channels × H × W.
    in_pixels: u64,
    out_pixels: u64,
    tp: u64,
    cp: u64,
    dp: u64,
    /// Samples a dp rank takes per step.
    local_batch: u64,
    global_batch: u64,
    /// Slices that batch runs through forward and backward in: `num_micro_batches` with a
    /// pipeline, `gradient_accumulation_steps` without.
    micro_batches: u64,
    /// Samples of the largest slice: what activations and point-to-point transfers scale with.
    micro_batch: u64,
    /// Pipeline stages (pp), and the schedule they run (1F1B without a pipeline, where it is
    /// one micro-batch at a time).
    stages: u64,
    schedule: Schedule,
    /// `zero_stage`: what the dp group shards, and the collectives that costs.
    zero_stage: u8,
    amp: AmpMode,
    precision: Precision,
    /// The blocks use the tutorial's distributed layers (tp·cp > 1).
    distributed_block: bool,
    /// `torch.compile` sees whole blocks: `enable_jit` and no tp/cp collectives, which the
    /// tutorial marks `torch.compiler.disable` and so cut the graph.
    compiled_whole_block: bool,
    /// Adam in one multi-tensor kernel (`enable_fused` or `enable_jit`) rather than tensor by tensor.
    fused_optimizer: bool,
    /// Loader workers per rank (`num_data_workers`).
    loader_workers: u64,
    /// With 0 workers, the training loop reads each batch one sample after another.
    serial_read: bool,
    /// Training samples an epoch reads (`limit_nsamples`, or the tutorial's ERA5 set).
    train_samples: u64,
    /// Each block's activations recomputed in backward (`activation_checkpointing`).
    recompute: bool,
    /// DDP's largest gradient bucket (`bucket_cap_mb`), in bytes.
    bucket_bytes: f64,
    /// DDP issues each bucket's all-reduce during backward (`overlap_grad_reduce`).
    overlap_grad_reduce: bool,
    data_loader: DataLoaderKind,
    model_params: ParamCount,
}

impl Shape {
    fn new(config: &TrainConfig, derived: &Derived, precision: Precision) -> Shape {
        let n = |x: usize| x as u64;
        let pixels = |channels: usize| n(channels * config.img_size[0] * config.img_size[1]);
        let patch_area = config.patch_size * config.patch_size;
        let pipelined = derived.pp > 1;
        let micro_batches = n(if pipelined { config.num_micro_batches } else { config.gradient_accumulation_steps }).max(1);
        Shape {
            embed_dim: n(config.embed_dim),
            depth: n(config.depth),
            model_depth: n(config.depth),
            embedding: true,
            head: true,
            head_dim: n(derived.head_dim),
            tokens: n(derived.tokens_per_sample),
            tokens_local: n(derived.cp_split.iter().copied().max().unwrap_or(derived.tokens_per_sample)),
            patch_fan_in: n(config.n_in_channels * patch_area),
            head_fan_out: n(config.n_out_channels * patch_area),
            in_pixels: pixels(config.n_in_channels),
            out_pixels: pixels(config.n_out_channels),
            tp: n(derived.tp),
            cp: n(derived.cp),
            dp: n(derived.dp),
            local_batch: n(derived.local_batch_size),
            global_batch: n(derived.global_batch_size),
            micro_batches,
            micro_batch: n(derived.local_batch_size).div_ceil(micro_batches),
            stages: n(derived.pp),
            schedule: if pipelined { config.schedule() } else { Schedule::OneFOneB },
            zero_stage: u8::try_from(config.zero_stage).unwrap_or(u8::MAX),
            amp: config.amp_mode,
            precision,
            distributed_block: derived.tp * derived.cp > 1,
            compiled_whole_block: config.enable_jit && derived.tp * derived.cp == 1,
            fused_optimizer: config.enable_jit || config.enable_fused,
            loader_workers: n(config.num_data_workers),
            serial_read: config.serial_read,
            train_samples: n(derived.train_samples),
            recompute: config.activation_checkpointing,
            bucket_bytes: config.bucket_cap_mb * 1024.0 * 1024.0,
            overlap_grad_reduce: config.overlap_grad_reduce,
            data_loader: config.data_loader_config,
            model_params: derived.params,
        }
    }

    /// Model chunks per stage: 1, or the interleaved schedule's virtual stages.
    fn chunks_per_stage(&self) -> u64 {
        self.schedule.virtual_stages() as u64
    }

    fn mlp_width(&self) -> u64 {
        MLP_RATIO as u64 * self.embed_dim
    }

    /// Bytes of an activation in the matmul precision.
    fn element_bytes(&self) -> f64 {
        if self.precision.is_half() { 2.0 } else { 4.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ByPrecision;

    /// The `mp` family at width `embed_dim`, fp16 and compiled, on tp × dp 4 (local batch 16).
    pub(super) fn shape(embed_dim: usize, tp: usize) -> Shape {
        let config = TrainConfig {
            embed_dim,
            tensor_parallel: tp,
            global_batch_size: 64,
            amp_mode: AmpMode::Fp16,
            enable_jit: true,
            ..TrainConfig::default()
        };
        let derived = config.derived(4 * tp, None).unwrap();
        Shape::new(&config, &derived, Precision::Fp16)
    }

    pub(super) fn factors() -> EstimateFactors {
        EstimateFactors {
            compute_efficiency: ByPrecision { fp32: 0.5, tf32: 0.5, fp16: 0.5, bf16: 0.5 },
            attention_full_rate_head_dim: 128,
            nvlink_efficiency: 0.5,
            network_efficiency: 0.5,
            runtime_overhead_gb: 3.0,
            dali_overhead_gb: 6.0,
            allocator_factor: 1.2,
            attention_efficiency: 1.0,
            seconds_per_op: 0.0,
            seconds_per_plain_op: 0.0,
            collective_latency_s: 0.0,
            batches_per_worker: 0.0,
            loader: None,
        }
    }

    #[test]
    fn shape_follows_the_config() {
        let s = shape(1536, 4);
        assert_eq!((s.tokens, s.tokens_local, s.head_dim, s.local_batch, s.dp), (4050, 4050, 192, 16, 4));
        assert_eq!((s.patch_fan_in, s.head_fan_out, s.in_pixels), (20 * 64, 20 * 64, 20 * 360 * 720));
        assert_eq!(s.mlp_width(), 6144);
        assert!(!s.compiled_whole_block);
        assert!(shape(1536, 1).compiled_whole_block);
    }
}
