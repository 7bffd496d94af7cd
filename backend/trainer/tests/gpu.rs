//! The CUDA path on a real GPU: the model computes there what it computes on the CPU, fused
//! Adam takes the tensor-by-tensor steps, and `short`-shaped steps train under every precision
//! the tutorial's ladder uses.
//!
//! A CPU machine has no GPU to run them on, so they are ignored by default; on a GPU machine
//! run them with `--ignored` (the trainer built with `--features cuda`, see `bench/gpu/`).

mod support;

use scalebook_shared::config::{AmpMode, ConfigFile, Optimizer as Choice, TrainConfig};
use scalebook_trainer::data::Batch;
use scalebook_trainer::model::{VisionTransformer, VitSpec};
use scalebook_trainer::train::Learner;
use tch::{Device, Kind, Tensor, nn};

fn gpu() -> Device {
    assert!(tch::Cuda::is_available(), "no CUDA device: these tests need a GPU");
    Device::Cuda(0)
}

fn short() -> TrainConfig {
    let text = std::fs::read_to_string(format!("{}/../../config/ViT.yaml", std::env::var("CARGO_MANIFEST_DIR").unwrap())).unwrap();
    ConfigFile::parse(&text).unwrap().get("short").unwrap()
}

fn relative_error(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_kind(Kind::Double).to_device(Device::Cpu), b.to_kind(Kind::Double).to_device(Device::Cpu));
    f64::try_from((&a - &b).norm()).unwrap() / f64::try_from(b.norm()).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU and the `cuda` build"]
fn the_model_computes_on_the_gpu_what_it_computes_on_the_cpu() {
    let cuda = gpu();
    // Full float32 on both sides: TF32 would round the GPU's matmul inputs to 10 bits.
    scalebook_trainer::ffi::set_tf32(false).unwrap();
    let spec = VitSpec::from(&short());
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = VisionTransformer::new(&vs.root(), &spec);
    let x = Tensor::randn([2, 20, 360, 720], (Kind::Float, Device::Cpu));
    let on_cpu = tch::no_grad(|| model.forward(&x, false).unwrap());
    vs.set_device(cuda);
    let on_gpu = tch::no_grad(|| model.forward(&x.to_device(cuda), false).unwrap());
    assert_eq!(on_gpu.device(), cuda);
    let error = relative_error(&on_gpu, &on_cpu);
    assert!(error < 1e-4, "GPU against CPU: relative error {error:e}");
}

/// Parameters on `device` after three Adam steps, brought back to the CPU.
fn adam_steps(device: Device, fused: bool, scaled: bool) -> Vec<Tensor> {
    let irregular = |n: i64, offset: f64| (Tensor::arange(n, (Kind::Float, device)) * 1.7 + offset).sin().set_requires_grad(true);
    let ps = vec![("a".to_owned(), irregular(4096, 0.3)), ("b".to_owned(), irregular(77, 1.1))];
    support::optimizer::three_steps(&ps, Choice::Adam, fused, scaled).into_iter().map(|p| p.to_device(Device::Cpu)).collect()
}

#[test]
#[ignore = "needs a CUDA GPU and the `cuda` build"]
fn fused_adam_on_the_gpu_takes_the_cpus_steps() {
    let cuda = gpu();
    for scaled in [false, true] {
        let reference = adam_steps(Device::Cpu, false, scaled);
        for fused in [false, true] {
            let on_gpu = adam_steps(cuda, fused, scaled);
            for (g, c) in on_gpu.iter().zip(&reference) {
                let error = relative_error(g, c);
                assert!(error < 1e-6, "fused {fused}, scaled {scaled}: relative error {error:e}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU and the `cuda` build"]
fn short_shaped_steps_train_under_every_precision_of_the_ladder() {
    let cuda = gpu();
    for (amp, fused) in [(AmpMode::None, false), (AmpMode::Fp16, false), (AmpMode::Bf16, false), (AmpMode::Fp16, true)] {
        let mut config = short();
        config.amp_mode = amp;
        config.enable_fused = fused;
        tch::manual_seed(0);
        let (_vs, mut learner) = Learner::build(&config, cuda, None).unwrap();
        let shape = [config.global_batch_size as i64, 20, 360, 720];
        let input = Tensor::randn(shape, (Kind::Float, Device::Cpu));
        // A target the model can learn in a few steps: its input, scaled.
        let batch = Batch { target: &input * 0.5, input, indices: Vec::new() };
        let losses: Vec<f64> = (0..6).map(|_| learner.train_step(&batch, config.lr).unwrap().0).collect();
        assert!(losses.iter().all(|l| l.is_finite()), "{amp:?} fused {fused}: {losses:?}");
        assert!(losses[5] < losses[0], "{amp:?} fused {fused}: the loss did not fall: {losses:?}");
    }
}
