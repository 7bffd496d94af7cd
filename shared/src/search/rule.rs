//! Why a layout is left out of the answer. A search that only showed the survivors would hide
//! what a learner most needs to see: that tp 16 is impossible for eight heads, or that tp 1
//! does not fit a 40 GB A100. So every layout the space holds is either ranked or counted
//! here, under the first rule it breaks, with the first case of each rule worded in full.

use std::fmt;

use serde::Serialize;

use super::candidate::Candidate;
use crate::cluster::GpuKind;

/// The rules, in the order a layout is checked against them: each layout counts once, under
/// the first it breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// tp must divide the heads.
    HeadsNotDivisibleByTp,
    /// cp at most the tokens (the trainer splits tokens unevenly, so only "too many" breaks).
    MoreCpThanTokens,
    /// pp at most the blocks (uneven stages run: the later stages take a block more).
    MoreStagesThanBlocks,
    /// dp must divide the global batch.
    BatchNotDivisibleByDp,
    /// The micro-batches must divide a dp rank's batch.
    BatchNotDivisibleByMicroBatches,
    /// ZeRO stages 1–3 over dp 1 are stage 0.
    ZeroWithoutDp,
    /// The trainer's ZeRO shards a whole model's units: it refuses pipeline stages.
    ZeroWithPipeline,
    /// Fewer micro-batches than stages: the same layout with as many micro-batches as stages
    /// is faster and holds no more, so these are not priced.
    FewerMicroBatchesThanStages,
    /// Any other rule of the config for this world, as the config's validation words it.
    ConfigRule,
    /// More memory per GPU than the GPU has.
    OutOfMemory,
}

impl Rule {
    pub const ALL: [Rule; 10] = [
        Rule::HeadsNotDivisibleByTp,
        Rule::MoreCpThanTokens,
        Rule::MoreStagesThanBlocks,
        Rule::BatchNotDivisibleByDp,
        Rule::BatchNotDivisibleByMicroBatches,
        Rule::ZeroWithoutDp,
        Rule::ZeroWithPipeline,
        Rule::FewerMicroBatchesThanStages,
        Rule::ConfigRule,
        Rule::OutOfMemory,
    ];

    /// The field a user would change (a config key, a layout size, `memory`).
    pub const fn field(self) -> &'static str {
        match self {
            Rule::HeadsNotDivisibleByTp => "tensor_parallel",
            Rule::MoreCpThanTokens => "context_parallel",
            Rule::MoreStagesThanBlocks => "pp",
            Rule::BatchNotDivisibleByDp => "global_batch_size",
            Rule::BatchNotDivisibleByMicroBatches => "gradient_accumulation_steps",
            Rule::ZeroWithoutDp | Rule::ZeroWithPipeline => "zero",
            Rule::FewerMicroBatchesThanStages => "num_micro_batches",
            Rule::ConfigRule => "config",
            Rule::OutOfMemory => "memory",
        }
    }

    /// The rule in one sentence, without the values of any one case.
    pub const fn sentence(self) -> &'static str {
        match self {
            Rule::HeadsNotDivisibleByTp => "tp must divide num_heads: every tp rank owns whole heads",
            Rule::MoreCpThanTokens => "cp must be at most the tokens per sample: every cp rank needs a token",
            Rule::MoreStagesThanBlocks => "pp must be at most depth: every pipeline stage needs a block",
            Rule::BatchNotDivisibleByDp => "dp must divide global_batch_size: every dp rank takes as many samples",
            Rule::BatchNotDivisibleByMicroBatches => "the micro-batches must divide the samples a dp rank takes per step",
            Rule::ZeroWithoutDp => "ZeRO shards over dp: with dp 1, stages 1-3 are stage 0",
            Rule::ZeroWithPipeline => "the trainer's ZeRO shards a whole model: with pipeline stages, only stage 0 runs",
            Rule::FewerMicroBatchesThanStages => {
                "a pipeline needs at least as many micro-batches as stages: with fewer, the same layout at m = pp is faster and holds no more"
            }
            Rule::ConfigRule => "the config must keep its own rules for this world",
            Rule::OutOfMemory => "the memory per GPU must fit the GPU's",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Layouts left out under one rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exclusion {
    pub rule: Rule,
    pub field: &'static str,
    pub sentence: &'static str,
    pub count: u64,
    /// The first case, with its values (`tp 16 does not divide num_heads 8 ...`).
    pub example: String,
}

/// The counts as the search goes: one number per rule, and the first case of each worded
/// once (formatting every case would cost more than the search).
#[derive(Debug, Default)]
pub(super) struct Tally {
    counts: [u64; Rule::ALL.len()],
    examples: [Option<String>; Rule::ALL.len()],
    /// The layout that needs least memory of those that do not fit: what to say when none fits.
    least_memory: Option<(f64, Candidate)>,
}

impl Tally {
    pub fn add(&mut self, rule: Rule, count: u64, example: impl FnOnce() -> String) {
        let i = rule.index();
        self.counts[i] += count;
        if self.examples[i].is_none() && count > 0 {
            self.examples[i] = Some(example());
        }
    }

    /// One layout that needs `memory_gb`, more than `gpu` has.
    pub fn out_of_memory(&mut self, candidate: Candidate, memory_gb: f64, gpu: &GpuKind) {
        self.add(Rule::OutOfMemory, 1, || out_of_memory(candidate, memory_gb, gpu));
        if self.least_memory.is_none_or(|(least, _)| memory_gb < least) {
            self.least_memory = Some((memory_gb, candidate));
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn least_memory(&self) -> Option<(f64, Candidate)> {
        self.least_memory
    }

    /// The rules that left anything out, in [`Rule::ALL`] order.
    pub fn into_exclusions(self) -> Vec<Exclusion> {
        Rule::ALL
            .into_iter()
            .zip(self.counts)
            .zip(self.examples)
            .filter(|((_, count), _)| *count > 0)
            .map(|((rule, count), example)| Exclusion {
                rule,
                field: rule.field(),
                sentence: rule.sentence(),
                count,
                example: example.unwrap_or_default(),
            })
            .collect()
    }
}

/// Why `candidate` does not fit, in words.
pub(super) fn out_of_memory(candidate: Candidate, memory_gb: f64, gpu: &GpuKind) -> String {
    format!("{candidate} needs {memory_gb:.1} GiB per GPU; the {} has {:.0}", gpu.name, gpu.memory_gb)
}

/// One case of a rule checked before any estimate, with the values it is worded with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Breach {
    Heads { tp: u32, heads: usize },
    Tokens { cp: u32, tokens: usize },
    Stages { pp: u32, depth: usize },
    Batch { dp: u32, batch: usize },
    Micro { micro_batches: u32, local: usize },
    Zero { stage: u8 },
    ZeroStages { stage: u8, pp: u32 },
    FewMicro { micro_batches: u32, pp: u32 },
}

impl Breach {
    pub fn rule(self) -> Rule {
        match self {
            Breach::Heads { .. } => Rule::HeadsNotDivisibleByTp,
            Breach::Tokens { .. } => Rule::MoreCpThanTokens,
            Breach::Stages { .. } => Rule::MoreStagesThanBlocks,
            Breach::Batch { .. } => Rule::BatchNotDivisibleByDp,
            Breach::Micro { .. } => Rule::BatchNotDivisibleByMicroBatches,
            Breach::Zero { .. } => Rule::ZeroWithoutDp,
            Breach::ZeroStages { .. } => Rule::ZeroWithPipeline,
            Breach::FewMicro { .. } => Rule::FewerMicroBatchesThanStages,
        }
    }
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Breach::Heads { tp, heads } => write!(f, "tp {tp} does not divide num_heads {heads} (every tp rank owns whole heads)"),
            Breach::Tokens { cp, tokens } => {
                write!(f, "cp {cp} is more than the {tokens} tokens per sample (every cp rank needs at least one token)")
            }
            Breach::Stages { pp, depth } => write!(f, "pp {pp} is more than the {depth} blocks (every stage needs at least one block)"),
            Breach::Batch { dp, batch } => {
                write!(f, "dp {dp} does not divide global_batch_size {batch} (every dp rank takes global_batch_size / dp samples)")
            }
            Breach::Micro { micro_batches, local } => {
                write!(f, "{micro_batches} micro-batches do not divide the {local} samples a dp rank takes per step")
            }
            Breach::Zero { stage } => write!(f, "ZeRO stage {stage} shards over dp, which is 1: it is stage 0"),
            Breach::ZeroStages { stage, pp } => {
                write!(f, "ZeRO stage {stage} with pp {pp}: the trainer shards a whole model's units, not a pipeline stage's")
            }
            Breach::FewMicro { micro_batches, pp } => {
                let noun = if micro_batches == 1 { "micro-batch" } else { "micro-batches" };
                write!(f, "{micro_batches} {noun} on {pp} stages: a stage idles for every micro-batch it lacks, and m = {pp} is faster")
            }
        }
    }
}
