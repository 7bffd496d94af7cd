//! The search's loop: every factorisation, order and micro-batch count, checked against the
//! cheap rules first so that only layouts that could run reach the estimate, and one estimate
//! serving all eight ZeRO and recomputation variants of a layout (the estimate gives both as
//! what-ifs). The estimate is nearly all of the cost; the loop itself allocates only each
//! order's layout and the answer's rows.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use serde::Serialize;

use super::candidate::{Candidate, Order, factorisations, micro_batch_counts, order_count, orders};
use super::rule::{Breach, Rule, Tally, out_of_memory};
use super::split::{Split, StepPart};
use crate::cluster::{Cluster, GpuKind};
use crate::config::{PipelineSchedule, TrainConfig, tokens_per_sample};
use crate::estimate::{self, Estimate, EstimateOptions, FoundLinks, Link, Network};
use crate::layout::{Layout, Sizes, Token};
use crate::numbers::round_significant;

/// Significant digits a layout's samples/s is kept to. Micro-batches without a pipeline change
/// a step's time by nothing but rounding, and a ranking by rounding noise would put the
/// layout that needs more memory first.
const SPEED_DIGITS: i32 = 9;

/// The variants one estimate answers: ZeRO stages 0-3, recomputation off and on.
const VARIANTS: u64 = 8;

/// A layout that runs, predicted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ranked {
    pub candidate: Candidate,
    /// To 9 significant digits.
    pub samples_per_sec: f64,
    pub step_time_s: f64,
    pub memory_gb: f64,
    /// Samples per step: the config's global batch (dp × its local batch when that is set).
    pub global_batch: u64,
    /// The largest part of the step.
    pub limit: StepPart,
    pub split: Split,
}

/// A single layout, judged by the search's rules and its estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Judgement {
    Valid(Box<Ranked>),
    Excluded { rule: Rule, reason: String },
}

/// A factorisation's estimates by the links of their order and their micro-batches: orders whose
/// groups have the same links have the same estimate (`Network::links`).
type Alike = HashMap<(Vec<(Token, Link, u64)>, u32), Result<Estimate, String>>;

pub(super) struct Walk<'a> {
    /// The space's config; its layout keys are rewritten for each estimate.
    config: TrainConfig,
    cluster: &'a Cluster,
    gpu: &'a GpuKind,
    tokens: usize,
    /// Most samples a dp rank can take: what the micro-batch axis runs up to.
    batch: usize,
    pub tally: Tally,
    pub ranked: Vec<Ranked>,
    pub estimates: u64,
    /// The links of the layouts estimated so far, for the next ones laid out alike.
    found: FoundLinks,
}

impl<'a> Walk<'a> {
    pub fn new(config: &TrainConfig, cluster: &'a Cluster, gpu: &'a GpuKind) -> Walk<'a> {
        let mut config = config.clone();
        config.activation_checkpointing = false;
        config.zero_stage = 0;
        // 1F1B: as fast as GPipe, holding fewer micro-batches.
        config.pipeline_schedule = PipelineSchedule::OneFOneB;
        let tokens = tokens_per_sample(config.img_size, config.patch_size);
        let batch = config.local_batch_size.unwrap_or(config.global_batch_size);
        Walk {
            config,
            cluster,
            gpu,
            tokens,
            batch,
            tally: Tally::default(),
            ranked: Vec::new(),
            estimates: 0,
            found: FoundLinks::default(),
        }
    }

    /// Every layout of `gpus` GPUs, ranked or counted under its rule.
    pub fn all(&mut self, gpus: u32) {
        factorisations(gpus, |sizes| self.factorisation(sizes));
    }

    fn factorisation(&mut self, sizes: Sizes) {
        if let Some(breach) = self.shape_breach(sizes) {
            let layouts = order_count(sizes) * micro_batch_counts(self.batch).count() as u64 * VARIANTS;
            self.tally.add(breach.rule(), layouts, || breach.to_string());
            return;
        }
        let mut alike = Alike::new();
        orders(sizes, |order| self.order(sizes, order, &mut alike));
    }

    fn order(&mut self, sizes: Sizes, order: Order, alike: &mut Alike) {
        let first = Candidate { sizes, order, zero: 0, recompute: false, micro_batches: 1 };
        let Some(layout) = self.prepare(&first) else {
            let layouts = micro_batch_counts(self.batch).count() as u64 * VARIANTS;
            return self.tally.add(Rule::ConfigRule, layouts, || format!("{first} is not a layout"));
        };
        let local = self.local_batch(sizes.dp);
        // The layout's links serve every micro-batch count's estimate.
        let cluster = self.cluster;
        let network = match estimate::network(&layout, cluster, &mut self.found) {
            Ok(network) => network,
            Err(e) => {
                let layouts = micro_batch_counts(self.batch).count() as u64 * VARIANTS;
                return self.tally.add(Rule::ConfigRule, layouts, || first_problem(&e));
            }
        };
        for micro_batches in micro_batch_counts(self.batch) {
            let base = Candidate { micro_batches, ..first };
            if let Some(breach) = micro_breach(local, micro_batches).or_else(|| few_micro(sizes.pp, micro_batches)) {
                self.tally.add(breach.rule(), VARIANTS, || breach.to_string());
                continue;
            }
            let stages = if sizes.dp > 1 && sizes.pp == 1 { 4 } else { 1 };
            if let Some(breach) = zero_breach(sizes, 1) {
                self.tally.add(breach.rule(), VARIANTS - 2, || breach.to_string());
            }
            let predicted = match alike.entry((network.links(), micro_batches)) {
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(slot) => slot.insert(self.predict(&network, micro_batches)),
            };
            match predicted {
                Ok(estimate) => self.variants(base, estimate, stages),
                Err(reason) => self.tally.add(Rule::ConfigRule, 2 * u64::from(stages), || reason.clone()),
            }
        }
    }

    /// The rules a factorisation breaks whatever its order, micro-batches, ZeRO stage and
    /// recomputation: the first one, or none.
    fn shape_breach(&self, sizes: Sizes) -> Option<Breach> {
        let Sizes { tp, cp, pp, dp } = sizes;
        let c = &self.config;
        let (heads, depth, batch) = (c.num_heads, c.depth, c.global_batch_size);
        let breach = if !heads.is_multiple_of(tp as usize) {
            Breach::Heads { tp, heads }
        } else if cp as usize > self.tokens {
            Breach::Tokens { cp, tokens: self.tokens }
        } else if pp as usize > depth {
            Breach::Stages { pp, depth }
        } else if c.local_batch_size.is_none() && !batch.is_multiple_of(dp as usize) {
            Breach::Batch { dp, batch }
        } else {
            return None;
        };
        Some(breach)
    }

    fn local_batch(&self, dp: u32) -> usize {
        self.config.local_batch_size.unwrap_or(self.config.global_batch_size / dp as usize)
    }

    /// The rank layout of `candidate`, with the config's layout keys set to match it.
    fn prepare(&mut self, candidate: &Candidate) -> Option<Layout> {
        let layout = candidate.layout().ok()?;
        self.config.tensor_parallel = candidate.sizes.tp as usize;
        self.config.context_parallel = candidate.sizes.cp as usize;
        self.config.pipeline_parallel = candidate.sizes.pp as usize;
        self.config.parallel_order = layout.effective_order();
        Some(layout)
    }

    /// The estimate of `network`'s layout with its batch in `micro_batches` slices (the
    /// pipeline's, or accumulation without one), or the config's first rule it breaks.
    fn predict(&mut self, network: &Network<'_>, micro_batches: u32) -> Result<Estimate, String> {
        self.estimates += 1;
        let (m, pipelined) = (micro_batches as usize, network.layout.sizes().pp > 1);
        self.config.num_micro_batches = if pipelined { m } else { 1 };
        self.config.gradient_accumulation_steps = if pipelined { 1 } else { m };
        estimate::estimate_on_network(&self.config, network, self.cluster, self.gpu, &EstimateOptions::default())
            .map_err(|e| first_problem(&e))
    }

    /// The ZeRO stages below `stages` with and without recomputation, from one estimate.
    fn variants(&mut self, base: Candidate, estimate: &Estimate, stages: u8) {
        for recompute in [false, true] {
            for zero in 0..stages {
                match variant(Candidate { zero, recompute, ..base }, estimate, self.gpu) {
                    Ok(ranked) => self.ranked.push(ranked),
                    Err(memory_gb) => self.tally.out_of_memory(Candidate { zero, recompute, ..base }, memory_gb, self.gpu),
                }
            }
        }
    }

    /// One candidate, through the same rules in the same order as [`Walk::all`].
    pub fn judge(&mut self, candidate: Candidate) -> Judgement {
        let excluded = |breach: Breach| Judgement::Excluded { rule: breach.rule(), reason: breach.to_string() };
        let Candidate { sizes, zero, micro_batches, .. } = candidate;
        if let Some(breach) = self.shape_breach(sizes) {
            return excluded(breach);
        }
        let Some(layout) = self.prepare(&candidate) else {
            return Judgement::Excluded { rule: Rule::ConfigRule, reason: format!("{candidate} is not a layout") };
        };
        let local = self.local_batch(sizes.dp);
        if let Some(breach) = micro_breach(local, micro_batches).or_else(|| few_micro(sizes.pp, micro_batches)) {
            return excluded(breach);
        }
        if let Some(breach) = zero_breach(sizes, zero) {
            return excluded(breach);
        }
        let predicted = estimate::network(&layout, self.cluster, &mut self.found).map_err(|e| first_problem(&e));
        match predicted.and_then(|network| self.predict(&network, micro_batches)) {
            Err(reason) => Judgement::Excluded { rule: Rule::ConfigRule, reason },
            Ok(estimate) => match variant(candidate, &estimate, self.gpu) {
                Ok(ranked) => Judgement::Valid(Box::new(ranked)),
                Err(memory_gb) => Judgement::Excluded { rule: Rule::OutOfMemory, reason: out_of_memory(candidate, memory_gb, self.gpu) },
            },
        }
    }
}

/// The first problem of an estimate's refusal, in words.
fn first_problem(e: &crate::Error) -> String {
    e.problems().0.first().map_or_else(|| e.to_string(), ToString::to_string)
}

/// ZeRO stage `zero` (when above 0) where it cannot run: over one replica, or with stages.
fn zero_breach(sizes: Sizes, zero: u8) -> Option<Breach> {
    match zero {
        0 => None,
        stage if sizes.dp == 1 => Some(Breach::Zero { stage }),
        stage => (sizes.pp > 1).then_some(Breach::ZeroStages { stage, pp: sizes.pp }),
    }
}

/// A pipeline with fewer micro-batches than stages.
fn few_micro(pp: u32, micro_batches: u32) -> Option<Breach> {
    (pp > 1 && micro_batches < pp).then_some(Breach::FewMicro { micro_batches, pp })
}

fn micro_breach(local: usize, micro_batches: u32) -> Option<Breach> {
    let m = micro_batches as usize;
    (m > local || !local.is_multiple_of(m)).then_some(Breach::Micro { micro_batches, local })
}

/// `candidate` predicted from the estimate of its layout and micro-batches (DDP, no
/// recomputation), or the memory it needs when that is more than the GPU has.
fn variant(candidate: Candidate, e: &Estimate, gpu: &GpuKind) -> Result<Ranked, f64> {
    let stage = |s: u8| e.zero_what_if.iter().find(|z| z.stage == s).copied().ok_or(f64::INFINITY);
    let (zero, ddp) = (stage(candidate.zero)?, stage(e.zero_stage)?);
    let what_if = e.recompute_what_if;
    let (extra_gb, recompute_s) = match candidate.recompute {
        // The forward pass again; the split works out anew how much of the loader's reading
        // the longer step hides.
        true => {
            let extra = (what_if.step_time_s - what_if.exposed_data_s) - (e.step_time_s - e.time.exposed_data_s);
            (what_if.total_gb - e.memory_gb.total, extra)
        }
        false => (0.0, 0.0),
    };
    let memory_gb = zero.total_gb + extra_gb;
    if memory_gb > gpu.memory_gb {
        return Err(memory_gb);
    }
    let split = Split::of(e).with(recompute_s, &ddp, &zero);
    let step_time_s = split.total_s();
    let global_batch = e.global_batch_size;
    Ok(Ranked {
        candidate,
        samples_per_sec: round_significant(global_batch as f64 / step_time_s, SPEED_DIGITS),
        step_time_s,
        memory_gb,
        global_batch,
        limit: split.limit(),
        split,
    })
}
