//! Collectives and data parallelism across real processes over Gloo (each test body runs as
//! the ranks, see `support`).

mod support;

use std::rc::Rc;

use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::{Sizes, Token};
use scalebook_trainer::data::Batch;
use scalebook_trainer::dist::Comm;
use scalebook_trainer::ffi::{ReduceOp, Region};
use scalebook_trainer::train::{DdpKnobs, GradSync, Learner};
use tch::{Device, Kind, Tensor};

fn ranks<F: Fn()>(test: F, sizes: Sizes) -> Option<Comm> {
    support::ranks(test, sizes, "tp-cp-dp")
}

fn close(a: &Tensor, b: &Tensor) -> f64 {
    f64::try_from((a - b).abs().max()).unwrap()
}

#[test]
fn collectives_over_two_ranks() {
    let Some(comm) = ranks(collectives_over_two_ranks, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let g = comm.group(Token::DP);
    let r = g.rank() as f64;
    // Seeds read from each rank's clock become rank 0's.
    assert_eq!(comm.agree(1000 + g.rank() as i64).unwrap(), 1000);
    let mut t = Tensor::from_slice(&[r + 1.0, 10.0 * (r + 1.0)]).to_kind(Kind::Float);
    g.all_reduce(&mut t, ReduceOp::Sum).unwrap();
    assert_eq!(Vec::<f32>::try_from(&t).unwrap(), vec![3.0, 30.0]);
    let mut t = Tensor::from_slice(&[r + 1.0]).to_kind(Kind::Float);
    g.all_reduce(&mut t, ReduceOp::Avg).unwrap();
    assert_eq!(f64::try_from(&t).unwrap(), 1.5);
    let mut t = Tensor::from_slice(&[r]).to_kind(Kind::Float);
    g.broadcast(&mut t, 1).unwrap();
    assert_eq!(f64::try_from(&t).unwrap(), 1.0);

    // Uneven chunks (3 rows on rank 0, 2 on rank 1), like 4050 tokens over cp = 4.
    let sizes = [3i64, 2];
    let mine = Tensor::full([sizes[g.rank()], 2], r, (Kind::Float, Device::Cpu));
    let all = g.region(Region::GatherFrom, &mine, 0, &sizes).unwrap();
    assert_eq!(Vec::<f32>::try_from(all.reshape([-1])).unwrap(), vec![0., 0., 0., 0., 0., 0., 1., 1., 1., 1.]);
    g.barrier().unwrap();

    // The region operations' backward passes.
    let x = Tensor::ones([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    g.region(Region::CopyTo, &x, 0, &[]).unwrap().sum(Kind::Float).backward();
    assert_eq!(Vec::<f32>::try_from(x.grad()).unwrap(), vec![2.0; 3], "copy-to sums gradients");
    let x = Tensor::full([1], r + 1.0, (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let y = g.region(Region::ReduceFrom, &x, 0, &[]).unwrap();
    assert_eq!(f64::try_from(&y).unwrap(), 3.0);
    (y * 5.0).sum(Kind::Float).backward();
    assert_eq!(f64::try_from(x.grad()).unwrap(), 5.0, "reduce-from passes gradients through");
    let x = Tensor::ones([sizes[g.rank()]], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let y = g.region(Region::AllGatherFrom, &x, 0, &sizes).unwrap();
    assert_eq!(y.size(), vec![5]);
    (y * Tensor::arange(5, (Kind::Float, Device::Cpu))).sum(Kind::Float).backward();
    // Both ranks weigh position i by i, so the summed gradient of my chunk is 2·i.
    let expected: Vec<f32> = if g.rank() == 0 { vec![0., 2., 4.] } else { vec![6., 8.] };
    assert_eq!(Vec::<f32>::try_from(x.grad()).unwrap(), expected, "all-gather's backward reduce-scatters");
    let x = Tensor::arange(5, (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let y = g.region(Region::ScatterTo, &x, 0, &sizes).unwrap();
    assert_eq!(y.size(), vec![sizes[g.rank()]]);
    y.sum(Kind::Float).backward();
    assert_eq!(Vec::<f32>::try_from(x.grad()).unwrap(), vec![1.0; 5], "scatter's backward gathers every chunk's gradient");
}

fn batch(input: Tensor, target: Tensor) -> Batch {
    Batch { input, target, indices: Vec::new() }
}

#[test]
fn one_dp2_step_equals_one_step_at_twice_the_batch() {
    let Some(comm) = ranks(one_dp2_step_equals_one_step_at_twice_the_batch, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let comm = Rc::new(comm);
    let rank = comm.rank(Token::DP) as i64;
    let config = support::cpu_tiny();
    tch::manual_seed(5);
    let (reference_vs, mut reference) = Learner::build(&config, Device::Cpu, None).unwrap();
    // A different seed on each rank: the broadcast from dp-rank 0 must make them equal.
    tch::manual_seed(100 + rank);
    let (vs, mut parallel) = Learner::build(&config, Device::Cpu, None).unwrap();
    let sync = GradSync::new(comm.clone(), &vs, DdpKnobs::new(&config)).unwrap();
    if rank == 0 {
        tch::no_grad(|| {
            for (name, mut p) in vs.variables() {
                p.copy_(&reference_vs.variables()[&name]);
            }
        });
    }
    sync.broadcast_parameters().unwrap();
    parallel.sync = Some(sync);

    // The same 2b = 4 samples everywhere; each rank trains on its half.
    tch::manual_seed(99);
    let input = Tensor::randn([4, 20, 36, 72], (Kind::Float, Device::Cpu));
    let target = Tensor::randn([4, 20, 36, 72], (Kind::Float, Device::Cpu));
    let (ref_loss, _) = reference.train_step(&batch(input.shallow_clone(), target.shallow_clone()), 1e-3).unwrap();
    let (dp_loss, _) = parallel.train_step(&batch(input.narrow(0, 2 * rank, 2), target.narrow(0, 2 * rank, 2)), 1e-3).unwrap();
    assert!((ref_loss - dp_loss).abs() < 1e-6, "loss {ref_loss} vs {dp_loss}");
    let reference_params = reference_vs.variables();
    for (name, p) in vs.variables() {
        let diff = close(&p, &reference_params[&name]);
        assert!(diff < 1e-5, "{name} differs by {diff}");
    }

    // Different data on each rank for a few steps: the replicas stay bit-identical.
    for step in 0..3 {
        tch::manual_seed(1000 + 10 * rank + step);
        let b =
            batch(Tensor::randn([2, 20, 36, 72], (Kind::Float, Device::Cpu)), Tensor::randn([2, 20, 36, 72], (Kind::Float, Device::Cpu)));
        parallel.train_step(&b, 1e-3).unwrap();
    }
    let g = comm.group(Token::DP);
    for p in vs.trainable_variables() {
        let mine = p.detach().contiguous().copy();
        let mut rank0 = mine.copy();
        g.broadcast(&mut rank0, 0).unwrap();
        assert_eq!(close(&mine, &rank0), 0.0, "replicas diverged");
    }
}

#[test]
fn the_ddp_knobs_change_the_all_reduces_and_noddp_skips_them() {
    let Some(comm) = ranks(the_ddp_knobs_change_the_all_reduces_and_noddp_skips_them, Sizes { dp: 2, ..Sizes::default() }) else {
        return;
    };
    let comm = Rc::new(comm);
    let rank = comm.rank(Token::DP) as i64;
    let mut config = support::cpu_tiny();
    tch::manual_seed(5);
    let (vs, mut learner) = Learner::build(&config, Device::Cpu, None).unwrap();
    let mut calls = |first_mb: f64, mb: f64| {
        config.first_bucket_cap_mb = first_mb;
        config.bucket_cap_mb = mb;
        GradSync::new(comm.clone(), &vs, DdpKnobs::new(&config)).unwrap().dp_all_reduces()
    };
    let (small, default, large) = (calls(0.01, 0.01), calls(1.0, 25.0), calls(1.0, 100.0));
    assert!(small > default && default >= large && large >= 1, "{small} {default} {large} all-reduces");
    // The first bucket is a knob of its own: a small one adds an all-reduce to the default's.
    assert_eq!(calls(0.01, 25.0), default + 1, "a small first bucket");
    config.noddp = true;
    config.disable_broadcast_buffers = true;
    let sync = GradSync::new(comm.clone(), &vs, DdpKnobs::new(&config)).unwrap();
    assert_eq!(sync.dp_all_reduces(), 0);
    sync.broadcast_parameters().unwrap();
    learner.sync = Some(sync);
    // Different data on each rank and no gradient averaging: the replicas drift apart.
    tch::manual_seed(1000 + rank);
    let b = batch(Tensor::randn([2, 20, 36, 72], (Kind::Float, Device::Cpu)), Tensor::randn([2, 20, 36, 72], (Kind::Float, Device::Cpu)));
    learner.train_step(&b, 1e-3).unwrap();
    let g = comm.group(Token::DP);
    let drift = vs.trainable_variables().iter().fold(0.0, |worst: f64, p| {
        let mine = p.detach().contiguous().copy();
        let mut rank0 = mine.copy();
        g.broadcast(&mut rank0, 0).unwrap();
        worst.max(close(&mine, &rank0))
    });
    let expected_drift = if rank == 0 { 0.0 } else { 1e-6 };
    assert!(if rank == 0 { drift == expected_drift } else { drift > expected_drift }, "rank {rank}: drift {drift}");
}

#[test]
fn overlapped_all_reduce_equals_the_serial_one() {
    let Some(comm) = ranks(overlapped_all_reduce_equals_the_serial_one, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let comm = Rc::new(comm);
    let rank = comm.rank(Token::DP) as i64;
    // Small buckets, so backward fills many of them one after the other; two micro-batches,
    // so the first backward pass must issue nothing (no_sync).
    let config = TrainConfig { bucket_cap_mb: 0.05, first_bucket_cap_mb: 0.05, gradient_accumulation_steps: 2, ..support::cpu_tiny() };
    let learner = |overlap: bool| {
        let config = TrainConfig { overlap_grad_reduce: overlap, ..config.clone() };
        tch::manual_seed(5);
        let (vs, mut learner) = Learner::build(&config, Device::Cpu, None).unwrap();
        learner.sync = Some(GradSync::new(comm.clone(), &vs, DdpKnobs::new(&config)).unwrap());
        (vs, learner)
    };
    let (serial_vs, mut serial) = learner(false);
    let (overlapped_vs, mut overlapped) = learner(true);
    for step in 0..3 {
        tch::manual_seed(1000 + 10 * rank + step);
        let b =
            batch(Tensor::randn([4, 20, 36, 72], (Kind::Float, Device::Cpu)), Tensor::randn([4, 20, 36, 72], (Kind::Float, Device::Cpu)));
        serial.train_step(&b, 1e-3).unwrap();
        overlapped.train_step(&b, 1e-3).unwrap();
        let sync = overlapped.sync.as_ref().unwrap();
        assert!(sync.dp_all_reduces() > 3, "{} buckets", sync.dp_all_reduces());
        assert_eq!(sync.issued_in_backward(), sync.dp_all_reduces(), "every bucket is issued during backward");
        assert_eq!(serial.sync.as_ref().unwrap().issued_in_backward(), 0);
    }
    // Summing two ranks' values is exact whatever the buckets: the same bits.
    let serial_vars = serial_vs.variables();
    for (name, p) in overlapped_vs.variables() {
        assert_eq!(close(&p, &serial_vars[&name]), 0.0, "{name} differs");
    }
}
