//! Collectives and data parallelism across real processes over Gloo (each test body runs as
//! the ranks, see `support`).

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::{Sizes, Token};
use scalebook_shared::metrics::tags;
use scalebook_shared::rundir;
use scalebook_trainer::data::Batch;
use scalebook_trainer::dist::Comm;
use scalebook_trainer::ffi::{ReduceOp, Region};
use scalebook_trainer::train::amp::{GradScaler, INIT_SCALE};
use scalebook_trainer::train::checkpoint::Checkpoints;
use scalebook_trainer::train::reshard::Saved;
use scalebook_trainer::train::{DdpKnobs, GradSync, Learner};
use tch::{Device, Kind, Tensor};

fn ranks<F: Fn()>(test: F, sizes: Sizes) -> Option<Comm> {
    support::ranks(test, sizes, "tp-cp-dp")
}

/// A run's checkpoint, whatever its form, as a one-rank run's tensors.
fn whole_checkpoint(run_dir: &Path) -> HashMap<String, Tensor> {
    let (_, saved) = Checkpoints::new(run_dir, None).load().unwrap();
    saved.into_whole().unwrap()
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

#[test]
fn flat_collectives_over_two_ranks() {
    let Some(comm) = ranks(flat_collectives_over_two_ranks, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let g = comm.group(Token::DP);
    let r = g.rank() as f32;
    let before = g.traffic();
    // All-gather: rank r's [r, r + 10, r + 20] lands at 3r..3r+3.
    let mine = Tensor::from_slice(&[r, r + 10.0, r + 20.0]);
    let mut all = Tensor::zeros([6], (Kind::Float, Device::Cpu));
    g.all_gather_into(&mut all, &mine).unwrap();
    assert_eq!(Vec::<f32>::try_from(&all).unwrap(), vec![0., 10., 20., 1., 11., 21.]);
    // Reduce-scatter: the sum of both ranks' [0..6) + r, chunk r to rank r.
    let input = Tensor::arange(6, (Kind::Float, Device::Cpu)) + f64::from(r);
    let mut out = Tensor::zeros([3], (Kind::Float, Device::Cpu));
    g.reduce_scatter_into(&mut out, &input, ReduceOp::Sum).unwrap();
    let expected: Vec<f32> = (0..3).map(|i| 2.0 * (3.0 * r + i as f32) + 1.0).collect();
    assert_eq!(Vec::<f32>::try_from(&out).unwrap(), expected);
    g.reduce_scatter_into(&mut out, &input, ReduceOp::Avg).unwrap();
    assert_eq!(Vec::<f32>::try_from(&out).unwrap(), expected.iter().map(|v| v / 2.0).collect::<Vec<_>>());
    // Counted like every collective: the gathered size, and the reduced buffer's.
    let spent = g.traffic() - before;
    assert_eq!((spent.calls, spent.bytes), (3, 3 * 24));
    // A chunk that does not fit is refused, naming the collective.
    let err = g.reduce_scatter_into(&mut out, &Tensor::zeros([5], (Kind::Float, Device::Cpu)), ReduceOp::Sum).unwrap_err();
    assert!(err.to_string().contains("reduce-scatter over dp/"), "{err}");
}

/// A learner of `config` over `comm`, every rank from the same seed, with its sync attached.
fn attached(comm: &Rc<Comm>, config: &TrainConfig) -> (tch::nn::VarStore, Learner) {
    tch::manual_seed(5);
    let (vs, mut learner) = Learner::build(config, Device::Cpu, None).unwrap();
    let sync = GradSync::new(comm.clone(), &vs, DdpKnobs::new(config)).unwrap();
    sync.broadcast_parameters().unwrap();
    learner.attach(sync, config).unwrap();
    (vs, learner)
}

/// Every stage of ZeRO, overlapped or not, with micro-batches and (stage 3) recomputation,
/// takes the steps DDP takes, on every rank; the optimizer state it holds is DDP's, resharded.
#[test]
fn zero_steps_are_ddp_steps() {
    let Some(comm) = ranks(zero_steps_are_ddp_steps, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let comm = Rc::new(comm);
    let rank = comm.rank(Token::DP) as i64;
    // Two threads a rank: the batch is split over two lanes (but at stage 3, which gathers
    // and releases its blocks from one thread), their gradients accumulating together.
    tch::set_num_threads(2);
    // Small buckets: several units at stages 1 and 2.
    let base = TrainConfig { bucket_cap_mb: 0.05, first_bucket_cap_mb: 0.05, gradient_accumulation_steps: 2, ..support::cpu_tiny() };
    let (reference_vs, mut reference) = attached(&comm, &base);
    let variants: Vec<TrainConfig> = [(1, true, false), (2, true, false), (2, false, false), (3, true, true), (3, false, false)]
        .into_iter()
        .map(|(zero_stage, overlap_grad_reduce, activation_checkpointing)| TrainConfig {
            zero_stage,
            overlap_grad_reduce,
            activation_checkpointing,
            ..base.clone()
        })
        .collect();
    let mut learners: Vec<_> = variants.iter().map(|c| attached(&comm, c)).collect();
    assert!(reference.lanes.is_some());
    for (config, (_, learner)) in variants.iter().zip(&learners) {
        assert_eq!(learner.lanes.is_some(), config.zero_stage < 3, "stage {}", config.zero_stage);
    }
    for step in 0..3 {
        tch::manual_seed(1000 + 10 * rank + step);
        let b =
            batch(Tensor::randn([4, 20, 36, 72], (Kind::Float, Device::Cpu)), Tensor::randn([4, 20, 36, 72], (Kind::Float, Device::Cpu)));
        let (expected, _) = reference.train_step(&b, 1e-3).unwrap();
        for (config, (_, learner)) in variants.iter().zip(&mut learners) {
            let (loss, _) = learner.train_step(&b, 1e-3).unwrap();
            assert!((loss - expected).abs() <= 1e-6 * expected.abs(), "stage {}: loss {loss} vs {expected}", config.zero_stage);
        }
    }
    let reference_params = reference_vs.variables();
    let reference_state: HashMap<String, Tensor> = reference.optimizer.state().into_iter().collect();
    let g = comm.group(Token::DP);
    for (config, (vs, learner)) in variants.iter().zip(&learners) {
        let stage = config.zero_stage;
        learner
            .with_full_parameters(|| {
                // In one order on every rank: each broadcast meets its own on the other.
                let mut vars: Vec<_> = vs.variables().into_iter().collect();
                vars.sort_by(|a, b| a.0.cmp(&b.0));
                for (name, p) in vars {
                    // Stage 3 runs one lane where DDP ran two: its gradients' sums round apart.
                    let diff = close(&p, &reference_params[&name]);
                    let bound = if stage == 3 { 1e-5 } else { 1e-6 };
                    assert!(diff < bound, "stage {stage}: {name} differs from DDP's by {diff}");
                    let mine = p.detach().contiguous().copy();
                    let mut rank0 = mine.copy();
                    g.broadcast(&mut rank0, 0).unwrap();
                    assert_eq!(close(&mine, &rank0), 0.0, "stage {stage}: {name}'s replicas differ");
                }
                Ok(())
            })
            .unwrap();
        // DDP's state, resharded as a checkpoint of it is read at this stage, is this rank's.
        let shards = learner.sync.as_ref().unwrap().shards().expect("ZeRO has shards");
        let own = learner.optimizer.state();
        let tensors = reference_params.iter().chain(&reference_state).map(|(k, t)| (k.clone(), t.shallow_clone())).collect();
        let ddp = Saved::Whole { path: "ddp".into(), tensors };
        let resharded = shards.restore(&ddp, &own).unwrap();
        assert_eq!(resharded.len(), own.len(), "stage {stage}: every slot of every shard");
        for (name, t) in own {
            let diff = close(&t, &resharded[&name]);
            assert!(diff < 1e-6, "stage {stage}: {name} differs from DDP's by {diff}");
        }
    }
}

/// What each dp rank holds of the training state falls as ZeRO says: stage 1 halves the
/// optimizer state at dp 2, stage 2 the gradients too, stage 3 the parameters too (up to the
/// padding of each unit to a multiple of dp), and the `ZeRO:` line says so.
#[test]
fn zero_stages_shard_the_state_each_rank_holds() {
    let Some(comm) = ranks(zero_stages_shard_the_state_each_rank_holds, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let comm = Rc::new(comm);
    let config = TrainConfig { bucket_cap_mb: 0.05, first_bucket_cap_mb: 0.05, ..support::cpu_tiny() };
    let (vs, mut ddp) = attached(&comm, &config);
    let b = support::formula_batch(&config, 2);
    ddp.train_step(&b, 1e-3).unwrap();
    let bytes = |t: &Tensor| (t.numel() * 4) as u64;
    let params: u64 = vs.trainable_variables().iter().map(bytes).sum();
    assert_eq!(vs.trainable_variables().iter().map(|p| bytes(&p.grad())).sum::<u64>(), params);
    let moments = ddp.optimizer.state_bytes();
    assert!(moments > 2 * params && moments < 2 * params + 4096, "Adam holds two moments (and step counters): {moments} for {params}");
    assert!(ddp.describe_zero().is_none());
    let mut held = Vec::new();
    for stage in 1..=3 {
        let config = TrainConfig { zero_stage: stage, ..config.clone() };
        let (_vs, mut learner) = attached(&comm, &config);
        learner.train_step(&b, 1e-3).unwrap();
        let (h, unsharded) = learner.sync.as_ref().unwrap().holdings(&learner.optimizer).unwrap();
        assert_eq!((unsharded.params, unsharded.grads), (params, params), "stage {stage}");
        assert!(unsharded.optimizer.abs_diff(moments) < 4096, "stage {stage}: {} against DDP's {moments}", unsharded.optimizer);
        let line = learner.describe_zero().unwrap();
        assert!(line.starts_with(&format!("ZeRO: stage {stage} over dp 2, each rank holds parameters ")), "{line}");
        held.push(h);
    }
    // Half, give or take each unit's padding (at most dp − 1 elements a unit) and the step
    // counters.
    let half = |b: u64, of: u64| (b as f64 - of as f64 / 2.0).abs() < 1024.0;
    let [one, two, three] = [held[0], held[1], held[2]];
    assert!(half(one.optimizer, moments) && half(two.optimizer, moments) && half(three.optimizer, moments), "{held:?}");
    assert!(
        one.params.abs_diff(params) < 1024 && one.grads.abs_diff(params) < 1024,
        "stage 1 keeps whole parameters and gradients: {one:?}"
    );
    assert!(two.params.abs_diff(params) < 1024 && half(two.grads, params), "stage 2 keeps whole parameters: {two:?}");
    assert!(half(three.params, params) && half(three.grads, params), "stage 3 keeps shards only: {three:?}");
}

/// fp16 with ZeRO: each rank unscales only its shard, so one rank's overflow must make every
/// rank skip the step: the overflow flag is shared over dp too.
#[test]
fn the_loss_scalers_overflow_check_is_shared_over_dp() {
    let Some(comm) = ranks(the_loss_scalers_overflow_check_is_shared_over_dp, Sizes { dp: 2, ..Sizes::default() }) else { return };
    let rank = comm.rank(Token::DP);
    let mut scaler = GradScaler::new(Device::Cpu, None);
    scaler.share_with(comm.shared_group(Token::DP));
    let value = if rank == 1 { f32::INFINITY } else { 1.0 };
    let mut grads = vec![Tensor::from_slice(&[value])];
    assert!(!scaler.unscale(&mut grads).unwrap(), "rank {rank} must skip the step rank 1 overflowed in");
    scaler.update();
    assert_eq!(scaler.current_scale(), INIT_SCALE / 2.0);
}

/// Whole runs of the real trainer: ZeRO 1, 2 and 3 at dp 2 (overlapped and not, with
/// micro-batches and recomputation), ZeRO-3 with tp 2 and ZeRO-2 with cp 2 learn what one rank learns, the
/// agreement measure (the losses' relative difference) within 1e-4 at every epoch and every
/// step; their checkpoints hold what one rank's holds.
#[test]
fn zero_runs_learn_what_one_rank_learns() {
    let dir = support::runs::scratch("zero-agree");
    let data = dir.path().join("data");
    support::runs::generate_sized(&data, 48, [36, 72]);
    // cpu_tiny for 4 epochs of 4 steps.
    let run = ["num_iters=16"];
    let train = |name: &str, nproc: usize, extra: &[&str]| {
        let run_dir = dir.path().join(name);
        let sets: Vec<&str> = run.iter().chain(extra).copied().collect();
        let out = support::runs::launch_config("cpu_tiny", nproc, &data, &run_dir, &sets).args(["--dist-timeout", "60"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{name}: {stderr}");
        (run_dir, stderr)
    };
    let curve = |run_dir: &Path| {
        let points = support::runs::points(run_dir);
        let series = |tag: &str| points.iter().filter(|p| p.tag == tag).map(|p| p.value).collect::<Vec<_>>();
        (series(tags::step::LOSS_TRAIN), series(tags::LOSS_VALID))
    };
    let (one_dir, _) = train("one", 1, &[]);
    let (one_train, one_valid) = curve(&one_dir);
    assert_eq!((one_train.len(), one_valid.len()), (16, 5));
    let one_checkpoint = whole_checkpoint(&one_dir);
    let small = ["bucket_cap_mb=0.05", "first_bucket_cap_mb=0.05"];
    let layouts: [(&str, usize, Vec<&str>); 7] = [
        ("zero1", 2, [&["zero_stage=1"][..], &small].concat()),
        ("zero2", 2, [&["zero_stage=2"][..], &small].concat()),
        ("zero2-after-backward", 2, vec!["zero_stage=2", "overlap_grad_reduce=false"]),
        ("zero3", 2, vec!["zero_stage=3"]),
        ("zero3-micro-recompute", 2, vec!["zero_stage=3", "gradient_accumulation_steps=2", "activation_checkpointing=true"]),
        ("zero3-tp2", 4, vec!["zero_stage=3", "tensor_parallel=2"]),
        // The blocks' gradients summed over cp on the shards.
        ("zero2-cp2", 4, vec!["zero_stage=2", "context_parallel=2"]),
    ];
    let worst = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| ((y - x) / x).abs()).fold(0.0, f64::max);
    for (name, nproc, sets) in layouts {
        let (run_dir, stderr) = train(name, nproc, &sets);
        let stage = &sets[0]["zero_stage=".len()..];
        assert!(stderr.contains(&format!("ZeRO: stage {stage} over dp 2, each rank holds")), "{name}: {stderr}");
        let (steps, valid) = curve(&run_dir);
        assert_eq!((steps.len(), valid.len()), (16, 5), "{name}");
        let (step_diff, valid_diff) = (worst(&one_train, &steps), worst(&one_valid, &valid));
        eprintln!("agreement {name} ({nproc} ranks): train loss {step_diff:.2e}, validation loss {valid_diff:.2e}");
        assert!(step_diff < 1e-4 && valid_diff < 1e-4, "{name}: train {step_diff:e}, valid {valid_diff:e} against one rank");
        if nproc == 2 {
            // Parameters and Adam's moments as one rank's run saved them, each kind as a whole
            // (a gradient that is zero in exact arithmetic, as the key bias's, leaves moments
            // of rounding noise, which no two sums share).
            let saved = whole_checkpoint(&run_dir);
            assert_eq!(saved.len(), one_checkpoint.len(), "{name}");
            for kind in ["adam.exp_avg.", "adam.exp_avg_sq.", "adam.step.", ""] {
                let mut keys: Vec<&String> =
                    saved.keys().filter(|k| k.starts_with(kind) && (!kind.is_empty() || !k.starts_with("adam."))).collect();
                keys.sort();
                let whole = |c: &HashMap<String, Tensor>| Tensor::cat(&keys.iter().map(|k| c[*k].reshape([-1])).collect::<Vec<_>>(), 0);
                let error = support::relative_error(&whole(&saved), &whole(&one_checkpoint));
                assert!(!keys.is_empty() && error < 1e-4, "{name}: {kind}* off by {error:e} ({} tensors)", keys.len());
            }
        }
    }
}

/// A ZeRO-3 run stopped after an epoch resumes the same curve, at its own stage and at stage 0
/// (its sharded checkpoint read whole by DDP's optimizer).
#[test]
fn a_zero_run_resumes_its_curve() {
    let dir = support::runs::scratch("zero-resume");
    let data = dir.path().join("data");
    support::runs::generate_sized(&data, 48, [36, 72]);
    let train = |name: &str, extra: &[&str]| {
        let run_dir = dir.path().join(name);
        let out = support::runs::launch_config("cpu_tiny", 2, &data, &run_dir, &[&["num_iters=12"][..], &["zero_stage=3"]].concat())
            .args(["--dist-timeout", "60"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        run_dir
    };
    let steps = |run_dir: &Path| {
        support::runs::points(run_dir)
            .into_iter()
            .filter(|p| p.tag == tags::step::LOSS_TRAIN)
            .map(|p| (p.step, p.value))
            .collect::<Vec<_>>()
    };
    let whole = steps(&train("whole", &[]));
    assert_eq!(whole.len(), 12);
    let split = train("split", &["--max-epochs", "1"]);
    let split = {
        train("split", &["--resume"]);
        steps(&split)
    };
    assert_eq!(split, whole, "the same steps, each once, with the same losses");
    // The same checkpoint resumed at stage 0: DDP's optimizer reads the shards whole.
    let other = train("other", &["--max-epochs", "1"]);
    let out = support::runs::launch_config("cpu_tiny", 2, &data, &other, &["num_iters=12", "zero_stage=0"])
        .args(["--dist-timeout", "60", "--resume"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let resumed = steps(&other);
    assert_eq!(resumed.len(), 12);
    for ((step, a), (_, b)) in whole.iter().zip(&resumed) {
        assert!(((a - b) / a).abs() < 1e-6, "step {step}: {a} at stage 3 against {b} resumed at stage 0");
    }
}

/// The files of a run's checkpoint directory, by name.
fn checkpoint_files(run_dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(run_dir.join(rundir::CHECKPOINTS_DIR)).unwrap();
    let mut names: Vec<String> = entries.map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

/// `from` and everything in it, copied to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A ZeRO-3 run at dp 4 writes its checkpoint in shards, each dp rank its own file and no
/// rank a gathered one; stopped after an epoch, it resumes resharded at dp 2 (ZeRO-3) and on
/// one rank without ZeRO, each curve within 1e-4 of the run never stopped, at every step and
/// validation. Each resume leaves only its own form of checkpoint behind.
#[test]
fn a_sharded_checkpoint_resumes_under_another_layout() {
    let dir = support::runs::scratch("reshard");
    let data = dir.path().join("data");
    support::runs::generate_sized(&data, 48, [36, 72]);
    // cpu_tiny: 2 epochs of 4 steps (a batch of 4: one sample a rank at dp 4).
    let train = |run_dir: &Path, nproc: usize, zero_stage: &str, extra: &[&str]| {
        let out = support::runs::launch_config("cpu_tiny", nproc, &data, run_dir, &[zero_stage])
            .args(["--dist-timeout", "60"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {}", run_dir.display(), String::from_utf8_lossy(&out.stderr));
    };
    let curve = |run_dir: &Path| {
        let points = support::runs::points(run_dir);
        let series = |tag: &str| points.iter().filter(|p| p.tag == tag).map(|p| (p.step, p.value)).collect::<Vec<_>>();
        (series(tags::step::LOSS_TRAIN), series(tags::LOSS_VALID))
    };
    let never_stopped = dir.path().join("never-stopped");
    train(&never_stopped, 4, "zero_stage=3", &[]);
    let (whole_train, whole_valid) = curve(&never_stopped);
    assert_eq!((whole_train.len(), whole_valid.len()), (8, 3));

    let stopped = dir.path().join("stopped");
    train(&stopped, 4, "zero_stage=3", &["--max-epochs", "1"]);
    let sharded = ["last.dp0-of-4.ot", "last.dp1-of-4.ot", "last.dp2-of-4.ot", "last.dp3-of-4.ot", "last.json", "last.shards.json"];
    assert_eq!(checkpoint_files(&stopped), sharded, "one file per dp rank, its layout, where the run stands; nothing gathered");

    let resumed: [(&str, usize, &str, Vec<&str>); 2] = [
        ("dp2-zero3", 2, "zero_stage=3", vec!["last.dp0-of-2.ot", "last.dp1-of-2.ot", "last.json", "last.shards.json"]),
        ("one-rank", 1, "zero_stage=0", vec!["last.json", "last.ot"]),
    ];
    let worst = |a: &[(u64, f64)], b: &[(u64, f64)]| {
        assert_eq!(a.iter().map(|p| p.0).collect::<Vec<_>>(), b.iter().map(|p| p.0).collect::<Vec<_>>(), "the same steps, each once");
        a.iter().zip(b).map(|((_, x), (_, y))| ((y - x) / x).abs()).fold(0.0, f64::max)
    };
    for (name, nproc, zero_stage, files) in resumed {
        let run_dir = dir.path().join(name);
        copy_tree(&stopped, &run_dir);
        train(&run_dir, nproc, zero_stage, &["--resume"]);
        let (steps, valid) = curve(&run_dir);
        let (step_diff, valid_diff) = (worst(&whole_train, &steps), worst(&whole_valid, &valid));
        eprintln!("resumed {name} from dp 4 ZeRO-3: train loss {step_diff:.2e}, validation loss {valid_diff:.2e}");
        assert!(step_diff < 1e-4 && valid_diff < 1e-4, "{name}: train {step_diff:e}, valid {valid_diff:e} against the run never stopped");
        assert_eq!(checkpoint_files(&run_dir), files, "{name}: only the new checkpoint's files");
    }

    // A shard missing, or one of another layout in its place: refused, naming the file.
    let refused = |name: &str, says: &str| {
        let out = support::runs::launch_config("cpu_tiny", 1, &data, &dir.path().join(name), &[]).arg("--resume").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{name}: {stderr}");
    };
    let checkpoints = |name: &str| dir.path().join(name).join(rundir::CHECKPOINTS_DIR);
    copy_tree(&stopped, &dir.path().join("missing"));
    std::fs::remove_file(checkpoints("missing").join("last.dp2-of-4.ot")).unwrap();
    refused("missing", "last.dp2-of-4.ot: is missing");
    copy_tree(&stopped, &dir.path().join("mismatched"));
    std::fs::copy(checkpoints("dp2-zero3").join("last.dp0-of-2.ot"), checkpoints("mismatched").join("last.dp1-of-4.ot")).unwrap();
    refused("mismatched", "last.dp1-of-4.ot: holds");
}
