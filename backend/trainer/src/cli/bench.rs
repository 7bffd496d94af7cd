//! `scalebook-train bench`: training samples/s of a config, and data-loader samples/s alone
//! for 0, 1, 2 and 4 worker threads (the tutorial's data-loading lesson).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use scalebook_trainer::data::{DataLoader, Era5Dataset, ShardedSampler, Stats};
use scalebook_trainer::train::bench;
use tch::Device;

use super::ConfigArgs;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Timed training steps (after two untimed ones); 0 measures the data loader only.
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Batches read per data-loader measurement (after the same batches read untimed).
    #[arg(long, default_value_t = 24)]
    batches: usize,
    /// Worker counts to measure the data loader with.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4")]
    workers: Vec<usize>,
    /// TF32 for float32 matmuls on GPUs, as `train --tf32` (libtorch's own default is off).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    tf32: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let c = args.config.load(1)?;
    let device = Device::cuda_if_available();
    if device.is_cuda() {
        scalebook_trainer::ffi::set_tf32(args.tf32)?;
        println!("{}", scalebook_trainer::train::attention_line(&c, device));
    }
    println!("config {} on {device:?}, {} threads", args.config.config, tch::get_num_threads());
    if args.steps > 0 {
        let train = bench::training(&c, device, 2, args.steps)?;
        println!(
            "training:    {train:8.2} samples/s  (batch {}, amp {:?}, fused Adam {}, TF32 {})",
            c.global_batch_size,
            c.amp_mode,
            c.enable_jit || c.enable_fused,
            device.is_cuda() && args.tf32
        );
        // The whole device's used memory (context and the allocator's cache included), as the
        // tutorial's NVML lines read it; a PyTorch run's max_memory_allocated sits below it.
        if let Device::Cuda(i) = device
            && let Ok(used) = scalebook_trainer::ffi::gpu_memory_used(i)
        {
            println!("GPU memory:  {:8.2} GiB used (NVML)", used as f64 / f64::from(1 << 30));
        }
    }
    let stats = Stats::load(Path::new(&c.global_means_path), Path::new(&c.global_stds_path), c.n_in_channels)?;
    let dataset = Arc::new(Era5Dataset::open(Path::new(&c.train_data_path), c.img_size, c.n_in_channels, c.dt, c.limit_nsamples, stats)?);
    for workers in args.workers {
        let sampler = ShardedSampler::new(dataset.len(), 1, 0, true, 0)?;
        let loader = DataLoader::new(dataset.clone(), sampler, c.global_batch_size, workers)?.for_device(device).serial(c.serial_read);
        let rate = bench::data_loading(&loader, args.batches.min(loader.len()))?;
        let how = if workers == 0 && c.serial_read { ", samples read one by one" } else { "" };
        println!("data loader: {rate:8.2} samples/s  ({workers} workers{how})");
    }
    Ok(ExitCode::SUCCESS)
}
