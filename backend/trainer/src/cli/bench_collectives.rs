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
    /// Timed all-reduces (after one untimed).
    #[arg(long, default_value_t = 5)]
    iters: usize,
}

pub fn run(args: BenchCollectivesArgs) -> anyhow::Result<ExitCode> {
    let env = RankEnv::from_env()?;
    let n = env.world;
    let root = env.rank == 0;
    let layout = Layout::new(Sizes { dp: u32::try_from(n)?, ..Sizes::default() }, "tp-cp-dp")?;
    let device = if tch::Cuda::is_available() { Device::Cuda(env.local_rank) } else { Device::Cpu };
    let comm = Comm::init(env, layout, device.is_cuda(), Duration::from_secs(120))?;
    let group = comm.group(Token::DP);
    let elements = (args.mib << 20) / 4;
    let mut t = Tensor::ones([elements as i64], (Kind::Float, device));
    group.all_reduce(&mut t, ReduceOp::Sum)?;
    group.barrier()?;
    let start = Instant::now();
    for _ in 0..args.iters {
        group.all_reduce(&mut t, ReduceOp::Sum)?;
    }
    if device.is_cuda() {
        tch::Cuda::synchronize(0);
    }
    let secs = start.elapsed().as_secs_f64() / args.iters as f64;
    if root {
        let bytes = (elements * 4) as f64;
        let alg = bytes / secs / 1e9;
        let bus = alg * 2.0 * (n as f64 - 1.0) / n as f64;
        println!(
            "all-reduce of {} MiB over {n} ranks: {:.4} s, algorithm bandwidth {alg:.2} GB/s, bus bandwidth {bus:.2} GB/s",
            args.mib, secs
        );
    }
    Ok(ExitCode::SUCCESS)
}
