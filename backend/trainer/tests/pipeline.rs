//! Pipeline parallelism across real processes over Gloo: point-to-point transfers, and whole
//! runs of the real trainer with pipeline stages against one rank's.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scalebook_shared::layout::{Sizes, Token};
use scalebook_shared::metrics::tags;
use scalebook_shared::profile::trace::{ProfileSummary, RankSummary};
use scalebook_shared::profile::{ranges, trace_file};
use scalebook_shared::rundir;
use tch::{Device, Kind, Tensor};

/// Sends return at once and receives take the message of their tag: both ranks send first
/// (4 MiB each way, more than a socket buffers) and only then receive, and rank 1 receives
/// rank 0's two messages in the other order than they were sent.
#[test]
fn point_to_point_over_two_ranks() {
    let Some(comm) = support::ranks(point_to_point_over_two_ranks, Sizes { pp: 2, ..Sizes::default() }, "tp-cp-dp-pp") else { return };
    let g = comm.group(Token::PP);
    let (rank, peer) = (g.rank(), 1 - g.rank());
    let before = g.traffic();
    let big = Tensor::full([1 << 20], rank as f64 + 1.0, (Kind::Float, Device::Cpu));
    let small = Tensor::from_slice(&[10 * rank as i64 + 7]);
    let sent = [g.send(&big, peer, 3).unwrap(), g.send(&small, peer, 4).unwrap()];
    let (mut got_big, mut got_small) =
        (Tensor::zeros([1 << 20], (Kind::Float, Device::Cpu)), Tensor::zeros([1], (Kind::Int64, Device::Cpu)));
    if rank == 1 {
        g.recv(&mut got_small, peer, 4).unwrap();
        g.recv(&mut got_big, peer, 3).unwrap();
    } else {
        g.recv(&mut got_big, peer, 3).unwrap();
        g.recv(&mut got_small, peer, 4).unwrap();
    }
    sent.into_iter().for_each(|s| s.wait().unwrap());
    assert_eq!(f64::try_from(got_big.sum(Kind::Double)).unwrap(), (peer as f64 + 1.0) * f64::from(1 << 20));
    assert_eq!(i64::try_from(&got_small.get(0)).unwrap(), 10 * peer as i64 + 7);
    // Counted like the collectives: two sends and two receives of 4 MiB and 8 bytes.
    let spent = g.traffic() - before;
    assert_eq!((spent.calls, spent.bytes), (4, 2 * (4 << 20) + 16));
    // A rank that is not another one of the group is refused, naming the transfer.
    let err = g.send(&small, rank, 0).unwrap_err();
    assert!(err.to_string().contains(&format!("send to rank {rank} of pp/")), "{err}");
}

/// The overrides of a pipelined run of `stages` stages.
fn pipelined(schedule: &str) -> Vec<&str> {
    vec!["pipeline_parallel=2", "num_micro_batches=2", "parallel_order=tp-cp-dp-pp", schedule]
}

struct Runs {
    dir: tempfile::TempDir,
    data: PathBuf,
}

impl Runs {
    fn new(name: &str) -> Runs {
        let dir = support::runs::scratch(name);
        let data = dir.path().join("data");
        support::runs::generate_sized(&data, 48, [36, 72]);
        Runs { dir, data }
    }

    /// `cpu_tiny` (2 epochs of 4 steps) on `nproc` ranks with `sets`, into run `name`.
    fn train(&self, name: &str, nproc: usize, sets: &[&str], args: &[&str]) -> PathBuf {
        let run_dir = self.dir.path().join(name);
        let out = support::runs::launch_config("cpu_tiny", nproc, &self.data, &run_dir, sets)
            .args(["--dist-timeout", "60"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        run_dir
    }
}

/// A run's step losses and its validation losses.
type Curve = (Vec<f64>, Vec<f64>);

/// The step losses and the validation losses a run reported.
fn curve(run_dir: &Path) -> Curve {
    let points = support::runs::points(run_dir);
    let series = |tag: &str| points.iter().filter(|p| p.tag == tag).map(|p| p.value).collect::<Vec<_>>();
    (series(tags::step::LOSS_TRAIN), series(tags::LOSS_VALID))
}

fn worst(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| ((y - x) / x).abs()).fold(0.0, f64::max)
}

fn checkpoint(run_dir: &Path) -> HashMap<String, Tensor> {
    Tensor::load_multi(run_dir.join(rundir::CHECKPOINTS_DIR).join("last.ot")).unwrap().into_iter().collect()
}

/// Whole runs with two pipeline stages learn what one rank learns, the agreement measure (the
/// losses' relative difference) within 1e-4 at every step and every validation: each schedule
/// (interleaved on 4 blocks, 2 chunks a rank), with recomputation, with dp 2, tp 2 and cp 2,
/// and under bf16 autocast (against one rank's bf16 run).
/// A pipeline's checkpoint holds one rank's keys and values; its profile shows each rank's
/// passes.
#[test]
fn pipeline_runs_learn_what_one_rank_learns() {
    let runs = Runs::new("pp-agree");
    let one = runs.train("one", 1, &[], &[]);
    let one_deep = runs.train("one-deep", 1, &["depth=4"], &[]);
    let one_bf16 = runs.train("one-bf16", 1, &["amp_mode=bf16"], &[]);
    let (one_curve, deep_curve, bf16_curve) = (curve(&one), curve(&one_deep), curve(&one_bf16));
    assert_eq!((one_curve.0.len(), one_curve.1.len()), (8, 3));
    assert_ne!(bf16_curve.0, one_curve.0, "bf16 autocast computes other losses");
    let layouts: [(&str, usize, Vec<&str>, &Curve); 7] = [
        ("gpipe", 2, [&pipelined("pipeline_schedule=gpipe")[..], &["profile=2:3"]].concat(), &one_curve),
        ("1f1b-recompute", 2, [&pipelined("pipeline_schedule=1f1b")[..], &["activation_checkpointing=true"]].concat(), &one_curve),
        (
            "interleaved",
            2,
            [&pipelined("pipeline_schedule=interleaved")[..], &["depth=4", "virtual_pipeline_stages=2"]].concat(),
            &deep_curve,
        ),
        ("pp2-dp2", 4, pipelined("pipeline_schedule=1f1b"), &one_curve),
        ("pp2-tp2", 4, [&pipelined("pipeline_schedule=1f1b")[..], &["tensor_parallel=2"]].concat(), &one_curve),
        ("pp2-cp2", 4, [&pipelined("pipeline_schedule=gpipe")[..], &["context_parallel=2"]].concat(), &one_curve),
        ("1f1b-bf16", 2, [&pipelined("pipeline_schedule=1f1b")[..], &["amp_mode=bf16"]].concat(), &bf16_curve),
    ];
    for (name, nproc, sets, (one_train, one_valid)) in layouts {
        let run_dir = runs.train(name, nproc, &sets, &[]);
        let (train, valid) = curve(&run_dir);
        assert_eq!((train.len(), valid.len()), (one_train.len(), one_valid.len()), "{name}");
        let (step_diff, valid_diff) = (worst(one_train, &train), worst(one_valid, &valid));
        eprintln!("agreement {name} ({nproc} ranks): train loss {step_diff:.2e}, validation loss {valid_diff:.2e}");
        assert!(step_diff < 1e-4 && valid_diff < 1e-4, "{name}: train {step_diff:e}, valid {valid_diff:e} against one rank");
    }
    let (pipelined_checkpoint, one_checkpoint) = (checkpoint(&runs.dir.path().join("1f1b-recompute")), checkpoint(&one));
    let mut keys: Vec<&String> = pipelined_checkpoint.keys().collect();
    keys.sort();
    let mut expected: Vec<&String> = one_checkpoint.keys().collect();
    expected.sort();
    assert_eq!(keys, expected, "one run's keys");
    for kind in ["adam.exp_avg.", "adam.exp_avg_sq.", ""] {
        let picked: Vec<&&String> = keys.iter().filter(|k| k.starts_with(kind) && (!kind.is_empty() || !k.starts_with("adam."))).collect();
        let whole = |c: &HashMap<String, Tensor>| Tensor::cat(&picked.iter().map(|k| c[**k].reshape([-1])).collect::<Vec<_>>(), 0);
        let error = support::relative_error(&whole(&pipelined_checkpoint), &whole(&one_checkpoint));
        eprintln!("checkpoint {kind}*: relative error {error:.2e} over {} tensors", picked.len());
        assert!(!picked.is_empty() && error < 1e-4, "{kind}* off by {error:e}");
    }
    // Each rank's lane shows its own passes: chunk 0 on rank 0, chunk 1 on rank 1.
    let profile = runs.dir.path().join("gpipe").join(rundir::PROFILE_DIR);
    for (rank, chunk) in [(0, 0), (1, 1)] {
        let trace = std::fs::read_to_string(profile.join(trace_file(rank))).unwrap();
        for pass in [ranges::pipeline_pass(false, 1, chunk), ranges::pipeline_pass(true, 0, chunk)] {
            assert!(trace.contains(&format!("\"{pass}\"")), "rank {rank} has no {pass} range");
        }
        assert!(!trace.contains(&ranges::pipeline_pass(false, 0, 1 - chunk)), "rank {rank} ran the other chunk");
    }
    // Read as the server summarises a profile: the bubble of each profiled step, beside
    // GPipe's (p−1)/(m+p−1) for the pipeline the passes describe (p 2, m 2: 1/3).
    let ranks = [0, 1].map(|rank| RankSummary::read(rank, std::fs::File::open(profile.join(trace_file(rank))).unwrap()).unwrap());
    let summary = ProfileSummary::new(ranks.to_vec(), Vec::new());
    assert_eq!(summary.bubbles.len(), 1, "step 2: {:?}", summary.bubbles);
    let bubble = &summary.bubbles[0];
    assert_eq!((bubble.stages, bubble.micro_batches, bubble.virtual_stages, bubble.ranks), (2, 2, 1, 2));
    assert!((bubble.formula - 1.0 / 3.0).abs() < 1e-12);
    eprintln!("gpipe's bubble at step {}: measured {:.3}, formula {:.3}", bubble.step, bubble.fraction, bubble.formula);
    assert!(bubble.fraction > 0.0 && bubble.fraction < 1.0, "{bubble:?}");
}

/// A pipelined run stopped after an epoch resumes its curve, as a pipeline and on one rank
/// (its checkpoint holds one run's keys).
#[test]
fn a_pipelined_run_resumes_its_curve() {
    let runs = Runs::new("pp-resume");
    let sets = pipelined("pipeline_schedule=1f1b");
    let steps = |run_dir: &Path| -> Vec<(u64, f64)> {
        support::runs::points(run_dir).into_iter().filter(|p| p.tag == tags::step::LOSS_TRAIN).map(|p| (p.step, p.value)).collect()
    };
    let whole = steps(&runs.train("whole", 2, &sets, &[]));
    assert_eq!(whole.len(), 8);
    runs.train("split", 2, &sets, &["--max-epochs", "1"]);
    let split = steps(&runs.train("split", 2, &sets, &["--resume"]));
    assert_eq!(split, whole, "the same steps, each once, with the same losses");
    runs.train("other", 2, &sets, &["--max-epochs", "1"]);
    let resumed = steps(&runs.train("other", 1, &[], &["--resume"]));
    assert_eq!(resumed.len(), 8);
    for ((step, a), (_, b)) in whole.iter().zip(&resumed) {
        let diff = ((a - b) / a).abs();
        assert!(diff < 1e-4, "step {step}: {a} as a pipeline against {b} resumed on one rank");
    }
}
