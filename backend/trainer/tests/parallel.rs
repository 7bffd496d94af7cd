//! Tensor and context parallelism against the serial model, as the tutorial's
//! tests/test_distributed.py checks them: forward outputs and input gradients of the attention
//! and MLP blocks and of the whole model within 1e-4 relative error, over real Gloo groups, at
//! the tutorial's full token count (360x720 fields, patch 8: 4050 tokens, split 1013, 1013,
//! 1013, 1011 over cp = 4) with a small width.

mod support;

use std::collections::HashMap;
use std::rc::Rc;

use scalebook_shared::layout::Sizes;
use scalebook_trainer::model::{Attention, Forward, Mlp, Part, VisionTransformer, VitSpec};
use scalebook_trainer::parallel::{Parallel, ParallelAttention, ParallelMlp, ParallelVit};
use support::{ranks, relative_error};
use tch::{Device, Kind, Tensor, nn, nn::ModuleT};

const TOL: f64 = 1e-4;
const TOKENS: i64 = 4050;

fn spec() -> VitSpec {
    VitSpec {
        img_size: [360, 720],
        patch_size: 8,
        in_chans: 20,
        out_chans: 20,
        embed_dim: 32,
        depth: 1,
        num_heads: 4,
        mlp_ratio: 4,
        dropout: 0.0,
        norm_eps: 1e-6,
        recompute: false,
        fused_qkv: false,
    }
}

fn seeded_randn(seed: i64, shape: &[i64]) -> Tensor {
    tch::manual_seed(seed);
    Tensor::randn(shape, (Kind::Float, Device::Cpu))
}

/// Compares output and input gradient of a token-wise block: `serial` sees all tokens,
/// `parallel` this rank's share of them.
fn compare_block(name: &str, par: &Parallel, serial: impl Fn(&Tensor) -> Tensor, parallel: impl Fn(&Tensor) -> Tensor) {
    let x = seeded_randn(11, &[2, TOKENS, 32]).set_requires_grad(true);
    let upstream = seeded_randn(12, &[2, TOKENS, 32]);
    let y = serial(&x);
    (&y * &upstream).sum(Kind::Float).backward();

    let (start, len) = par.my_tokens();
    let mine = |t: &Tensor| t.narrow(1, start, len);
    let x_local = mine(&x).detach().set_requires_grad(true);
    let y_local = parallel(&x_local);
    (&y_local * mine(&upstream)).sum(Kind::Float).backward();

    let out = relative_error(&y_local, &mine(&y));
    let grad = relative_error(&x_local.grad(), &mine(&x.grad()));
    assert!(out < TOL && grad < TOL, "{name}: output error {out:e}, input-gradient error {grad:e}");
}

fn check<F: Fn()>(test: F, tp: u32, cp: u32, order: &str) {
    let Some(comm) = ranks(test, Sizes { tp, cp, ..Sizes::default() }, order) else { return };
    let par = Parallel::new(Rc::new(comm), TOKENS as usize);
    let spec = spec();

    // Attention and MLP blocks alone.
    tch::manual_seed(1);
    let vs = nn::VarStore::new(Device::Cpu);
    let attn = Attention::new(&(vs.root() / "attn"), &spec);
    let mlp = Mlp::new(&(vs.root() / "mlp"), 32, 128, 0.0);
    let vars: HashMap<String, Tensor> = vs.variables();
    let pvs = nn::VarStore::new(Device::Cpu);
    let pattn = ParallelAttention::cut(&(pvs.root() / "attn"), &vars, "attn", &par, 4, 0.0).unwrap();
    let pmlp = ParallelMlp::cut(&(pvs.root() / "mlp"), &vars, "mlp", &par, 0.0).unwrap();
    compare_block("attention", &par, |x| attn.forward_t(x, false), |x| pattn.forward(x, false).unwrap());
    compare_block("mlp", &par, |x| mlp.forward_t(x, false), |x| pmlp.forward(x, false).unwrap());

    // The whole model, fields in and fields out.
    tch::manual_seed(2);
    let vs = nn::VarStore::new(Device::Cpu);
    let serial = VisionTransformer::new(&vs.root(), &spec);
    let pvs = nn::VarStore::new(Device::Cpu);
    let parallel = ParallelVit::cut(&pvs.root(), &spec, &vs.variables(), par.clone(), &Part::whole(spec.depth as usize)).unwrap();
    let x = seeded_randn(21, &[1, 20, 360, 720]).set_requires_grad(true);
    let upstream = seeded_randn(22, &[1, 20, 360, 720]);
    let y = serial.forward(&x, false).unwrap();
    (&y * &upstream).sum(Kind::Float).backward();
    let xp = x.detach().set_requires_grad(true);
    let yp = parallel.forward(&xp, false).unwrap();
    (&yp * &upstream).sum(Kind::Float).backward();
    let (out, grad) = (relative_error(&yp, &y), relative_error(&xp.grad(), &x.grad()));
    assert!(out < TOL && grad < TOL, "model: output error {out:e}, input-gradient error {grad:e}");
}

#[test]
fn tensor_parallel_2() {
    check(tensor_parallel_2, 2, 1, "tp-cp-dp");
}

#[test]
fn context_parallel_2() {
    check(context_parallel_2, 1, 2, "tp-cp-dp");
}

#[test]
fn tensor_parallel_4() {
    check(tensor_parallel_4, 4, 1, "tp-cp-dp");
}

#[test]
fn context_parallel_4_with_uneven_chunks() {
    check(context_parallel_4_with_uneven_chunks, 1, 4, "cp-tp-dp");
}

#[test]
fn tensor_2_by_context_2() {
    check(tensor_2_by_context_2, 2, 2, "cp-tp-dp");
}
