//! `scalebook estimate`: will a config fit on a layout, how fast will it run, and where does the
//! time go, from the same `shared` model the browser shows beside the rank grid.

use std::fmt::{self, Display, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use scalebook_shared::cluster::{Cluster, Clusters, GpuKind};
use scalebook_shared::config::TrainConfig;
use scalebook_shared::estimate::{Estimate, EstimateOptions, estimate};
use scalebook_shared::layout::{Layout, Sizes};
use scalebook_shared::numbers::thousands;

use super::EXIT_INVALID_INPUT;
use super::config::{FileArgs, Invalid, in_file, load};

#[derive(Debug, clap::Args)]
pub struct EstimateArgs {
    /// The config's name in the file (e.g. short_opt, bs64_opt, mp).
    #[arg(long, value_name = "NAME")]
    config: String,
    #[command(flatten)]
    file: FileArgs,
    /// Override a key (repeatable): --set embed_dim=1024
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Tensor-parallel size (default: the config's tensor_parallel).
    #[arg(long)]
    tp: Option<u32>,
    /// Context-parallel size (default: the config's context_parallel).
    #[arg(long)]
    cp: Option<u32>,
    /// Pipeline stages (default: the config's pipeline_parallel).
    #[arg(long)]
    pp: Option<u32>,
    /// Micro-batches per step of a pipeline (default: the config's num_micro_batches).
    #[arg(long)]
    micro_batches: Option<u32>,
    /// The pipeline's schedule: gpipe, 1f1b or interleaved (default: the config's).
    #[arg(long)]
    schedule: Option<String>,
    /// Data-parallel size.
    #[arg(long, default_value_t = 1)]
    dp: u32,
    /// Dimension names, fastest varying first (default: the config's parallel_order).
    #[arg(long)]
    order: Option<String>,
    /// The cluster, from the clusters file.
    #[arg(long, default_value = "perlmutter")]
    cluster: String,
    /// The file of clusters, with their hardware figures and estimate factors.
    #[arg(long = "clusters", value_name = "FILE", default_value = "config/clusters.yaml")]
    clusters: PathBuf,
    /// The GPU model (default: the cluster's first).
    #[arg(long)]
    gpu: Option<String>,
    /// Run fp32 matmuls without TF32 (the tutorial's NVIDIA_TF32_OVERRIDE=0).
    #[arg(long)]
    no_tf32: bool,
    /// All-reduce the gradients after the backward pass instead of under it.
    #[arg(long)]
    no_overlap: bool,
    /// Print the estimate as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// For a cluster whose ranks run on CPU cores (`local`): where this machine's measured
    /// rates are cached (default: the user's cache directory; measured by the trainer the
    /// first time, about five seconds).
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// The trainer that measures this machine (default: `scalebook-train` beside this program).
    #[arg(long, value_name = "PATH")]
    trainer: Option<PathBuf>,
}

pub fn run(args: EstimateArgs) -> anyhow::Result<ExitCode> {
    match prepare(&args) {
        Ok(estimate) if args.json => super::print(format_args!("{}\n", serde_json::to_string_pretty(&estimate)?))?,
        Ok(estimate) => super::print(Report { args: &args, estimate: &estimate })?,
        Err(problems) => {
            eprintln!("{}", problems.join("\n"));
            return Ok(ExitCode::from(EXIT_INVALID_INPUT));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The estimate, or every problem with the input: the config, the layout and the cluster are
/// checked independently so that one run of the command reports them all.
fn prepare(args: &EstimateArgs) -> Result<Estimate, Vec<String>> {
    let mut problems = Vec::new();
    let config = effective_config(args).map_err(|e| problems.push(e.0)).ok();
    let layout = config.as_ref().and_then(|c| layout_of(c, args.dp).map_err(|e| problems.push(e.0)).ok());
    let clusters = load_clusters(&args.clusters).map_err(|e| problems.push(e.0)).ok();
    let cpu = clusters.as_ref().and_then(|c| c.get(&args.cluster).ok()).is_some_and(|c| c.gpus_per_node == 0);
    let target = match (&clusters, cpu) {
        (Some(_), true) => None,
        (Some(c), false) => pick_gpu(c, args).map_err(|e| problems.push(e)).ok().map(|(c, g)| (c.clone(), g.clone())),
        (None, _) => None,
    };
    let (Some(config), Some(layout)) = (config, layout) else {
        return Err(problems);
    };
    if cpu && let Some(gpu) = &args.gpu {
        problems.push(format!("gpu: `{}` runs on this machine's cores, which have no GPU `{gpu}` to pick; leave --gpu out", args.cluster));
        return Err(problems);
    }
    let (cluster, gpu) = match target {
        Some(target) => target,
        None if cpu => this_machine(args, &config, &layout).map_err(|e| vec![e])?,
        None => return Err(problems),
    };
    let options = EstimateOptions { tf32: !args.no_tf32, overlap_dp: !args.no_overlap };
    estimate(&config, &layout, &cluster, &gpu, &options).map_err(|e| vec![e.to_string()])
}

/// This machine as a cluster for `layout`'s ranks, from its cached (or new) measurement.
fn this_machine(args: &EstimateArgs, config: &TrainConfig, layout: &Layout) -> Result<(Cluster, GpuKind), String> {
    let trainer = match &args.trainer {
        Some(path) => path.clone(),
        None => std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("scalebook-train"),
    };
    let cache = args.machine.clone().unwrap_or_else(scalebook_server::predict::default_machine_cache);
    let machine = scalebook_server::machine::load_or_measure(&cache, &trainer).map_err(|e| e.to_string())?;
    machine.for_run(config, layout.world() as usize).map_err(|e| e.to_string())
}

/// The named config with the overrides, then the layout flags applied as overrides, so they
/// pass the config's own rules (tp must divide the heads, ...).
fn effective_config(args: &EstimateArgs) -> Result<TrainConfig, Invalid> {
    let mut config = load(&args.file.yaml)?.get(&args.config)?;
    config.apply_overrides(&args.set)?;
    let flags = [
        args.tp.map(|tp| format!("tensor_parallel={tp}")),
        args.cp.map(|cp| format!("context_parallel={cp}")),
        args.pp.map(|pp| format!("pipeline_parallel={pp}")),
        args.micro_batches.map(|m| format!("num_micro_batches={m}")),
        args.schedule.as_ref().map(|schedule| format!("pipeline_schedule={schedule}")),
        args.order.as_ref().map(|order| format!("parallel_order={order}")),
    ];
    config.apply_overrides(&flags.into_iter().flatten().collect::<Vec<_>>())?;
    Ok(config)
}

fn load_clusters(path: &Path) -> Result<Clusters, Invalid> {
    let text = std::fs::read_to_string(path).map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
    Clusters::parse(&text).map_err(|e| in_file(path, e))
}

fn pick_gpu<'c>(clusters: &'c Clusters, args: &EstimateArgs) -> Result<(&'c Cluster, &'c GpuKind), String> {
    let cluster = clusters.get(&args.cluster).map_err(|e| e.to_string())?;
    let known = || cluster.gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ");
    match &args.gpu {
        Some(name) => cluster
            .gpu(name)
            .map(|gpu| (cluster, gpu))
            .ok_or_else(|| format!("gpu: unknown GPU `{name}` on {}; it has: {}", args.cluster, known())),
        None => {
            cluster.gpus.first().map(|gpu| (cluster, gpu)).ok_or_else(|| format!("cluster: {} has no GPUs to estimate for", args.cluster))
        }
    }
}

fn layout_of(config: &TrainConfig, dp: u32) -> Result<Layout, Invalid> {
    Ok(Layout::new(config.sizes(dp as usize), &config.parallel_order)?)
}

/// The readable form: the verdict first, then memory, time, collectives and every term.
struct Report<'a> {
    args: &'a EstimateArgs,
    estimate: &'a Estimate,
}

impl Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.estimate;
        let Sizes { tp, cp, dp, pp } = e.layout.sizes();
        writeln!(
            f,
            "{} on {} {}: world {} = tp {tp} × cp {cp} × pp {pp} × dp {dp} (order {}), {}, local batch {} of {}",
            self.args.config,
            self.args.cluster,
            e.gpu,
            e.world,
            e.layout.effective_order(),
            e.precision.name(),
            e.local_batch_size,
            e.global_batch_size
        )?;
        let verdict = if e.fits { "fits" } else { "does NOT fit" };
        writeln!(
            f,
            "memory {:.1} of {:.0} GiB per GPU: {verdict}; step {:.3} s, {:.1} samples/s, {:.1} TFLOP/s per GPU",
            e.memory_gb.total, e.memory_limit_gb, e.step_time_s, e.samples_per_sec, e.tflops_per_gpu
        )?;
        writeln!(
            f,
            "parameters {} ({} per rank); {:.2} TFLOP per sample (forward + backward)\n",
            thousands(e.params.model.total),
            thousands(e.params.per_rank),
            e.flops.per_sample_training / 1e12
        )?;
        if let Some(p) = &e.pipeline {
            let heaviest = &p.per_stage[p.heaviest_stage as usize];
            writeln!(
                f,
                "pipeline: {} over {} stages, {} micro-batches, bubble {:.1}% ({:.4} s); memory is stage {}'s ({} blocks, {:.1} micro-batches held), time stage {}'s\n",
                p.schedule,
                p.stages,
                p.micro_batches,
                100.0 * p.bubble_fraction,
                e.time.bubble_s,
                p.heaviest_stage,
                heaviest.blocks,
                heaviest.micro_batches_held,
                p.slowest_stage
            )?;
        }
        f.write_str(&memory_table(e))?;
        f.write_str(&time_table(e))?;
        f.write_str(&collective_table(e))?;
        f.write_str(&term_table(e))
    }
}

fn memory_table(e: &Estimate) -> String {
    let mut out = String::from("memory per GPU (GiB)\n");
    for (part, gb) in e.memory_gb.parts() {
        let _ = writeln!(out, "  {part:<16} {gb:>8.2}");
    }
    let _ = writeln!(out, "  {:<16} {:>8.2}", "total", e.memory_gb.total);
    let zero: Vec<String> =
        e.zero_what_if.iter().map(|z| format!("{} {:.1}{}", z.stage, z.total_gb, if z.fits { "" } else { " (no)" })).collect();
    let _ = writeln!(out, "  by ZeRO stage (zero_stage, each runs): {}", zero.join(", "));
    let r = &e.recompute_what_if;
    let what = if r.recompute { "with" } else { "without" };
    let fits = if r.fits { "" } else { " (no)" };
    let _ = writeln!(out, "  {what} activation recomputation: {:.1}{fits}, {:.4} s per step\n", r.total_gb, r.step_time_s);
    out
}

fn time_table(e: &Estimate) -> String {
    let t = &e.time;
    let rows = [
        ("forward", t.forward_s),
        ("backward", t.backward_s),
        ("  of which element-wise", t.elementwise_s),
        ("recomputed forward", t.recompute_s),
        ("optimizer", t.optimizer_s),
        ("ops' overhead (CPU)", t.overhead_s),
        ("tp/cp/pp, ZeRO gathers", t.blocking_comm_s),
        ("pipeline bubble", t.bubble_s),
        ("dp gradients, exposed", t.exposed_overlapped_comm_s),
        ("  full time", t.overlapped_comm_s),
        ("data loading, waited for", t.exposed_data_s),
        (if t.data_overlapped { "  workers' time" } else { "  all inside the step" }, t.data_s),
        ("step", t.total_s),
    ];
    let mut out = String::from("time per step (s)\n");
    for (name, seconds) in rows {
        let _ = writeln!(out, "  {name:<24} {seconds:>9.4}");
    }
    out.push('\n');
    out
}

fn collective_table(e: &Estimate) -> String {
    if e.collectives.is_empty() {
        return "collectives per step: none (one rank)\n\n".to_owned();
    }
    let mut out = format!(
        "collectives per step\n  {:<5} {:<14} {:<8} {:>5} {:>10} {:<7} {:>6} {:>9}  what\n",
        "group", "operation", "phase", "count", "MiB/call", "link", "GB/s", "seconds"
    );
    for c in &e.collectives {
        let _ = writeln!(
            out,
            "  {:<5} {:<14} {:<8} {:>5} {:>10.1} {:<7} {:>6.0} {:>9.4}  {}{}",
            c.group.to_string(),
            c.operation.name(),
            c.phase.name(),
            c.count,
            c.bytes as f64 / (1024.0 * 1024.0),
            c.link.name(),
            c.bus_gb_per_s,
            c.seconds,
            c.what,
            if c.overlapped { " (under the backward pass)" } else { "" }
        );
    }
    out.push('\n');
    out
}

fn term_table(e: &Estimate) -> String {
    let mut out = String::from("terms\n");
    for t in e.terms() {
        let value = format!("{} {}", number(t.value), t.unit);
        let _ = writeln!(out, "  {:<9} {} = {}  ({})", t.kind.name(), t.name, value.trim_end(), t.note);
    }
    out
}

/// Four significant digits, without exponent noise for counts.
fn number(value: f64) -> String {
    if value != 0.0 && (value.abs() >= 1e6 || value.abs() < 1e-3) {
        format!("{value:.4e}")
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.4}")
    }
}
