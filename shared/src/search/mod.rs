//! Which layout should I run? For a config, a cluster's GPU and a GPU count, every layout the
//! trainer could be asked to run, each either predicted or left out by a named rule.
//!
//! The space is the product of: every factorisation of the GPU count into tp × cp × pp × dp;
//! every order of the dimensions larger than 1 (the others change no rank group); ZeRO stages
//! 0-3; activation recomputation off and on; and micro-batches in powers of two up to the
//! batch (gradient accumulation without a pipeline, the pipeline's with one, run 1F1B: as fast
//! as GPipe, holding fewer). The global batch is the config's, so every layout trains
//! the same model on the same samples per step and samples/s compares them fairly.
//!
//! Each layout is checked against the [`Rule`]s, cheapest first, and one that keeps them is
//! predicted with the same estimate every run records ([`crate::estimate`]); how a layout's
//! micro-batches, recomputation and ZeRO stage are read from that estimate, and what it does
//! not model, is in [`Split`]'s module. The answer ranks the layouts by samples/s, marks the
//! Pareto front of memory per GPU against samples/s, splits every step into the parts that
//! make it (the "why"), and sets the tutorial's own choice beside the best.
//!
//! It runs in the browser as the learner moves a slider, so it must stay fast: see
//! BENCHMARKS.md for the size of `mp`'s space on Perlmutter and the time it takes.

mod candidate;
mod front;
mod rule;
mod split;
mod tutorial;
mod walk;

pub use candidate::{Candidate, Order};
pub use rule::{Exclusion, Rule};
pub use split::{Difference, GroupTime, Split, StepPart};
pub use tutorial::{CHOICES, Standing, TutorialChoice, choices};
pub use walk::{Judgement, Ranked};

use serde::Serialize;

use crate::cluster::{Cluster, GpuKind};
use crate::config::TrainConfig;
use crate::layout::MAX_WORLD;
use crate::{Error, Problems};
use walk::Walk;

/// What to search.
#[derive(Debug, Clone, Copy)]
pub struct Space<'a> {
    /// The config's name: where the tutorial made a choice for it, the answer sets it beside
    /// the best.
    pub config_name: &'a str,
    pub config: &'a TrainConfig,
    pub cluster_name: &'a str,
    pub cluster: &'a Cluster,
    /// The GPU model's name; the cluster's first when `None`.
    pub gpu: Option<&'a str>,
    pub gpus: u32,
}

/// Every layout of a space, ranked or counted out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub gpus: u32,
    pub gpu: String,
    pub memory_limit_gb: f64,
    /// Layouts in the space, valid or not.
    pub searched: u64,
    /// Estimates the search made: its cost.
    pub estimates: u64,
    /// The layouts that run, fastest first.
    pub ranked: Vec<Ranked>,
    /// Indices into `ranked` of the Pareto front of memory per GPU against samples/s.
    pub front: Vec<usize>,
    pub exclusions: Vec<Exclusion>,
    /// The tutorial's layouts for this config and GPU count.
    pub tutorial: Vec<Standing>,
}

/// Searches `space`. Input no layout can use (no GPUs, a GPU the cluster lacks, a cluster the
/// estimate cannot model) and a space where nothing runs are errors that say why, the latter
/// with every rule that left layouts out and the least memory any layout needed.
pub fn search(space: &Space<'_>) -> Result<Answer, Error> {
    let gpu = space.check()?;
    let mut walk = Walk::new(space.config, space.cluster, gpu);
    walk.all(space.gpus);
    if walk.ranked.is_empty() {
        return Err(nothing_runs(space, gpu, walk));
    }
    front::rank(&mut walk.ranked);
    let front = front::pareto(&walk.ranked);
    let mut tutorial = Vec::new();
    for choice in choices(space.config_name, space.gpus) {
        let judgement = walk.judge(choice.candidate()?);
        tutorial.push(Standing::new(*choice, &walk.ranked, judgement));
    }
    let searched = walk.tally.total() + walk.ranked.len() as u64;
    Ok(Answer {
        gpus: space.gpus,
        gpu: gpu.name.clone(),
        memory_limit_gb: gpu.memory_gb,
        searched,
        estimates: walk.estimates,
        ranked: walk.ranked,
        front,
        exclusions: walk.tally.into_exclusions(),
        tutorial,
    })
}

/// One layout of `space`, through the search's rules and estimate: whether it runs, and if
/// not, the first rule it breaks.
pub fn judge(space: &Space<'_>, candidate: Candidate) -> Result<Judgement, Error> {
    let gpu = space.check()?;
    Ok(Walk::new(space.config, space.cluster, gpu).judge(candidate))
}

impl<'a> Space<'a> {
    /// The GPU to search for, or every reason the space cannot be searched.
    fn check(&self) -> Result<&'a GpuKind, Error> {
        let mut problems = Problems::default();
        match self.gpus {
            0 => problems.push("gpus", "must be at least 1, got 0"),
            n if n > MAX_WORLD => problems.push("gpus", format!("{n} is more than the {MAX_WORLD} a layout may have")),
            _ => {}
        }
        let (name, cluster) = (self.cluster_name, self.cluster);
        if cluster.gpus_per_node == 0 {
            problems.push("cluster", format!("`{name}` runs ranks on CPU cores; the search models GPU clusters"));
            return Err(Error::Invalid(problems));
        }
        if cluster.interconnect.is_none() || cluster.estimate.is_none() {
            problems.push("cluster", format!("`{name}` has no link speeds or no estimate factors, which predictions need"));
        }
        let known = || cluster.gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ");
        let gpu = match self.gpu {
            Some(wanted) => cluster.gpu(wanted).ok_or_else(|| format!("unknown GPU `{wanted}` on {name}; it has: {}", known())),
            None => cluster.gpus.first().ok_or_else(|| format!("{name} lists no GPU models")),
        };
        let gpu = gpu.map_err(|message| problems.push("gpu", message)).ok();
        match gpu {
            Some(gpu) if problems.is_empty() => Ok(gpu),
            _ => Err(Error::Invalid(problems)),
        }
    }
}

/// Why no layout of `space` runs: every rule that left layouts out, with its count and first
/// case, and the least memory a layout needed when memory is one of them.
fn nothing_runs(space: &Space<'_>, gpu: &GpuKind, walk: Walk<'_>) -> Error {
    let mut problems = Problems::default();
    let searched = walk.tally.total();
    let (gpus, name) = (space.gpus, space.config_name);
    let plural = if gpus == 1 { "" } else { "s" };
    problems.push("gpus", format!("no layout of {gpus} GPU{plural} runs `{name}` on the {}: all {searched} break a rule", gpu.name));
    let least = walk.tally.least_memory();
    for exclusion in walk.tally.into_exclusions() {
        problems.push(exclusion.field, format!("{} layouts: {}", exclusion.count, exclusion.example));
    }
    if let Some((memory_gb, candidate)) = least {
        problems.push(
            "memory",
            format!(
                "the layout that needs least, {candidate}, needs {memory_gb:.1} GiB per GPU; the {} has {:.0}",
                gpu.name, gpu.memory_gb
            ),
        );
    }
    Error::Invalid(problems)
}

#[cfg(test)]
mod tests;
