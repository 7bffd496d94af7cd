//! The batch split over the CPU's cores (training lanes) computes the step of the whole batch:
//! the same loss and, after the optimizer's steps, the same parameters as a single lane.

mod support;

use scalebook_trainer::train::{Lanes, Learner};
use support::formula_batch as batch;
use tch::Device;

#[test]
fn lanes_compute_the_step_of_the_whole_batch() {
    let config = support::cpu_tiny();
    let (reference_vs, mut reference) = Learner::build(&config, Device::Cpu, None).unwrap();
    let (mut split_vs, mut split) = Learner::build(&config, Device::Cpu, None).unwrap();
    split_vs.copy(&reference_vs).unwrap();
    reference.lanes = None;
    // Three lanes over seven samples: uneven slices (2, 2, 3), weighted by their share.
    split.lanes = Lanes::for_run(Device::Cpu, true, 0.0, 3, 7);
    assert_eq!(split.lanes.map(|lanes| lanes.count()), Some(3));
    let batch = batch(&config, 7);
    for step in 0..3 {
        let (one, _) = reference.train_step(&batch, config.lr).unwrap();
        let (three, _) = split.train_step(&batch, config.lr).unwrap();
        assert!((one - three).abs() <= 1e-6 * one.abs(), "step {step}: loss {one} on one lane, {three} on three");
    }
    let split_vars = split_vs.variables();
    for (name, expected) in reference_vs.variables() {
        let got = &split_vars[&name];
        let error = f64::try_from((got - &expected).abs().max()).unwrap();
        assert!(error <= 1e-5, "{name} differs by {error} after three steps");
    }
}
