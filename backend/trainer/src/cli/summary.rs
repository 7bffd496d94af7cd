//! `scalebook-train summary`: the tutorial's `test_model_dims.py` — the model of a config,
//! its parameter count, and one timed forward pass on random fields.

use std::process::ExitCode;
use std::time::Instant;

use scalebook_trainer::model::{VisionTransformer, VitSpec};
use tch::{Device, Kind, Tensor, nn};

use super::ConfigArgs;

#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Batch size of the forward pass.
    #[arg(long, default_value_t = 1)]
    batch: i64,
}

pub fn run(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load(1)?;
    let spec = VitSpec::from(&config);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = VisionTransformer::new(&vs.root(), &spec);
    let params: usize = vs.trainable_variables().iter().map(Tensor::numel).sum();
    let (gh, gw) = spec.grid();
    println!("config {}: ViT with {params} parameters", args.config.config);
    println!(
        "  embed_dim {} depth {} heads {} (head_dim {}) patch {} -> {gh} x {gw} = {} tokens",
        spec.embed_dim,
        spec.depth,
        spec.num_heads,
        spec.head_dim(),
        spec.patch_size,
        spec.num_tokens()
    );
    let [h, w] = spec.img_size;
    let input = Tensor::randn([args.batch, spec.in_chans, h, w], (Kind::Float, Device::Cpu));
    let start = Instant::now();
    let output = tch::no_grad(|| model.forward(&input, false))?;
    println!("  forward {:?} -> {:?} in {:.3} s", input.size(), output.size(), start.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}
