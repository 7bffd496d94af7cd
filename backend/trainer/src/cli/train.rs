//! `scalebook-train train`: the tutorial's `train.py` with the shared config loader, so every
//! tutorial flag is an override (`--set amp_mode=fp16`, `--set num_data_workers=8`, ...).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressStyle};
use scalebook_trainer::dist::{Comm, RankEnv};
use scalebook_trainer::output::Logger;
use scalebook_trainer::train::{self, RunOptions};
use tch::Device;

use super::ConfigArgs;

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Where the run's outputs go. Default: the tutorial's `{expdir}/{config}/1GPU/{run_num}`.
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Sub-directory tag of the default run directory (the tutorial's `--run_num`).
    #[arg(long, default_value = "00")]
    run_num: String,
    /// Continue from the run directory's last checkpoint.
    #[arg(long)]
    resume: bool,
    /// Seed for the model's initialisation and the data order (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop (checkpointed) after this many epochs; continue later with --resume.
    #[arg(long)]
    max_epochs: Option<u64>,
    /// Seconds to wait for the other ranks (rendezvous and each collective).
    #[arg(long, default_value_t = 300)]
    dist_timeout: u64,
    /// `cpu`, `cuda` or `cuda:N` (default: the first GPU if there is one, else the CPU).
    #[arg(long)]
    device: Option<String>,
    /// TF32 for float32 matmuls on GPUs; `--tf32 false` is the tutorial's
    /// `NVIDIA_TF32_OVERRIDE=0`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    tf32: bool,
}

fn parse_device(text: Option<&str>) -> anyhow::Result<Device> {
    Ok(match text {
        None => Device::cuda_if_available(),
        Some("cpu") => Device::Cpu,
        Some("cuda") => Device::Cuda(0),
        Some(other) => match other.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Device::Cuda(n),
            None => anyhow::bail!("--device: expected cpu, cuda or cuda:N, got `{other}`"),
        },
    })
}

pub fn run(args: TrainArgs) -> anyhow::Result<ExitCode> {
    let env = RankEnv::from_env()?;
    let config = args.config.load(env.world)?;
    let layout = config.layout(env.world)?;
    let device = match parse_device(args.device.as_deref())? {
        // One GPU per local rank, shared where there are fewer GPUs than ranks.
        Device::Cuda(0) if env.world > 1 && args.device.is_none() => env.gpu(),
        device => device,
    };
    if device.is_cuda() && !tch::Cuda::is_available() {
        anyhow::bail!("--device {}: no CUDA device is available (CPU-only libtorch or no GPU)", args.device.unwrap_or_default());
    }
    // The tutorial's layout: `{world}GPU` for data parallelism, `{tp·cp}MP` for model parallelism.
    let model_parallel = config.model_parallel();
    let kind = if model_parallel > 1 { format!("{model_parallel}MP") } else { format!("{}GPU", env.world) };
    let run_dir = args.run_dir.unwrap_or_else(|| PathBuf::from(&config.expdir).join(&args.config.config).join(kind).join(&args.run_num));
    let seed = args.seed.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    let root = env.rank == 0;
    let progress = (root && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} steps {msg} [{elapsed} < {eta}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let log = if root { Logger::new(progress) } else { Logger::quiet() };
    let timeout = Duration::from_secs(args.dist_timeout);
    let comm = Rc::new(Comm::init(env, layout, device, timeout)?);
    let opts = RunOptions {
        config,
        config_name: args.config.config.clone(),
        yaml_path: args.config.yaml_config.clone(),
        run_dir,
        resume: args.resume,
        seed,
        device,
        tf32: args.tf32,
        max_epochs: args.max_epochs,
    };
    let summary = train::train(&opts, &log, comm)?;
    if let Some(bar) = log.progress() {
        bar.finish_and_clear();
    }
    log.info(&format!(
        "Finished {} steps: train loss {:.6}, valid loss {:.6}, RMSE(u10m) {:.6}",
        summary.steps, summary.final_train_loss, summary.final_valid_loss, summary.final_rmse_u10
    ));
    Ok(ExitCode::SUCCESS)
}
