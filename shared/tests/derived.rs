//! Derived values against the tutorial's own numbers (reference §3, §4.3, §5.2, §9).

use proptest::prelude::*;
use scalebook_shared::Error;
use scalebook_shared::config::{ConfigFile, ParamCount, TrainConfig, compute_split_shapes, lr_at};

const SHIPPED: &str = include_str!("../shipped/ViT.yaml");

fn config(name: &str, overrides: &[&str]) -> TrainConfig {
    let mut config = ConfigFile::parse(SHIPPED).unwrap().get(name).unwrap();
    config.apply_overrides(overrides).unwrap();
    config
}

#[test]
fn cp_splits_match_the_tutorial_examples() {
    let repeat = |chunk: usize, n: usize, last: usize| [vec![chunk; n], vec![last]].concat();
    assert_eq!(compute_split_shapes(4050, 1), [4050]);
    assert_eq!(compute_split_shapes(4050, 2), [2025, 2025]);
    assert_eq!(compute_split_shapes(4050, 3), [1350, 1350, 1350]);
    assert_eq!(compute_split_shapes(4050, 4), [1013, 1013, 1013, 1011]);
    assert_eq!(compute_split_shapes(4050, 8), repeat(507, 7, 501));
    assert_eq!(compute_split_shapes(4050, 16), repeat(254, 15, 240));
    assert_eq!(compute_split_shapes(16200, 4), [4050; 4]);
    // ceil(10 / 6) = 2 would leave nothing for the last rank, so floor: 1 each, the rest last.
    assert_eq!(compute_split_shapes(10, 6), [1, 1, 1, 1, 1, 5]);
    assert_eq!(compute_split_shapes(450, 4), [113, 113, 113, 111]);
}

proptest! {
    #[test]
    fn cp_splits_cover_the_sequence_with_no_empty_rank(size in 1usize..100_000, n in 1usize..64) {
        prop_assume!(n <= size);
        let split = compute_split_shapes(size, n);
        prop_assert_eq!(split.len(), n);
        prop_assert_eq!(split.iter().sum::<usize>(), size);
        prop_assert!(split.iter().all(|&s| s > 0));
    }
}

#[test]
fn parameter_counts_match_the_tutorial() {
    let base = ParamCount::of(&config("base", &[]));
    assert_eq!(
        base,
        ParamCount { patch_embed: 491_904, pos_embed: 1_555_200, blocks: 21_293_568, final_norm: 768, head: 491_520, total: 23_832_960 }
    );
    assert_eq!(ParamCount::of(&config("mp", &[])).total, 350_135_808);
    assert_eq!(ParamCount::of(&config("mp", &["embed_dim=1024"])).total, 157_926_400);
    assert_eq!(ParamCount::of(&config("mp_patch4", &[])).total, 365_849_088);
}

#[test]
fn iterations_and_epochs_match_the_tutorial_runs() {
    // (config, overrides, world, iterations per epoch, epochs)
    let runs: &[(&str, &[&str], usize, usize, usize)] = &[
        ("base", &[], 1, 2372, 12),
        ("bs64_opt", &[], 4, 593, 50),
        ("bs1024_opt", &[], 64, 37, 810),
        ("short", &[], 1, 32, 4),
        ("mp", &["tensor_parallel=4"], 16, 593, 50),
    ];
    for (name, overrides, world, per_epoch, epochs) in runs {
        let derived = config(name, overrides).derived(*world, None).unwrap();
        assert_eq!((derived.iters_per_epoch, derived.num_epochs), (*per_epoch, *epochs), "{name} on {world}");
        assert_eq!(derived.steps, per_epoch * epochs);
        assert!(derived.dataset_assumed);
        assert_eq!(derived.dataset_samples, 37_960);
    }
}

#[test]
fn shapes_of_the_base_model() {
    let derived = config("base", &[]).derived(1, None).unwrap();
    assert_eq!(derived.patch_grid, [45, 90]);
    assert_eq!(derived.tokens_per_sample, 4050);
    assert_eq!(derived.head_dim, 48);
    assert_eq!(derived.mlp_width, 1536);
    assert_eq!((derived.dp, derived.pp, derived.local_batch_size), (1, 1, 16));
    assert_eq!(config("mp_patch4", &[]).derived(1, None).unwrap().tokens_per_sample, 16_200);
}

#[test]
fn parallel_layouts_split_heads_batch_and_tokens() {
    let tp = config("mp", &["tensor_parallel=4"]).derived(16, None).unwrap();
    assert_eq!((tp.tp, tp.cp, tp.dp, tp.local_batch_size, tp.heads_per_tp_rank), (4, 1, 4, 16, 2));
    let cp = config("mp", &["context_parallel=4", "parallel_order=cp-tp-dp"]).derived(16, None).unwrap();
    assert_eq!(cp.cp_split, [1013, 1013, 1013, 1011]);
    assert_eq!((cp.dp, cp.heads_per_tp_rank), (4, 8));
}

#[test]
fn a_known_dataset_and_the_limit_set_the_samples() {
    let derived = config("short", &[]).derived(1, Some(10_000)).unwrap();
    assert_eq!((derived.train_samples, derived.dataset_samples, derived.dataset_assumed), (512, 10_000, false));
    let derived = config("base", &[]).derived(2, Some(1000)).unwrap();
    // ceil(1000 / 2) = 500 per rank, batch 8: 62 iterations, 30000 // 62 = 483 epochs.
    assert_eq!((derived.iters_per_epoch, derived.num_epochs), (62, 483));
}

/// The logged `Learning Rate` of the tutorial's 1-GPU `base` run (reference §9).
const LOGGED_LR: &[(usize, f64)] = &[
    (2372, 4.92327e-4),
    (4744, 4.69779e-4),
    (7116, 4.33740e-4),
    (9488, 3.86423e-4),
    (11860, 3.30732e-4),
    (14232, 2.70085e-4),
    (16604, 2.08205e-4),
    (18976, 1.48890e-4),
    (21348, 9.57822e-5),
    (23720, 5.21408e-5),
];

#[test]
fn the_schedule_reproduces_the_logged_learning_rate() {
    let base = config("base", &[]);
    for &(step, logged) in LOGGED_LR {
        let lr = lr_at(&base, step);
        assert!(((lr - logged) / logged).abs() < 1e-5, "step {step}: {lr} vs {logged}");
    }
    assert_eq!(lr_at(&base, 0), 5e-4);
    // The run stops at 12 · 2372 < 30000 steps, so the last LR is not 0.
    let derived = base.derived(1, None).unwrap();
    assert!(derived.final_lr > 0.0 && derived.final_lr < 1e-5, "{}", derived.final_lr);
}

#[test]
fn the_file_writes_learning_rates_by_the_square_root_rule() {
    let file = ConfigFile::parse(SHIPPED).unwrap();
    for name in file.names().filter(|n| n.starts_with("bs") || n.starts_with("mp") || n.starts_with("cpu")) {
        let config = file.get(name).unwrap();
        let rule = config.derived(1, None).unwrap().lr_sqrt_rule;
        assert!(((rule - config.lr) / config.lr).abs() < 1e-12, "{name}: lr {} but the rule gives {rule}", config.lr);
    }
}

#[test]
fn derived_values_need_a_valid_config() {
    let bad = config("base", &["num_heads=7"]);
    match bad.derived(1, None) {
        Err(Error::Invalid(problems)) => assert_eq!(problems.0[0].field, "embed_dim"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn absurd_sizes_do_not_overflow() {
    // Overrides stop at 4294967295; a config built in code may hold anything.
    let mut huge = config("base", &["embed_dim=4294967295", "depth=4294967295"]);
    assert_eq!(ParamCount::of(&huge).total, u64::MAX);
    (huge.embed_dim, huge.depth) = (usize::MAX, usize::MAX);
    assert_eq!(ParamCount::of(&huge).total, u64::MAX);
}
