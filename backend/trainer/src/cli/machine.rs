//! `scalebook-train machine`: this machine as a step estimate sees it (`scalebook_shared::machine`),
//! measured with libtorch's own kernels: float32 matrix products at the CPU configs' widths,
//! their attention, a large copy, the cost of a tiny op alone and inside a training step, with
//! one thread and with every core; and an all-reduce between two local ranks (this program
//! under its own launcher). About five seconds; the server and `scalebook estimate` cache what
//! it prints.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use scalebook_shared::machine::{ATTENTION_SHAPES, MachineModel, ThreadRates, WIDTHS};
use tch::{Device, Kind, Tensor};

/// Rows of the measured products: a batch of tokens as the CPU configs have (cpu_short: 8 x
/// 450 = 3600, cpu_tiny: 4 x 72 = 288).
const TOKENS: i64 = 2048;
/// How long each rate is measured for, after one untimed call: in [`SPELLS`] spells, of which
/// the fastest counts (other work that takes the cores for a moment slows some spells, not the
/// machine).
const SPELL: Duration = Duration::from_millis(150);
const SPELLS: u32 = 3;

#[derive(Debug, clap::Args)]
pub struct MachineArgs {
    /// Print the measurement as JSON (what the server caches) instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: MachineArgs) -> anyhow::Result<ExitCode> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_at_measurement = load_average();
    let process_baseline_gb = resident_gb();
    let mut counts = vec![1, cores];
    counts.dedup();
    let by_threads: Vec<ThreadRates> = counts.into_iter().map(measure).collect();
    tch::set_num_threads(cores as i32);
    let (collective_latency_s, large) = (all_reduce_seconds("--kib", 4)?, all_reduce_seconds("--mib", 16)?);
    let model = MachineModel {
        cores,
        memory_gb: memory_gb(),
        process_baseline_gb,
        by_threads,
        collective_latency_s,
        // A ring all-reduce of 2 ranks carries the message once each way (bus = algorithm).
        collective_gb_per_s: (16 << 20) as f64 / (large - collective_latency_s).max(1e-9) / 1e9,
        measured_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        load_at_measurement,
    };
    if args.json {
        println!("{}", serde_json::to_string(&model)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{cores} cores, {:.1} GiB of memory, {:.2} GiB per trainer process at rest", model.memory_gb, model.process_baseline_gb);
    if let Some(load) = model.load_at_measurement {
        println!("measured at a load of {load:.2} (other work on the cores lowers every rate)");
    }
    if let Some(why) = model.contention() {
        println!("not this machine's own rates: {why}; measure again when the cores are idle");
    }
    for r in &model.by_threads {
        let matmuls: Vec<String> = WIDTHS.iter().zip(&r.matmul_gflops).map(|(w, g)| format!("{g:.1} (width {w})")).collect();
        let attention: Vec<String> =
            ATTENTION_SHAPES.iter().zip(&r.attention_gflops).map(|((t, d), g)| format!("{g:.1} ({t} tokens, heads of {d})")).collect();
        println!("{} thread(s): matmul GFLOP/s {}", r.threads, matmuls.join(", "));
        println!("    attention GFLOP/s {}", attention.join(", "));
        println!(
            "    copy {:.1} GB/s; {:.1} µs per tiny op, {:.1} µs per op of a training step",
            r.copy_gb_per_s, r.op_overhead_us, r.step_op_us
        );
    }
    println!(
        "all-reduce between 2 local ranks: {:.0} µs before its bytes, then {:.2} GB/s",
        model.collective_latency_s * 1e6,
        model.collective_gb_per_s
    );
    Ok(ExitCode::SUCCESS)
}

fn measure(threads: usize) -> ThreadRates {
    tch::set_num_threads(threads as i32);
    let mut cpu_share = None;
    let matmul_gflops = WIDTHS
        .iter()
        .map(|&width| {
            let (k, n) = (width as i64, 4 * width as i64);
            let (a, b) = (Tensor::randn([TOKENS, k], (Kind::Float, Device::Cpu)), Tensor::randn([k, n], (Kind::Float, Device::Cpu)));
            let (cpu, wall) = (cpu_seconds(), Instant::now());
            let per_call = timed(|| drop(a.matmul(&b)));
            // The widest product keeps every thread busy: what share of their time they had.
            cpu_share = Some((cpu_seconds() - cpu) / (wall.elapsed().as_secs_f64() * threads as f64));
            2.0 * (TOKENS * k * n) as f64 / per_call / 1e9
        })
        .collect();
    // 128 MB each way: past every cache.
    let source = Tensor::randn([32 << 20], (Kind::Float, Device::Cpu));
    let mut target = source.zeros_like();
    let copy = timed(|| target.copy_(&source));
    let mut tiny = Tensor::zeros([1], (Kind::Float, Device::Cpu));
    let op = timed(|| drop(tiny.g_add_scalar_(1.0)));
    ThreadRates {
        threads,
        matmul_gflops,
        attention_gflops: ATTENTION_SHAPES.iter().map(|&(tokens, head)| attention_gflops(tokens as i64, head as i64)).collect(),
        copy_gb_per_s: 2.0 * (source.numel() * 4) as f64 / copy / 1e9,
        op_overhead_us: op * 1e6,
        step_op_us: step_op_seconds() * 1e6,
        cpu_share,
    }
}

/// This process's CPU time so far, user and system, s (0 where the system does not say).
fn cpu_seconds() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |usage| seconds(usage.user_time()) + seconds(usage.system_time()))
}

/// Attention forward and backward over 4 heads of `tokens` x `head`, for a batch of 8.
fn attention_gflops(tokens: i64, head: i64) -> f64 {
    let qkv = || Tensor::randn([8, 4, tokens, head], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let (q, k, v) = (qkv(), qkv(), qkv());
    let seconds = timed(|| {
        let y = Tensor::scaled_dot_product_attention(&q, &k, &v, None::<&Tensor>, 0.0, false, None, false);
        y.sum(Kind::Float).backward();
    });
    // 4·T²·d per head forward (two products), twice that backward.
    3.0 * 4.0 * (8 * 4 * tokens * tokens * head) as f64 / seconds / 1e9
}

/// Seconds per forward op of a chain of tiny element-wise ops, with autograd recording and
/// the backward pass that walks it.
fn step_op_seconds() -> f64 {
    const OPS: usize = 100;
    let x = Tensor::randn([8, 16], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let seconds = timed(|| {
        let mut y = x.shallow_clone();
        for _ in 0..OPS / 2 {
            y = (y * 1.01).gelu("none");
        }
        y.sum(Kind::Float).backward();
    });
    seconds / OPS as f64
}

/// Seconds of one all-reduce of `size` (`--kib N` or `--mib N`) between two local ranks: this
/// program's own launcher and `bench-collectives`.
fn all_reduce_seconds(unit: &str, size: usize) -> anyhow::Result<f64> {
    let me = scalebook_shared::program::restartable(std::env::current_exe().context("finding this program to launch it")?);
    let out = std::process::Command::new(me)
        .args(["launch", "--nproc", "2", "--", "bench-collectives", unit, &size.to_string(), "--iters", "20"])
        .output()
        .context("launching two ranks for an all-reduce")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let seconds = text.lines().find_map(|l| l.split(": ").nth(1)?.split(" s,").next()?.trim().parse::<f64>().ok());
    seconds.with_context(|| format!("the all-reduce of two ranks printed no time: {}{}", text, String::from_utf8_lossy(&out.stderr)))
}

/// Seconds per call of `f`: the fastest of [`SPELLS`] spells of calls lasting about [`SPELL`]
/// together, after one untimed call.
fn timed(mut f: impl FnMut()) -> f64 {
    f();
    (0..SPELLS)
        .map(|_| {
            let (start, mut calls) = (Instant::now(), 0u32);
            while start.elapsed() < SPELL / SPELLS || calls < 3 {
                f();
                calls += 1;
            }
            start.elapsed().as_secs_f64() / f64::from(calls)
        })
        .fold(f64::INFINITY, f64::min)
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

/// The one-minute load average, where the system says it (`/proc/loadavg`).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}
