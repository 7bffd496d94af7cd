//! `scalebook-train machine`: this machine as a step estimate sees it (`scalebook_shared::machine`),
//! measured with libtorch's own kernels: float32 matrix products at the CPU configs' widths,
//! a large copy, and the cost of a tiny op, with one thread and with every core. About two
//! seconds; the server and `scalebook estimate` cache what it prints.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use scalebook_shared::machine::{MachineModel, ThreadRates, WIDTHS};
use tch::{Device, Kind, Tensor};

/// Rows of the measured products: a batch of tokens as the CPU configs have (cpu_short: 8 x
/// 450 = 3600, cpu_tiny: 4 x 72 = 288).
const TOKENS: i64 = 2048;
/// How long each rate is measured for, after one untimed call.
const SPELL: Duration = Duration::from_millis(150);

#[derive(Debug, clap::Args)]
pub struct MachineArgs {
    /// Print the measurement as JSON (what the server caches) instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: MachineArgs) -> anyhow::Result<ExitCode> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let process_baseline_gb = resident_gb();
    let mut counts = vec![1, cores];
    counts.dedup();
    let by_threads: Vec<ThreadRates> = counts.into_iter().map(measure).collect();
    tch::set_num_threads(cores as i32);
    let model = MachineModel {
        cores,
        memory_gb: memory_gb(),
        process_baseline_gb,
        by_threads,
        measured_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    };
    if args.json {
        println!("{}", serde_json::to_string(&model)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{cores} cores, {:.1} GiB of memory, {:.2} GiB per trainer process at rest", model.memory_gb, model.process_baseline_gb);
    for r in &model.by_threads {
        let matmuls: Vec<String> = WIDTHS.iter().zip(&r.matmul_gflops).map(|(w, g)| format!("{g:.1} (width {w})")).collect();
        println!(
            "{} thread(s): matmul GFLOP/s {}; copy {:.1} GB/s; {:.1} µs per tiny op",
            r.threads,
            matmuls.join(", "),
            r.copy_gb_per_s,
            r.op_overhead_us
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn measure(threads: usize) -> ThreadRates {
    tch::set_num_threads(threads as i32);
    let matmul_gflops = WIDTHS
        .iter()
        .map(|&width| {
            let (k, n) = (width as i64, 4 * width as i64);
            let (a, b) = (Tensor::randn([TOKENS, k], (Kind::Float, Device::Cpu)), Tensor::randn([k, n], (Kind::Float, Device::Cpu)));
            let per_call = timed(|| drop(a.matmul(&b)));
            2.0 * (TOKENS * k * n) as f64 / per_call / 1e9
        })
        .collect();
    // 128 MB each way: past every cache.
    let source = Tensor::randn([32 << 20], (Kind::Float, Device::Cpu));
    let mut target = source.zeros_like();
    let copy = timed(|| target.copy_(&source));
    let mut tiny = Tensor::zeros([1], (Kind::Float, Device::Cpu));
    let op = timed(|| drop(tiny.g_add_scalar_(1.0)));
    ThreadRates { threads, matmul_gflops, copy_gb_per_s: 2.0 * (source.numel() * 4) as f64 / copy / 1e9, op_overhead_us: op * 1e6 }
}

/// Seconds per call of `f`, over calls for about [`SPELL`] after one untimed call.
fn timed(mut f: impl FnMut()) -> f64 {
    f();
    let (start, mut calls) = (Instant::now(), 0u32);
    while start.elapsed() < SPELL || calls < 3 {
        f();
        calls += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(calls)
}

/// This process's resident memory now, GiB (`/proc/self/status`'s VmRSS, in KiB).
fn resident_gb() -> f64 {
    proc_kib("/proc/self/status", "VmRSS:") / f64::from(1u32 << 20)
}

/// The machine's memory, GiB (`/proc/meminfo`'s MemTotal, in KiB).
fn memory_gb() -> f64 {
    proc_kib("/proc/meminfo", "MemTotal:") / f64::from(1u32 << 20)
}

/// The KiB figure on the line of `file` that starts with `key` (0 where there is none).
fn proc_kib(file: &str, key: &str) -> f64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok()).unwrap_or(0.0)
}
