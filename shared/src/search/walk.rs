//! The search's loop: every factorisation, order and micro-batch count, checked against the
//! cheap rules first so that only layouts that could run reach the estimate, and one estimate
//! serving all eight ZeRO and recomputation variants of a layout (the estimate gives both as
//! what-ifs). The estimate is nearly all of the cost; the loop itself allocates only each
//! order's layout and the answer's rows.

use serde::Serialize;

use super::candidate::{Candidate, Order, factorisations, micro_batch_counts, order_count, orders};
use super::rule::{Breach, Rule, Tally, out_of_memory};
use super::split::{Split, StepPart};
use crate::cluster::{Cluster, GpuKind};
use crate::config::{TrainConfig, tokens_per_sample};
use crate::estimate::{Estimate, EstimateOptions, estimate_without_terms};
use crate::layout::{Layout, Sizes, Token};
use crate::numbers::round_significant;

/// Significant digits a layout's samples/s is kept to. Micro-batches and ZeRO stages 1 and 2
/// change a step's time by nothing but rounding, and a ranking by rounding noise would put the
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
    Valid(Ranked),
    Excluded { rule: Rule, reason: String },
}

pub(super) struct Walk<'a> {
    /// The space's config; its layout keys are rewritten for each estimate.
    config: TrainConfig,
    cluster: &'a Cluster,
    gpu: &'a GpuKind,
    tokens: usize,
    /// The config's own `local_batch_size` (the field is rewritten for each estimate).
    fixed_local: Option<usize>,
    /// Most samples a dp rank can take: what the micro-batch axis runs up to.
    batch: usize,
    pub tally: Tally,
    pub ranked: Vec<Ranked>,
    pub estimates: u64,
}

impl<'a> Walk<'a> {
    pub fn new(config: &TrainConfig, cluster: &'a Cluster, gpu: &'a GpuKind) -> Walk<'a> {
        let mut config = config.clone();
        config.gradient_accumulation_steps = 1;
        config.activation_checkpointing = false;
        let tokens = tokens_per_sample(config.img_size, config.patch_size);
        let batch = config.local_batch_size.unwrap_or(config.global_batch_size);
        let fixed_local = config.local_batch_size;
        Walk { config, cluster, gpu, tokens, fixed_local, batch, tally: Tally::default(), ranked: Vec::new(), estimates: 0 }
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
        orders(sizes, |order| self.order(sizes, order));
    }

    fn order(&mut self, sizes: Sizes, order: Order) {
        let first = Candidate { sizes, order, zero: 0, recompute: false, micro_batches: 1 };
        let Some(layout) = self.prepare(&first) else {
            let layouts = micro_batch_counts(self.batch).count() as u64 * VARIANTS;
            return self.tally.add(Rule::ConfigRule, layouts, || format!("{first} is not a layout"));
        };
        let local = self.local_batch(sizes.dp);
        for micro_batches in micro_batch_counts(self.batch) {
            let base = Candidate { micro_batches, ..first };
            if let Some(breach) = micro_breach(local, micro_batches) {
                self.tally.add(breach.rule(), VARIANTS, || breach.to_string());
                continue;
            }
            let stages = if sizes.dp > 1 { 4 } else { 1 };
            if stages == 1 {
                self.tally.add(Rule::ZeroWithoutDp, VARIANTS - 2, || Breach::Zero { stage: 1 }.to_string());
            }
            match self.predict(&layout, local, micro_batches) {
                Ok(estimate) => self.variants(base, &estimate, stages),
                Err(reason) => self.tally.add(Rule::ConfigRule, 2 * u64::from(stages), || reason),
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
        } else if !depth.is_multiple_of(pp as usize) {
            Breach::Uneven { pp, depth }
        } else if pp > 1 {
            Breach::Pipeline { pp }
        } else if self.fixed_local.is_none() && !batch.is_multiple_of(dp as usize) {
            Breach::Batch { dp, batch }
        } else {
            return None;
        };
        Some(breach)
    }

    fn local_batch(&self, dp: u32) -> usize {
        self.fixed_local.unwrap_or(self.config.global_batch_size / dp as usize)
    }

    /// The rank layout of `candidate`, with the config's layout keys set to match it.
    fn prepare(&mut self, candidate: &Candidate) -> Option<Layout> {
        let layout = candidate.layout().ok()?;
        self.config.tensor_parallel = candidate.sizes.tp as usize;
        self.config.context_parallel = candidate.sizes.cp as usize;
        self.config.parallel_order = layout.effective_order();
        Some(layout)
    }

    /// The estimate of one micro-batch of `layout`, or the config's first rule it breaks.
    fn predict(&mut self, layout: &Layout, local: usize, micro_batches: u32) -> Result<Estimate, String> {
        self.estimates += 1;
        self.config.local_batch_size = Some(local / micro_batches as usize);
        let result = estimate_without_terms(&self.config, layout, self.cluster, self.gpu, &EstimateOptions::default());
        result.map_err(|e| e.problems().0.first().map_or_else(|| e.to_string(), ToString::to_string))
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
        if let Some(breach) = micro_breach(local, micro_batches) {
            return excluded(breach);
        }
        if zero > 0 && sizes.dp == 1 {
            return excluded(Breach::Zero { stage: zero });
        }
        match self.predict(&layout, local, micro_batches) {
            Err(reason) => Judgement::Excluded { rule: Rule::ConfigRule, reason },
            Ok(estimate) => match variant(candidate, &estimate, self.gpu) {
                Ok(ranked) => Judgement::Valid(ranked),
                Err(memory_gb) => Judgement::Excluded { rule: Rule::OutOfMemory, reason: out_of_memory(candidate, memory_gb, self.gpu) },
            },
        }
    }
}

fn micro_breach(local: usize, micro_batches: u32) -> Option<Breach> {
    let m = micro_batches as usize;
    (m > local || !local.is_multiple_of(m)).then_some(Breach::Micro { micro_batches, local })
}

/// `candidate` predicted from the estimate of one of its micro-batches (DDP, no
/// recomputation), or the memory it needs when that is more than the GPU has.
fn variant(candidate: Candidate, e: &Estimate, gpu: &GpuKind) -> Result<Ranked, f64> {
    let m = f64::from(candidate.micro_batches);
    let zero = e.zero_what_if.iter().find(|z| z.stage == candidate.zero).copied().ok_or(f64::INFINITY)?;
    let what_if = e.recompute_what_if;
    let (extra_gb, recompute_s) = match candidate.recompute {
        // The forward pass again, once per micro-batch; the split works out anew how much of
        // the loader's reading the longer step hides.
        true => {
            let extra = (what_if.step_time_s - what_if.exposed_data_s) - (e.step_time_s - e.time.exposed_data_s);
            (what_if.total_gb - e.memory_gb.total, m * extra)
        }
        false => (0.0, 0.0),
    };
    let memory_gb = zero.total_gb + extra_gb;
    if memory_gb > gpu.memory_gb {
        return Err(memory_gb);
    }
    let dp_sync_s: f64 = e.collectives.iter().filter(|c| c.group == Token::DP && c.overlapped).map(|c| c.seconds).sum();
    let split = Split::of(e, candidate.micro_batches).with(recompute_s, (zero.dp_bytes_factor - 1.0) * dp_sync_s);
    let step_time_s = split.total_s();
    let global_batch = e.global_batch_size * u64::from(candidate.micro_batches);
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
