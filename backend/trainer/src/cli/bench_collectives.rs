//! `scalebook-train bench-collectives`, run under the launcher: all-reduce time and bandwidth
//! of the world's Gloo (or NCCL) group, reported like nccl-tests (algorithm bandwidth = bytes
//! / time; bus bandwidth = that × 2(n−1)/n, what each link carries in a ring).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use scalebook_shared::layout::{Layout, Sizes, Token};
use scalebook_trainer::dist::{Comm, RankEnv};
use scalebook_trainer::ffi::ReduceOp;
use tch::{Device, Kind, Tensor};

#[derive(Debug, clap::Args)]
pub struct BenchCollectivesArgs {
    /// Message size in MiB (float32).
    #[arg(long, default_value_t = 88)]
    mib: usize,
    /// Message size in KiB instead, for the latency of small messages.
    #[arg(long, conflicts_with = "mib")]
    kib: Option<usize>,
    /// Timed all-reduces (after one untimed).
    #[arg(long, default_value_t = 5)]
    iters: usize,
}

pub fn run(args: BenchCollectivesArgs) -> anyhow::Result<ExitCode> {
    let env = RankEnv::from_env()?;
    let n = env.world;
    let root = env.rank == 0;
    let layout = Layout::new(Sizes { dp: u32::try_from(n)?, ..Sizes::default() }, "tp-cp-dp")?;
    let device = if tch::Cuda::is_available() { env.gpu() } else { Device::Cpu };
    let comm = Comm::init(env, layout, device, Duration::from_secs(120))?;
    let group = comm.group(Token::DP);
    let bytes = args.kib.map_or(args.mib << 20, |kib| kib << 10);
    let elements = (bytes / 4).max(1);
    let mut t = Tensor::ones([elements as i64], (Kind::Float, device));
    group.all_reduce(&mut t, ReduceOp::Sum)?;
    group.barrier()?;
    let start = Instant::now();
    for _ in 0..args.iters {
        group.all_reduce(&mut t, ReduceOp::Sum)?;
    }
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
    let secs = start.elapsed().as_secs_f64() / args.iters as f64;
    if root {
        let bytes = (elements * 4) as f64;
        let alg = bytes / secs / 1e9;
        let bus = alg * 2.0 * (n as f64 - 1.0) / n as f64;
        let size = args.kib.map_or_else(|| format!("{} MiB", args.mib), |kib| format!("{kib} KiB"));
        println!("all-reduce of {size} over {n} ranks: {secs:.6} s, algorithm bandwidth {alg:.2} GB/s, bus bandwidth {bus:.2} GB/s");
    }
    Ok(ExitCode::SUCCESS)
}
