//! The optimizers: Adam's fused kernel and its tensor-by-tensor update agree and follow the
//! formula; AdamW decays before the Adam update; SGD keeps a momentum buffer.

mod support;

use scalebook_shared::config::Optimizer as Choice;
use scalebook_trainer::train::amp::GradScaler;
use scalebook_trainer::train::optim::{ADAMW_WEIGHT_DECAY, BETA1, BETA2, EPS, Optimizer, SGD_MOMENTUM};
use tch::{Device, Kind, Tensor};

/// Irregular starting values from a formula, not from libtorch's one global generator: the
/// tests of this file run on several threads, and seeding that generator from each would
/// interleave their draws.
fn params() -> Vec<(String, Tensor)> {
    let irregular = |shape: &[i64], offset: f64| {
        let n: i64 = shape.iter().product();
        (Tensor::arange(n, (Kind::Float, Device::Cpu)) * 1.7 + offset).sin().reshape(shape).set_requires_grad(true)
    };
    vec![("a".to_owned(), irregular(&[3, 4], 0.3)), ("b".to_owned(), irregular(&[5], 1.1))]
}

fn optimizer(choice: Choice, ps: &[(String, Tensor)], fused: bool) -> Optimizer {
    Optimizer::new(choice, ps.iter().map(|(n, p)| (n.clone(), p.shallow_clone())).collect(), fused)
}

/// Three steps of `choice` from the starting values, returning the parameters.
fn run_with(choice: Choice, fused: bool, scaled: bool) -> Vec<Tensor> {
    support::optimizer::three_steps(&params(), choice, fused, scaled)
}

fn run(fused: bool, scaled: bool) -> Vec<Tensor> {
    run_with(Choice::Adam, fused, scaled)
}

/// The largest difference; infinite where either side holds a NaN (`f64::max` would drop it).
fn max_diff(a: &[Tensor], b: &[Tensor]) -> f64 {
    let diff = |x: &Tensor, y: &Tensor| f64::try_from((x - y).abs().max()).unwrap();
    a.iter().zip(b).map(|(x, y)| diff(x, y)).map(|d| if d.is_nan() { f64::INFINITY } else { d }).fold(0.0, f64::max)
}

#[test]
fn fused_and_unfused_adam_take_the_same_steps() {
    let (plain, fused) = (run(false, false), run(true, false));
    assert!(max_diff(&plain, &fused) < 1e-6, "{}", max_diff(&plain, &fused));
    // And the parameters did move.
    let start: Vec<Tensor> = params().into_iter().map(|(_, p)| p.detach()).collect();
    assert!(max_diff(&plain, &start) > 1e-3);
}

#[test]
fn loss_scaling_does_not_change_the_steps() {
    let plain = run(false, false);
    assert!(max_diff(&plain, &run(false, true)) < 1e-6);
    assert!(max_diff(&plain, &run(true, true)) < 1e-6);
}

#[test]
fn an_overflowed_step_changes_nothing_but_the_scale() {
    for fused in [false, true] {
        let ps = params();
        let mut adam = optimizer(Choice::Adam, &ps, fused);
        let mut scaler = GradScaler::new(Device::Cpu, None);
        let before: Vec<Tensor> = ps.iter().map(|(_, p)| p.detach().copy()).collect();
        adam.zero_grad();
        // Gradients of 1e38 times the scale overflow float32.
        let loss = ps.iter().map(|(_, p)| (p * 1e38).sum(Kind::Float)).fold(Tensor::from(0.0f32), |a, b| a + b);
        scaler.scale(&loss).backward();
        adam.step(1e-2, Some(&mut scaler)).unwrap();
        scaler.update();
        let after: Vec<Tensor> = ps.iter().map(|(_, p)| p.detach()).collect();
        assert_eq!(max_diff(&before, &after), 0.0, "fused {fused}: the parameters moved");
        let steps: Vec<f64> =
            adam.state().iter().filter(|(n, _)| n.starts_with("adam.step")).map(|(_, t)| f64::try_from(t).unwrap()).collect();
        assert_eq!(steps, [0.0, 0.0], "fused {fused}: a skipped step was counted");
        assert_eq!(scaler.current_scale(), 32_768.0, "fused {fused}: the scale did not back off");
    }
}

#[test]
fn first_step_moves_each_parameter_by_about_the_learning_rate() {
    // Adam's first bias-corrected step is lr · g / (|g| + eps) = ±lr for every element.
    let ps = params();
    let before: Vec<Tensor> = ps.iter().map(|(_, p)| p.detach().copy()).collect();
    let mut adam = optimizer(Choice::Adam, &ps, false);
    adam.zero_grad();
    ps.iter().map(|(_, p)| p.square().sum(Kind::Float)).fold(Tensor::from(0.0f32), |a, b| a + b).backward();
    adam.step(1e-2, None).unwrap();
    for ((_, p), b) in ps.iter().zip(&before) {
        let moved = (p.detach() - b).abs();
        let (lo, hi) = (f64::try_from(moved.min()).unwrap(), f64::try_from(moved.max()).unwrap());
        assert!((lo - 1e-2).abs() < 1e-4 && (hi - 1e-2).abs() < 1e-4, "{lo} {hi}");
    }
    assert_eq!((BETA1, BETA2, EPS), (0.9, 0.95, 1e-8), "the tutorial's Adam settings");
}

#[test]
fn adamw_is_adam_after_a_decoupled_decay() {
    let adamw = run_with(Choice::AdamW, false, false);
    assert!(max_diff(&adamw, &run_with(Choice::AdamW, true, false)) < 1e-6, "fused AdamW agrees");
    assert!(max_diff(&adamw, &run_with(Choice::AdamW, true, true)) < 1e-6, "AdamW with a loss scaler agrees");
    // One step from the same start: AdamW = Adam's step applied to p · (1 − lr·wd).
    let (lr, ps, qs) = (1e-2, params(), params());
    let (mut w, mut a) = (optimizer(Choice::AdamW, &ps, false), optimizer(Choice::Adam, &qs, false));
    for (opt, set) in [(&mut w, &ps), (&mut a, &qs)] {
        opt.zero_grad();
        set.iter().map(|(_, p)| p.square().sum(Kind::Float)).fold(Tensor::from(0.0f32), |x, y| x + y).backward();
    }
    let start: Vec<Tensor> = params().into_iter().map(|(_, p)| p.detach()).collect();
    w.step(lr, None).unwrap();
    a.step(lr, None).unwrap();
    let expected: Vec<Tensor> = qs.iter().zip(&start).map(|((_, q), s)| q.detach() - s * (lr * ADAMW_WEIGHT_DECAY)).collect();
    let got: Vec<Tensor> = ps.iter().map(|(_, p)| p.detach()).collect();
    assert!(max_diff(&got, &expected) < 1e-6, "{}", max_diff(&got, &expected));
}

#[test]
fn sgd_follows_the_momentum_formula() {
    // loss = Σ p², so g = 2p: two steps by hand.
    let (lr, ps) = (0.1, params());
    let p0: Vec<Tensor> = ps.iter().map(|(_, p)| p.detach().copy()).collect();
    let mut sgd = optimizer(Choice::Sgd, &ps, false);
    for _ in 0..2 {
        sgd.zero_grad();
        ps.iter().map(|(_, p)| p.square().sum(Kind::Float)).fold(Tensor::from(0.0f32), |x, y| x + y).backward();
        sgd.step(lr, None).unwrap();
    }
    let expected: Vec<Tensor> = p0
        .iter()
        .map(|p| {
            let buf1 = p * 2.0;
            let p1 = p - &buf1 * lr;
            let buf2 = buf1 * SGD_MOMENTUM + &p1 * 2.0;
            p1 - buf2 * lr
        })
        .collect();
    let got: Vec<Tensor> = ps.iter().map(|(_, p)| p.detach()).collect();
    assert!(max_diff(&got, &expected) < 1e-6, "{}", max_diff(&got, &expected));
    let names: Vec<String> = sgd.state().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["sgd.momentum.a", "sgd.momentum.b"]);
}
