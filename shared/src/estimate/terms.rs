//! The explainable list: every number an estimate used or produced, named, with its unit and
//! where it comes from, so a learner can trace a verdict back to the figures behind it.

use serde::{Deserialize, Serialize};

use super::Estimate;
use super::comms::Collective;
use super::loader::Loader;
use super::memory::{MemoryBreakdown, SavedTensor};
use super::pipeline::PipelineEstimate;
use super::step::{Rates, StepTime};
use crate::cluster::{EstimateFactors, GpuKind, Interconnect};

/// Where a term's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TermKind {
    /// The GPU's or the network's data sheet (cluster file).
    Hardware,
    /// A named assumption of the cluster file's `estimate` section.
    Factor,
    /// Computed from the config, the layout and the terms above.
    Derived,
    /// What the estimate concludes.
    Result,
}

impl TermKind {
    pub const fn name(self) -> &'static str {
        match self {
            TermKind::Hardware => "hardware",
            TermKind::Factor => "factor",
            TermKind::Derived => "derived",
            TermKind::Result => "result",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Term {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub kind: TermKind,
    /// How the value was obtained, in words.
    pub note: String,
}

/// The cluster-side inputs, as terms.
pub(super) fn inputs(gpu: &GpuKind, links: &Interconnect, factors: &EstimateFactors, estimate: &Estimate) -> Vec<Term> {
    let precision = estimate.precision.name();
    let mut terms = vec![
        hardware(
            format!("peak_tflops.{precision}"),
            gpu.peak_tflops.get(estimate.precision),
            "TFLOP/s",
            "dense peak of the GPU for this matmul precision",
        ),
        hardware("hbm_tb_per_s", gpu.hbm_tb_per_s, "TB/s", "device memory bandwidth (the optimizer step is bound by it)"),
        hardware("memory_gb", gpu.memory_gb, "GiB", "device memory: the limit for \"fits\""),
        hardware("nvlink_gb_per_s", links.nvlink_gb_per_s, "GB/s", "NVLink per GPU and direction"),
        hardware("network_gb_per_s", links.network_gb_per_s, "GB/s", "network (NIC) per GPU and direction"),
        factor(
            format!("compute_efficiency.{precision}"),
            factors.compute_efficiency.get(estimate.precision),
            "",
            "fraction of peak sustained by the model's matmuls (calibrated, see the cluster file)",
        ),
        factor(
            "attention_full_rate_head_dim",
            factors.attention_full_rate_head_dim as f64,
            "",
            "half-precision fused attention reaches the full rate from this head size up",
        ),
        factor("nvlink_efficiency", factors.nvlink_efficiency, "", "ring bus bandwidth / NVLink figure"),
        factor("network_efficiency", factors.network_efficiency, "", "ring bus bandwidth / NIC figure"),
        factor("runtime_overhead_gb", factors.runtime_overhead_gb, "GiB", "CUDA context, cuBLAS and NCCL workspaces"),
        factor("allocator_factor", factors.allocator_factor, "", "allocator-held memory per byte of activations"),
    ];
    // The CPU's own terms; a GPU cluster leaves them at their neutral values.
    if factors.attention_efficiency != 1.0 {
        terms.push(factor("attention_efficiency", factors.attention_efficiency, "", "attention's rate / the matmuls' (measured)"));
    }
    if factors.seconds_per_op > 0.0 || factors.seconds_per_plain_op > 0.0 {
        terms.push(factor("seconds_per_op", factors.seconds_per_op * 1e6, "µs", "a forward op with its autograd record and backward"));
        terms.push(factor("seconds_per_plain_op", factors.seconds_per_plain_op * 1e6, "µs", "an op outside autograd"));
    }
    if factors.collective_latency_s > 0.0 {
        terms.push(factor("collective_latency", factors.collective_latency_s * 1e6, "µs", "one collective call before its bytes"));
    }
    if estimate.memory_gb.data_loader > 0.0 {
        terms.push(factor("dali_overhead_gb", factors.dali_overhead_gb, "GiB", "DALI loader's device buffers"));
    }
    if let Some(loader) = &factors.loader {
        terms.extend([
            factor(
                "loader.prepare_gb_per_s",
                loader.prepare_gb_per_s,
                "GB/s",
                "one reader preparing sample bytes already in memory: copy out of the file, normalise, collate, pin",
            ),
            factor("loader.storage_gb_per_s", loader.storage_gb_per_s, "GB/s", "one reader reading what the page cache does not hold"),
            factor(
                "loader.page_cache_gb_per_gpu",
                loader.page_cache_gb_per_gpu,
                "GiB",
                "host memory per GPU that keeps the dataset's pages",
            ),
        ]);
    }
    terms
}

/// The model-side numbers and the conclusions, as terms.
pub(super) fn outputs(estimate: &Estimate, rates: &Rates, loader: Option<&Loader>) -> Vec<Term> {
    let p = &estimate.params;
    let f = &estimate.flops;
    let mut terms = vec![
        derived("parameters", p.model.total as f64, "", "whole model"),
        derived("parameters_per_rank", p.per_rank as f64, "", "column- and row-parallel parts / tp, plus the replicated ones"),
        derived("local_batch_size", estimate.local_batch_size as f64, "samples", "per dp rank"),
        derived("tokens_per_rank", estimate.tokens_per_rank as f64, "tokens", "the largest cp chunk of the sequence"),
        derived("flops_per_sample_forward", f.per_sample_forward / 1e12, "TFLOP", "whole model: matmuls and attention"),
        derived("flops_per_sample_training", f.per_sample_training / 1e12, "TFLOP", "forward + backward (2× forward)"),
        derived("flops_per_rank_step", f.rank_step.total() / 1e12, "TFLOP", "one rank, its local batch, forward + backward"),
        derived("matmul_rate", rates.matmul / 1e12, "TFLOP/s", "peak × compute_efficiency"),
        derived(
            "attention_rate",
            rates.attention / 1e12,
            "TFLOP/s",
            &format!("matmul rate × {:.3} for the head size", rates.attention_factor),
        ),
    ];
    terms.extend(estimate.pipeline.as_ref().map(pipeline_terms).unwrap_or_default());
    if estimate.zero_stage > 0 {
        terms.push(derived(
            "zero_stage",
            f64::from(estimate.zero_stage),
            "",
            "what dp shards: 1 Adam's moments, 2 also the gradients, 3 also the weights",
        ));
    }
    terms.extend(estimate.saved_activations.iter().map(saved_term));
    terms.extend(memory_terms(&estimate.memory_gb));
    terms.extend(estimate.collectives.iter().map(collective_term));
    terms.extend(loader.map(|l| loader_terms(l, estimate.local_batch_size)).unwrap_or_default());
    terms.extend(time_terms(&estimate.time));
    terms.extend([
        result("samples_per_sec", estimate.samples_per_sec, "samples/s", "global batch / step time"),
        result("tflops_per_gpu", estimate.tflops_per_gpu, "TFLOP/s", "one rank's FLOPs per step / step time"),
        result("fits", if estimate.fits { 1.0 } else { 0.0 }, "bool", "memory total ≤ the GPU's memory"),
    ]);
    terms
}

fn pipeline_terms(p: &PipelineEstimate) -> Vec<Term> {
    let heaviest = &p.per_stage[p.heaviest_stage as usize];
    let held = format!("{} at its peak: stage {} of {}", p.schedule, p.heaviest_stage, p.stages);
    vec![
        derived("pipeline.micro_batches", p.micro_batches as f64, "", "num_micro_batches: slices of the local batch"),
        derived("pipeline.virtual_stages", p.virtual_stages as f64, "", "model chunks per stage (interleaved schedule)"),
        derived("pipeline.micro_batches_held", heaviest.micro_batches_held, "", &held),
        result("pipeline.bubble_fraction", p.bubble_fraction, "", "(p − 1)/(v·m + p − 1): the share of the step every stage idles"),
    ]
}

fn saved_term(t: &SavedTensor) -> Term {
    let note = format!("kept for the backward pass; {} of them per sample", t.count);
    derived(&format!("activation: {}", t.name), t.bytes_per_sample / (1024.0 * 1024.0), "MiB", &note)
}

fn memory_terms(memory: &MemoryBreakdown) -> Vec<Term> {
    let mut terms: Vec<Term> = memory.parts().iter().map(|(part, gb)| derived(&format!("memory.{part}"), *gb, "GiB", "per rank")).collect();
    terms.push(result("memory.total", memory.total, "GiB", "sum of the parts: NVML's figure after the forward pass"));
    terms
}

fn collective_term(c: &Collective) -> Term {
    let note = format!(
        "{} × {:.1} MiB over {} ranks on {} at {:.0} GB/s{}",
        c.count,
        c.bytes as f64 / (1024.0 * 1024.0),
        c.group_size,
        c.link.name(),
        c.bus_gb_per_s,
        if c.overlapped { ", under the backward pass" } else { "" }
    );
    derived(&format!("{} {} ({}): {}", c.group, c.operation.name(), c.phase.name(), c.what), c.seconds, "s", &note)
}

fn loader_terms(l: &Loader, local_batch: u64) -> Vec<Term> {
    let cached = format!("{:.0}% of the training set's {:.1} GB in the page cache", 100.0 * l.cached_share, l.dataset_bytes / 1e9);
    vec![
        derived("loader.sample_bytes", l.sample_bytes / 1e6, "MB", "input and target fields, float32"),
        derived("loader.cached_share", l.cached_share, "", &cached),
        derived(
            "loader.seconds_per_sample",
            l.seconds_per_sample,
            "s",
            "one reader: bytes / prepare rate + bytes not in the page cache / storage rate",
        ),
        derived("loader.readers", l.readers.count() as f64, "", &l.readers.words()),
        derived("loader.batch_read", l.seconds_per_sample * local_batch as f64, "s", "one reader, the rank's whole batch"),
    ]
}

fn time_terms(t: &StepTime) -> [Term; 13] {
    [
        derived("time.forward", t.forward_s, "s", "forward FLOPs / rates + element-wise bytes / memory bandwidth"),
        derived("time.backward", t.backward_s, "s", "the same for the backward pass"),
        derived("time.elementwise", t.elementwise_s, "s", "the memory-bound part of forward and backward"),
        derived("time.recompute", t.recompute_s, "s", "the forward pass again in backward (activation_checkpointing)"),
        derived("time.optimizer", t.optimizer_s, "s", "Adam's bytes / memory bandwidth"),
        derived("time.overhead", t.overhead_s, "s", "ops × what each costs beyond its arithmetic (0 on a GPU)"),
        derived("time.blocking_comm", t.blocking_comm_s, "s", "tp and cp collectives, pipeline transfers, ZeRO's gathers"),
        derived("time.overlapped_comm", t.overlapped_comm_s, "s", "gradient all-reduce (or ZeRO's reduce-scatter), full time"),
        derived("time.exposed_overlapped_comm", t.exposed_overlapped_comm_s, "s", "the part the backward pass does not hide"),
        derived(
            "time.data_loading",
            t.data_s,
            "s",
            if t.data_overlapped {
                "a batch's reading / the workers: what they need per step"
            } else {
                "the batch's reading, inside the step"
            },
        ),
        derived(
            "time.exposed_data_loading",
            t.exposed_data_s,
            "s",
            if t.data_overlapped { "the part the rest of the step does not hide" } else { "all of it: 0 workers read inside the step" },
        ),
        derived("time.bubble", t.bubble_s, "s", "a pipeline stage idle while it fills and drains: (p − 1)/v micro-batch passes"),
        result(
            "step_time",
            t.total_s,
            "s",
            "forward + backward + recompute + optimizer + overhead + blocking + exposed communication + bubble + exposed data loading",
        ),
    ]
}

fn term(name: impl Into<String>, value: f64, unit: &str, kind: TermKind, note: &str) -> Term {
    Term { name: name.into(), value, unit: unit.to_owned(), kind, note: note.to_owned() }
}

fn hardware(name: impl Into<String>, value: f64, unit: &str, note: &str) -> Term {
    term(name, value, unit, TermKind::Hardware, note)
}

fn factor(name: impl Into<String>, value: f64, unit: &str, note: &str) -> Term {
    term(name, value, unit, TermKind::Factor, note)
}

fn derived(name: &str, value: f64, unit: &str, note: &str) -> Term {
    term(name, value, unit, TermKind::Derived, note)
}

fn result(name: &str, value: f64, unit: &str, note: &str) -> Term {
    term(name, value, unit, TermKind::Result, note)
}
