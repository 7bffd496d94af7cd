//! Bad configs, bad overrides and bad files: each gets a problem naming the field and the rule,
//! and several mistakes are all reported at once.

use scalebook_shared::config::{ConfigFile, TrainConfig};
use scalebook_shared::{Error, Problems};

const SHIPPED: &str = include_str!("../shipped/ViT.yaml");

fn config(name: &str) -> TrainConfig {
    ConfigFile::parse(SHIPPED).unwrap().get(name).unwrap()
}

fn problems_of(result: Result<(), Error>) -> Problems {
    match result {
        Err(Error::Invalid(problems)) => problems,
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

/// Asserts that `problems` has one against `field` whose message contains `fragment`.
fn assert_has(problems: &Problems, field: &str, fragment: &str) {
    assert!(
        problems.for_field(field).any(|p| p.message.contains(fragment)),
        "no problem on `{field}` containing {fragment:?} in:\n{problems}"
    );
}

/// (config, overrides, world, field, message fragment): each override set breaks one rule.
const BAD_CONFIGS: &[(&str, &[&str], usize, &str, &str)] = &[
    ("base", &["num_heads=7", "embed_dim=1536"], 1, "embed_dim", "1536 is not divisible by num_heads 7"),
    ("base", &["tensor_parallel=3"], 3, "tensor_parallel", "3 does not divide num_heads 8"),
    ("base", &["embed_dim=1", "tensor_parallel=8"], 8, "tensor_parallel", "MLP width 4 × embed_dim = 4"),
    (
        "mp",
        &["tensor_parallel=4"],
        6,
        "world",
        "6 ranks is not divisible by tensor_parallel 4 × context_parallel 1 × pipeline_parallel 1 = 4",
    ),
    ("mp", &[], 3, "global_batch_size", "64 is not divisible by dp 3"),
    ("base", &["patch_size=7"], 1, "img_size", "height 360 is not divisible by patch_size 7"),
    ("base", &["patch_size=7"], 1, "img_size", "width 720 is not divisible by patch_size 7"),
    ("base", &["img_size=[0, 720]"], 1, "img_size", "height must be at least 1"),
    ("base", &["context_parallel=8"], 8, "context_parallel", "more than the 6 tokens"),
    ("base", &["parallel_order=tp-ep-dp"], 1, "parallel_order", "`ep`"),
    ("base", &["context_parallel=2", "parallel_order=tp-dp"], 2, "parallel_order", "leaves out cp"),
    ("base", &["dropout=1.0"], 1, "dropout", "must be in [0, 1), got 1"),
    ("base", &["lr=0"], 1, "lr", "must be a positive number, got 0"),
    ("base", &["lr=-1e-3"], 1, "lr", "must be a positive number"),
    ("base", &["warmup=200", "num_iters=100"], 1, "warmup", "200 is more than num_iters 100"),
    ("base", &["lr_schedule=step"], 1, "lr_schedule", "handles only `cosine`"),
    ("base", &["bucket_cap_mb=0"], 1, "bucket_cap_mb", "must be a positive number of MB, got 0"),
    ("base", &["first_bucket_cap_mb=0"], 1, "first_bucket_cap_mb", "must be a positive number of MB, got 0"),
    ("base", &["zero_stage=4"], 2, "zero_stage", "must be 0, 1, 2 or 3 (ZeRO's stages; 0 is DDP), got 4"),
    ("base", &["zero_stage=1"], 1, "zero_stage", "ZeRO stage 1 shards over dp, which is 1 here"),
    ("base", &["zero_stage=3", "tensor_parallel=2"], 2, "zero_stage", "ZeRO stage 3 shards over dp, which is 1 here"),
    ("base", &["depth=0"], 1, "depth", "must be at least 1, got 0"),
    ("base", &["num_iters=0"], 1, "num_iters", "must be at least 1"),
    ("base", &["global_batch_size=0"], 1, "global_batch_size", "must be at least 1"),
    ("base", &["n_out_channels=0"], 1, "n_out_channels", "must be at least 1"),
    ("base", &["dt=0"], 1, "dt", "must be at least 1"),
    ("base", &["local_batch_size=0"], 1, "local_batch_size", "must be at least 1"),
    ("base", &[], 0, "world", "must be at least 1, got 0"),
    ("base", &["expdir=''"], 1, "expdir", "must not be empty"),
    ("short", &["limit_nsamples=8"], 1, "limit_nsamples", "8 training samples over dp 1 give no full batch of 16"),
    ("short", &["num_iters=10"], 1, "num_iters", "10 is less than one epoch (32 iterations)"),
    ("short", &["limit_nsamples_val=8"], 1, "limit_nsamples_val", "no full batch of 16"),
    ("short", &["limit_nsamples=0"], 1, "limit_nsamples", "must be at least 1"),
];

#[test]
fn every_bad_config_gets_its_problem() {
    for (name, overrides, world, field, fragment) in BAD_CONFIGS {
        let mut config = config(name);
        // A 6-token image makes the context-parallel case small.
        if *field == "context_parallel" {
            config.apply_overrides(&["img_size=[16, 24]"]).unwrap();
        }
        config.apply_overrides(overrides).unwrap_or_else(|e| panic!("{overrides:?}: {e}"));
        let problems = problems_of(config.validate(*world));
        assert_has(&problems, field, fragment);
    }
}

#[test]
fn the_rules_pass_for_the_unbroken_configs() {
    // The same configs without the breaking overrides are valid, so each case above fails
    // for the reason it names.
    for name in ["base", "short", "mp"] {
        assert!(config(name).validate(1).is_ok(), "{name}");
    }
    assert!(config("mp").validate(4).is_ok());
}

#[test]
fn all_problems_are_reported_at_once() {
    let mut bad = config("base");
    bad.apply_overrides(&["num_heads=7", "patch_size=7", "lr=0", "dropout=2", "lr_schedule=linear", "tensor_parallel=2"]).unwrap();
    let problems = problems_of(bad.validate(3));
    let fields: Vec<&str> = problems.0.iter().map(|p| p.field.as_str()).collect();
    for field in ["embed_dim", "img_size", "lr", "dropout", "lr_schedule", "tensor_parallel", "world"] {
        assert!(fields.contains(&field), "{field} missing from {problems}");
    }
}

#[test]
fn dataset_size_rules_use_the_known_dataset() {
    // Without a limit, a dataset smaller than one batch gives empty epochs.
    let problems = problems_of(config("base").derived(1, Some(8)).map(drop));
    assert_has(&problems, "global_batch_size", "8 training samples over dp 1 give no full batch of 16");
    // The tutorial's dataset: base runs 12 epochs of 2372 iterations.
    assert!(config("base").derived(1, Some(37_960)).map(drop).is_ok());
    // A limit above the dataset size is capped by it, and the batch is to blame.
    let problems = problems_of(config("short").derived(1, Some(8)).map(drop));
    assert_has(&problems, "global_batch_size", "8 training samples");
    // With the dataset known, too few iterations for one epoch are caught without a limit.
    let mut base = config("base");
    base.apply_overrides(&["num_iters=1000"]).unwrap();
    assert!(base.validate(1).is_ok());
    assert_has(&problems_of(base.derived(1, Some(37_960)).map(drop)), "num_iters", "1000 is less than one epoch (2372 iterations)");
}

#[test]
fn local_batch_size_replaces_the_global_batch() {
    // 64 does not split over dp 3, but with a local batch the global one is 3 × 2.
    let mut mp = config("mp");
    mp.apply_overrides(&["local_batch_size=2"]).unwrap();
    assert!(mp.validate(3).is_ok());
    assert_eq!(mp.derived(3, None).unwrap().global_batch_size, 6);
}

/// (overrides, field, message fragment)
const BAD_OVERRIDES: &[(&str, &str, &str)] = &[
    ("lr", "overrides", "`lr` is not of the form key=value"),
    ("=3", "overrides", "has no key"),
    ("embd_dim=3", "embd_dim", "unknown key; did you mean `embed_dim`?"),
    ("tp=2", "tp", "did you mean `tensor_parallel`?"),
    ("num_iters=abc", "num_iters", "expected a whole number, got \"abc\""),
    ("num_iters=-5", "num_iters", "a whole number cannot be negative, got -5"),
    ("num_iters=100000000000", "num_iters", "at most 4294967295, got 100000000000"),
    ("global_batch_size=100000000000000000000", "global_batch_size", "at most 4294967295, got 100000000000000000000"),
    ("lr=fast", "lr", "expected a number, got \"fast\""),
    ("enable_jit=maybe", "enable_jit", "expected true or false"),
    ("amp_mode=fp32", "amp_mode", "expected one of none, fp16, bf16, got \"fp32\""),
    ("img_size=[1,2", "img_size", "cannot read `[1,2` as a value"),
    ("img_size=[90]", "img_size", "expected a list [H, W] of two whole numbers, got [90]"),
    ("data_loader_config=tf", "data_loader_config", "one of pytorch, dali"),
    ("limit_nsamples=lots", "limit_nsamples", "expected a whole number or None"),
];

#[test]
fn every_bad_override_gets_its_problem() {
    for (text, field, fragment) in BAD_OVERRIDES {
        let mut config = config("base");
        let problems = problems_of(config.apply_overrides(&[text]));
        assert_has(&problems, field, fragment);
    }
}

#[test]
fn bad_overrides_are_all_reported_and_change_nothing() {
    let mut config = config("base");
    let before = config.clone();
    let overrides = ["depth=2", "embd_dim=3", "lr=fast", "amp_mode=fp8", "noequals"];
    let problems = problems_of(config.apply_overrides(&overrides));
    assert_eq!(problems.0.len(), 4, "{problems}");
    assert_eq!(config, before);
}

#[test]
fn good_overrides_are_typed_like_the_file() {
    let mut config = config("short");
    config.apply_overrides(&["lr=5E-4", "limit_nsamples=None", "img_size=[90, 180]", "amp_mode=bf16", "depth=2", "depth=3"]).unwrap();
    assert_eq!(config.lr, 5e-4);
    assert_eq!(config.limit_nsamples, None);
    assert_eq!(config.img_size, [90, 180]);
    assert_eq!(config.amp_mode, scalebook_shared::config::AmpMode::Bf16);
    assert_eq!(config.depth, 3, "the later override wins");
}

/// (YAML, field, message fragment) for files that parse but hold bad entries.
const BAD_FILES: &[(&str, &str, &str)] = &[
    ("base:\n  embd_dim: 3\n", "embd_dim", "unknown key; did you mean `embed_dim`? (in config base)"),
    ("base:\n  num_heads: eight\n", "num_heads", "expected a whole number, got \"eight\" (in config base)"),
    ("base:\n  amp_mode: fp32\n", "amp_mode", "expected one of none, fp16, bf16"),
    ("base:\n  amp_mode: None\n", "amp_mode", "expected one of none, fp16, bf16, got None"),
    ("base:\n  img_size: [360]\n", "img_size", "list [H, W]"),
    ("base:\n  lr: '5E-4x'\n", "lr", "expected a number"),
    ("base: 3\n", "base", "is not a mapping of keys to values (got 3)"),
];

#[test]
fn every_bad_file_entry_gets_its_problem() {
    for (text, field, fragment) in BAD_FILES {
        let problems = match ConfigFile::parse(text) {
            Err(Error::Invalid(problems)) => problems,
            other => panic!("{text:?}: expected Error::Invalid, got {other:?}"),
        };
        assert_has(&problems, field, fragment);
    }
}

#[test]
fn a_bad_key_merged_into_many_configs_is_reported_once_naming_them() {
    let mut text = String::from("base: &base\n  embd_dim: 3\n  lr: x\n");
    for i in 0..6 {
        text.push_str(&format!("c{i}:\n  <<: *base\n"));
    }
    let Err(Error::Invalid(problems)) = ConfigFile::parse(&text) else { panic!("should fail") };
    assert_eq!(problems.0.len(), 2, "{problems}");
    assert_has(&problems, "embd_dim", "(in configs base, c0, c1, c2 and 3 more)");
    assert_has(&problems, "lr", "expected a number, got \"x\"");
}

#[test]
fn malformed_and_empty_files_are_parse_errors() {
    for text in ["base:\n  lr: [1,\n", "", "# only a comment\n", "a: &a\n  depth: 2\nb:\n  <<: *missing\n", "a:\n  depth: 1\n  depth: 2\n"]
    {
        assert!(matches!(ConfigFile::parse(text), Err(Error::Parse { .. })), "{text:?}");
    }
}

#[test]
fn unknown_config_names_list_the_known_ones() {
    let file = ConfigFile::parse("base:\n  depth: 2\nshort:\n  depth: 1\n").unwrap();
    match file.get("shrt") {
        Err(err @ Error::UnknownConfig { .. }) => assert!(err.to_string().contains("base, short"), "{err}"),
        other => panic!("{other:?}"),
    }
}
