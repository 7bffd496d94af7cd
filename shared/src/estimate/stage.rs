//! One estimate from its stages: each distinct part of the model a pipeline stage can hold
//! (its blocks, the embedding, the head) modelled once, however many stages hold it, then
//! every stage's memory from its part and what its schedule makes it hold. The run's memory
//! is the heaviest stage's, its step the slowest's; without a pipeline the one stage is the
//! whole model. The ZeRO and recomputation what-ifs are answered from the same parts.

use super::comms::{self, Collective, Network};
use super::flops::Flops;
use super::loader::Loader;
use super::memory::{self, MemoryBreakdown, SavedTensor};
use super::params::ParamSplit;
use super::pipeline::{self, Held, Part, PipelineEstimate, StageEstimate};
use super::step::{self, Rates, StepTime};
use super::{RecomputeWhatIf, Shape, ZeroWhatIf};
use crate::cluster::EstimateFactors;
use crate::config::MAX_ZERO_STAGE;

/// What every stage's model needs besides its shape.
pub(super) struct Context<'a> {
    pub net: &'a Network<'a>,
    pub rates: &'a Rates,
    pub factors: &'a EstimateFactors,
    pub loader: Option<&'a Loader>,
    pub overlap_dp: bool,
    pub memory_limit_gb: f64,
}

/// One part of the model, as a stage holding it runs it.
struct PartModel {
    shape: Shape,
    params: ParamSplit,
    flops: Flops,
    /// tp's, cp's and the pipeline's collectives, which ZeRO does not change.
    between_layers: Vec<Collective>,
    /// dp's under the config's ZeRO stage.
    dp: Vec<Collective>,
}

impl PartModel {
    fn new(base: &Shape, part: Part, net: &Network<'_>) -> PartModel {
        let shape = Shape { depth: part.blocks, embedding: part.embedding, head: part.head, ..*base };
        let params = ParamSplit::of(&shape);
        let between_layers = comms::model_collectives(&shape, &params, net);
        let dp = comms::dp_collectives(&shape, &params, net, shape.zero_stage);
        PartModel { flops: Flops::of(&shape), shape, params, between_layers, dp }
    }

    fn collectives(&self, dp: &[Collective]) -> Vec<Collective> {
        self.between_layers.iter().chain(dp).cloned().collect()
    }

    /// Its step with `shape` (this part's, a setting changed) and `collectives`.
    fn time(&self, shape: &Shape, collectives: &[Collective], cx: &Context<'_>) -> StepTime {
        let parts = step::Parts {
            flops: &self.flops.rank_step,
            rates: cx.rates,
            params_per_rank: self.params.per_rank,
            factors: cx.factors,
            collectives,
        };
        step::step_time(shape, &parts, cx.loader, cx.overlap_dp)
    }
}

/// The stages of a run with recomputation on or off: each stage's unsharded memory, and
/// each part's step.
struct Run {
    /// Per stage: the index of its part, its unsharded memory, what it holds.
    stages: Vec<(usize, MemoryBreakdown, Held)>,
    /// Per part: its saved tensors and its step.
    parts: Vec<(Vec<SavedTensor>, StepTime)>,
}

impl Run {
    fn new(models: &[PartModel], stages: &[(usize, Held)], recompute: bool, cx: &Context<'_>) -> Run {
        let parts: Vec<_> = models
            .iter()
            .map(|m| {
                let shape = Shape { recompute, ..m.shape };
                let time = m.time(&shape, &m.collectives(&m.dp), cx);
                (memory::saved_tensors(&shape), time)
            })
            .collect();
        let stages = stages
            .iter()
            .map(|&(i, held)| {
                let m = &models[i];
                let shape = Shape { recompute, ..m.shape };
                (i, memory::memory(&shape, &m.params, cx.factors, &parts[i].0, held), held)
            })
            .collect();
        Run { stages, parts }
    }

    /// Each stage's memory under ZeRO stage `zero`.
    fn memory(&self, models: &[PartModel], zero: u8) -> impl Iterator<Item = MemoryBreakdown> {
        self.stages.iter().map(move |(i, unsharded, _)| memory::sharded(unsharded, &models[*i].shape, &models[*i].params, zero))
    }

    /// The stage with the most memory under `zero`, and that memory.
    fn heaviest(&self, models: &[PartModel], zero: u8) -> (usize, MemoryBreakdown) {
        self.memory(models, zero)
            .enumerate()
            .fold((0, MemoryBreakdown::default()), |best, (s, m)| if m.total > best.1.total { (s, m) } else { best })
    }

    /// The part whose step is longest.
    fn slowest(&self) -> usize {
        (0..self.parts.len()).fold(0, |best, i| if self.parts[i].1.total_s > self.parts[best].1.total_s { i } else { best })
    }
}

/// Everything of an estimate the stages decide.
pub(super) struct Staged {
    pub params: ParamSplit,
    pub flops: Flops,
    pub memory: MemoryBreakdown,
    pub saved: Vec<SavedTensor>,
    pub collectives: Vec<Collective>,
    pub time: StepTime,
    pub zero_what_if: Vec<ZeroWhatIf>,
    pub recompute_what_if: RecomputeWhatIf,
    pub pipeline: Option<PipelineEstimate>,
}

/// The estimate's stages for `base` (the whole model's shape).
pub(super) fn staged(base: &Shape, cx: &Context<'_>) -> Staged {
    let mut models: Vec<PartModel> = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    let stages: Vec<(usize, Held)> = pipeline::stages(base)
        .into_iter()
        .map(|(part, held)| {
            let index = parts.iter().position(|p| *p == part).unwrap_or_else(|| {
                parts.push(part);
                models.push(PartModel::new(base, part, cx.net));
                parts.len() - 1
            });
            (index, held)
        })
        .collect();
    let run = Run::new(&models, &stages, base.recompute, cx);
    let other = Run::new(&models, &stages, !base.recompute, cx);
    let (heaviest, memory) = run.heaviest(&models, base.zero_stage);
    let slowest = run.slowest();
    let pace = &models[slowest];
    let time = run.parts[slowest].1;
    let other_memory = other.heaviest(&models, base.zero_stage).1.total;
    let other_time = other.parts[other.slowest()].1;
    let recompute_what_if = RecomputeWhatIf {
        recompute: !base.recompute,
        total_gb: other_memory,
        fits: other_memory <= cx.memory_limit_gb,
        step_time_s: other_time.total_s,
        exposed_data_s: other_time.exposed_data_s,
    };
    let heaviest_part = stages[heaviest].0;
    Staged {
        params: models[heaviest_part].params,
        flops: pace.flops,
        memory,
        saved: run.parts[heaviest_part].0.clone(),
        collectives: pace.collectives(&pace.dp),
        time,
        zero_what_if: zero_what_ifs(&models, &run, slowest, cx),
        recompute_what_if,
        pipeline: (base.stages > 1).then(|| pipeline_estimate(base, &models, &run, heaviest, slowest)),
    }
}

/// The run under every ZeRO stage: the heaviest stage's memory, and the step of the stage
/// that sets the pace with that stage's collectives and optimizer.
fn zero_what_ifs(models: &[PartModel], run: &Run, slowest: usize, cx: &Context<'_>) -> Vec<ZeroWhatIf> {
    let pace = &models[slowest];
    let ring_bytes = |collectives: &[Collective]| -> f64 {
        collectives.iter().map(|c| c.operation.ring_factor(c.group_size) * (c.bytes * c.count) as f64).sum()
    };
    let ddp = comms::dp_collectives(&pace.shape, &pace.params, cx.net, 0);
    let ddp_bytes = ring_bytes(&ddp);
    (0..=MAX_ZERO_STAGE as u8)
        .map(|zero| {
            let total_gb = run.heaviest(models, zero).1.total;
            let dp = comms::dp_collectives(&pace.shape, &pace.params, cx.net, zero);
            let time = pace.time(&Shape { zero_stage: zero, ..pace.shape }, &pace.collectives(&dp), cx);
            ZeroWhatIf {
                stage: zero,
                total_gb,
                fits: total_gb <= cx.memory_limit_gb,
                dp_bytes_factor: if ddp_bytes > 0.0 { ring_bytes(&dp) / ddp_bytes } else { 1.0 },
                step_time_s: time.total_s,
                blocking_comm_s: time.blocking_comm_s,
                exposed_overlapped_comm_s: time.exposed_overlapped_comm_s,
                optimizer_s: time.optimizer_s,
                bubble_s: time.bubble_s,
            }
        })
        .collect()
}

fn pipeline_estimate(base: &Shape, models: &[PartModel], run: &Run, heaviest: usize, slowest: usize) -> PipelineEstimate {
    let (p, v, m) = (base.stages, base.chunks_per_stage(), base.micro_batches);
    let per_stage = run
        .stages
        .iter()
        .zip(run.memory(models, base.zero_stage))
        .enumerate()
        .map(|(s, ((i, _, held), memory))| {
            let shape = &models[*i].shape;
            StageEstimate {
                stage: s as u32,
                blocks: shape.depth,
                embedding: shape.embedding,
                head: shape.head,
                micro_batches_held: held.blocks,
                memory_gb: memory.total,
                step_time_s: run.parts[*i].1.total_s,
            }
        })
        .collect();
    PipelineEstimate {
        schedule: base.schedule.name().to_owned(),
        stages: p as u32,
        micro_batches: m,
        virtual_stages: v,
        bubble_fraction: (p - 1) as f64 / (v * m + p - 1) as f64,
        heaviest_stage: heaviest as u32,
        slowest_stage: run.stages.iter().position(|(i, _, _)| *i == slowest).unwrap_or(0) as u32,
        per_stage,
    }
}
