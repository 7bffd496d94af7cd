//! Gradient accumulation and activation recomputation change where a step's memory goes, not
//! what it computes: the parameters after a few steps match the plain step's.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use scalebook_shared::config::TrainConfig;
use scalebook_trainer::Error;
use scalebook_trainer::ffi::{Recomputable, recompute, shared_part};
use scalebook_trainer::train::Learner;
use support::{formula_batch, max_difference};
use tch::{Device, Kind, Tensor};

/// Trains `variant` and the plain `config` from the same parameters on the same batches and
/// returns the largest parameter difference after three steps.
fn difference_after_three_steps(config: &TrainConfig, variant: &TrainConfig, samples: i64) -> f64 {
    let (plain_vs, mut plain) = Learner::build(config, Device::Cpu, None).unwrap();
    let (mut other_vs, mut other) = Learner::build(variant, Device::Cpu, None).unwrap();
    other_vs.copy(&plain_vs).unwrap();
    let batch = formula_batch(config, samples);
    for step in 0..3 {
        let (a, _) = plain.train_step(&batch, config.lr).unwrap();
        let (b, _) = other.train_step(&batch, config.lr).unwrap();
        assert!((a - b).abs() <= 1e-6 * a.abs(), "step {step}: loss {a} plain, {b} with the variant");
    }
    let other_vars = other_vs.variables();
    plain_vs.variables().iter().map(|(name, p)| max_difference(&other_vars[name], p)).fold(0.0, f64::max)
}

#[test]
fn micro_batches_compute_the_step_of_the_whole_batch() {
    let config = support::cpu_tiny();
    // Seven samples in three micro-batches: uneven slices (2, 2, 3), weighted by their share.
    let accumulated = TrainConfig { gradient_accumulation_steps: 3, ..config.clone() };
    let error = difference_after_three_steps(&config, &accumulated, 7);
    assert!(error <= 1e-5, "parameters differ by {error}");
}

#[test]
fn recomputed_activations_give_the_same_step() {
    let config = support::cpu_tiny();
    let recomputed = TrainConfig { activation_checkpointing: true, ..config.clone() };
    // The same operations on the same values: only the order of the graph's work changes.
    let error = difference_after_three_steps(&config, &recomputed, 4);
    assert!(error <= 1e-6, "parameters differ by {error}");
    // Dropout draws the same masks when a block runs again in backward.
    let with_dropout = TrainConfig { dropout: 0.1, ..config.clone() };
    tch::manual_seed(7);
    let (plain_vs, mut plain) = Learner::build(&with_dropout, Device::Cpu, None).unwrap();
    let (mut other_vs, mut other) =
        Learner::build(&TrainConfig { activation_checkpointing: true, ..with_dropout.clone() }, Device::Cpu, None).unwrap();
    other_vs.copy(&plain_vs).unwrap();
    let batch = formula_batch(&config, 4);
    tch::manual_seed(11);
    plain.train_step(&batch, config.lr).unwrap();
    tch::manual_seed(11);
    other.train_step(&batch, config.lr).unwrap();
    let other_vars = other_vs.variables();
    for (name, p) in plain_vs.variables() {
        let error = max_difference(&other_vars[&name], &p);
        assert!(error <= 1e-6, "{name} differs by {error} with dropout");
    }
}

/// A part that counts its runs: y = tanh(x·w).
struct Counted {
    weight: Tensor,
    runs: AtomicUsize,
}

impl Recomputable for Counted {
    fn run(&self, x: &Tensor) -> Result<Tensor, Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(x.matmul(&self.weight).tanh())
    }
}

#[test]
fn a_recomputed_part_runs_again_in_backward_and_nowhere_else() {
    let weight = Tensor::randn([3, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let part = shared_part(Counted { weight: weight.shallow_clone(), runs: AtomicUsize::new(0) });
    let x = Tensor::randn([2, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let y = recompute(&part, &x).unwrap();
    assert_eq!(part.runs.load(Ordering::SeqCst), 1);
    (&y * 2.0).sum(Kind::Float).backward();
    assert_eq!(part.runs.load(Ordering::SeqCst), 2, "backward ran the part again");
    let (recomputed_x, recomputed_w) = (x.grad(), weight.grad());
    let (x2, w2) = (x.detach().set_requires_grad(true), weight.detach().set_requires_grad(true));
    (x2.matmul(&w2).tanh() * 2.0).sum(Kind::Float).backward();
    assert_eq!(max_difference(&recomputed_x, &x2.grad()), 0.0);
    assert_eq!(max_difference(&recomputed_w, &w2.grad()), 0.0);
    drop(y);
    assert_eq!(Arc::strong_count(&part), 1, "the graph released the part");
    // Without gradients no graph is made and nothing runs again.
    let _ = tch::no_grad(|| recompute(&part, &x).unwrap());
    assert_eq!(part.runs.load(Ordering::SeqCst), 3);
    assert_eq!(Arc::strong_count(&part), 1);
}
