//! The shipped `config/ViT.yaml` holds the tutorial's configs with the tutorial's exact values
//! (reference §2.2–2.3), and files from the other tutorial editions load too.

use scalebook_shared::config::{
    AmpMode, BenchyTrial, ConfigFile, DEFAULT_CONFIG, DataLoaderKind, ModelBackend, Optimizer, PipelineSchedule, TrainConfig,
};

const SHIPPED: &str = include_str!("../shipped/ViT.yaml");

fn shipped() -> ConfigFile {
    ConfigFile::parse(SHIPPED).unwrap()
}

/// `base` written out from the reference's table, key by key (not from `Default`).
fn tutorial_base() -> TrainConfig {
    TrainConfig {
        embed_dim: 384,
        depth: 12,
        dropout: 0.0,
        patch_size: 8,
        num_heads: 8,
        img_size: [360, 720],
        dt: 1,
        global_batch_size: 16,
        num_iters: 30000,
        amp_mode: AmpMode::None,
        enable_jit: false,
        expdir: "/logs".into(),
        lr_schedule: "cosine".into(),
        lr: 5e-4,
        warmup: 0,
        optimizer: Optimizer::Adam,
        num_data_workers: 0,
        n_in_channels: 20,
        n_out_channels: 20,
        train_data_path: "/data/train".into(),
        valid_data_path: "/data/valid".into(),
        inf_data_path: "/data/test".into(),
        time_means_path: "/data/stats/time_means.npy".into(),
        global_means_path: "/data/stats/global_means.npy".into(),
        global_stds_path: "/data/stats/global_stds.npy".into(),
        limit_nsamples: None,
        limit_nsamples_val: None,
        wireup_info: "env".into(),
        wireup_store: "tcp".into(),
        tensor_parallel: 1,
        context_parallel: 1,
        parallel_order: "tp-cp-dp".into(),
        local_batch_size: None,
        enable_fused: false,
        data_loader_config: DataLoaderKind::Pytorch,
        enable_apex: false,
        model_backend: ModelBackend::Pytorch,
        bucket_cap_mb: 25.0,
        first_bucket_cap_mb: 1.0,
        disable_broadcast_buffers: false,
        noddp: false,
        overlap_grad_reduce: true,
        gradient_accumulation_steps: 1,
        activation_checkpointing: false,
        zero_stage: 0,
        pipeline_parallel: 1,
        num_micro_batches: 1,
        pipeline_schedule: PipelineSchedule::OneFOneB,
        virtual_pipeline_stages: 2,
        serial_read: false,
        benchy_trial: BenchyTrial::Full,
        profile: String::new(),
    }
}

/// Every tutorial config with its expected values (reference §2.3).
fn tutorial_configs() -> Vec<(&'static str, TrainConfig)> {
    let base = tutorial_base();
    let short = TrainConfig { limit_nsamples: Some(512), limit_nsamples_val: Some(128), num_iters: 128, ..base.clone() };
    let fast = |c: TrainConfig| TrainConfig { num_data_workers: 8, amp_mode: AmpMode::Fp16, enable_jit: true, ..c };
    let opt = fast(TrainConfig { num_iters: 30000, ..base.clone() });
    let mp = fast(TrainConfig { num_iters: 30000, global_batch_size: 64, lr: 1e-3, embed_dim: 1536, ..base.clone() });
    let batch = |c: &TrainConfig, global_batch_size, lr| TrainConfig { global_batch_size, lr, ..c.clone() };
    vec![
        ("base", base.clone()),
        ("short", short.clone()),
        ("short_opt", fast(short)),
        ("opt", opt.clone()),
        ("bs16_opt", batch(&opt, 16, 5e-4)),
        ("bs32_opt", batch(&opt, 32, 7.07e-4)),
        ("bs64_opt", batch(&opt, 64, 1e-3)),
        ("bs128_opt", batch(&opt, 128, 1.41e-3)),
        ("bs256_opt", batch(&opt, 256, 2e-3)),
        ("bs512_opt", batch(&opt, 512, 2.83e-3)),
        ("bs1024_opt", batch(&opt, 1024, 4e-3)),
        ("bs2048_opt", batch(&opt, 2048, 5.66e-3)),
        ("mp", mp.clone()),
        ("mp_bs16", batch(&mp, 16, 5e-4)),
        ("mp_bs32", batch(&mp, 32, 7.07e-4)),
        ("mp_patch4", TrainConfig { patch_size: 4, ..mp }),
    ]
}

#[test]
fn every_tutorial_config_has_the_tutorial_values() {
    let file = shipped();
    for (name, expected) in tutorial_configs() {
        let got = file.get(name).unwrap();
        assert_eq!(got, expected, "config {name}; differences: {:?}", got.diff(&expected));
    }
}

#[test]
fn tutorial_configs_come_first_in_file_order_then_cpu_configs() {
    let file = shipped();
    let names: Vec<&str> = file.names().collect();
    let tutorial: Vec<&str> = tutorial_configs().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[..tutorial.len()], tutorial[..]);
    assert!(names.contains(&DEFAULT_CONFIG));
    for cpu in ["cpu_short", "cpu_tiny", "cpu_mp"] {
        assert!(names.contains(&cpu), "{cpu} missing from {names:?}");
    }
}

#[test]
fn the_shipped_defaults_equal_the_tutorial_base() {
    assert_eq!(TrainConfig::default(), tutorial_base());
}

#[test]
fn exponent_floats_without_a_decimal_point_are_floats() {
    let file = ConfigFile::parse("a:\n  lr: 5E-4\nb:\n  lr: 5e-4\nc:\n  lr: 1e-3\nd:\n  lr: 2\n").unwrap();
    let lrs: Vec<f64> = ["a", "b", "c", "d"].iter().map(|n| file.get(n).unwrap().lr).collect();
    assert_eq!(lrs, [5e-4, 5e-4, 1e-3, 2.0]);
}

#[test]
fn later_keys_override_merged_ones_through_nested_merges() {
    let text = "\
base: &base
  depth: 3
  lr: 1e-3
mid: &mid
  <<: *base
  depth: 5
leaf:
  <<: *mid
  lr: 2e-3
  limit_nsamples: None
";
    let file = ConfigFile::parse(text).unwrap();
    let leaf = file.get("leaf").unwrap();
    assert_eq!((leaf.depth, leaf.lr, leaf.limit_nsamples), (5, 2e-3, None));
    // A key no config writes keeps the tutorial's base value.
    assert_eq!(leaf.embed_dim, 384);
    assert_eq!(file.get("base").unwrap().depth, 3);
}

#[test]
fn the_sc23_sc24_edition_keys_load() {
    // The shape of the sc23/sc24 files: loader switch, fused Adam, apex, a 1024-wide mp.
    let text = "\
base: &base
  enable_fused: false
  data_loader_config: 'pytorch'
  lr: 5E-4
opt: &opt
  <<: *base
  data_loader_config: 'dali'
  enable_fused: True
  enable_apex: True
mp:
  <<: *base
  embed_dim: 1024
  data_loader_config: 'dali'
";
    let file = ConfigFile::parse(text).unwrap();
    let opt = file.get("opt").unwrap();
    assert_eq!((opt.data_loader_config, opt.enable_fused, opt.enable_apex), (DataLoaderKind::Dali, true, true));
    assert_eq!(file.get("mp").unwrap().embed_dim, 1024);
    assert!(file.get("opt").unwrap().validate(1).is_ok());
}

#[test]
fn the_sc25_model_backend_key_loads() {
    let text = "\
base: &base
  model_backend: 'pytorch'
mp_te:
  <<: *base
  model_backend: 'transformer-engine'
";
    let file = ConfigFile::parse(text).unwrap();
    assert_eq!(file.get("mp_te").unwrap().model_backend, ModelBackend::TransformerEngine);
}

#[test]
fn every_shipped_config_is_valid_on_one_rank_or_its_tutorial_layout() {
    let file = shipped();
    // (config, world, overrides): the tutorial runs mp on 4 GPUs, not 1 (it does not fit).
    let runs: &[(&str, usize, &[&str])] = &[
        ("mp", 16, &["tensor_parallel=4"]),
        ("mp", 16, &["context_parallel=4", "parallel_order=cp-tp-dp"]),
        ("mp_patch4", 64, &["tensor_parallel=4", "local_batch_size=1"]),
        ("cpu_mp", 4, &["tensor_parallel=2"]),
        ("cpu_mp", 4, &["context_parallel=4"]),
    ];
    for name in file.names() {
        let config = file.get(name).unwrap();
        config.validate(1).unwrap_or_else(|e| panic!("{name} on 1 rank: {e}"));
    }
    for (name, world, overrides) in runs {
        let mut config = file.get(name).unwrap();
        config.apply_overrides(overrides).unwrap();
        config.validate(*world).unwrap_or_else(|e| panic!("{name} {overrides:?} on {world}: {e}"));
    }
}

#[test]
fn written_configs_load_back_unchanged() {
    let file = shipped();
    for name in file.names() {
        let config = file.get(name).unwrap();
        let yaml = config.to_yaml(name);
        let again = ConfigFile::parse(&yaml).unwrap_or_else(|e| panic!("{name}: {e}\n{yaml}"));
        assert_eq!(again.get(name).unwrap(), config, "{yaml}");
    }
    let odd = TrainConfig { expdir: "true".into(), wireup_info: "a: b # c".into(), ..TrainConfig::default() };
    assert_eq!(ConfigFile::parse(&odd.to_yaml("x")).unwrap().get("x").unwrap(), odd);
}

#[test]
fn field_metadata_lists_every_serialised_field_in_order() {
    // The YAML writer keeps struct order; top-level keys are the unindented lines.
    let yaml = serde_saphyr::to_string(&TrainConfig::default()).unwrap();
    let keys: Vec<&str> = yaml.lines().filter(|l| !l.starts_with([' ', '-'])).filter_map(|l| l.split(':').next()).collect();
    let fields: Vec<&str> = TrainConfig::FIELDS.iter().map(|f| f.name).collect();
    assert_eq!(keys, fields);
    assert!(TrainConfig::FIELDS.iter().all(|f| !f.doc.is_empty()));
}

#[test]
fn diff_lists_changed_fields_in_field_order() {
    let file = shipped();
    let diff = file.get("base").unwrap().diff(&file.get("short").unwrap());
    let fields: Vec<&str> = diff.iter().map(|d| d.field).collect();
    assert_eq!(fields, ["num_iters", "limit_nsamples", "limit_nsamples_val"]);
    assert_eq!((diff[0].left.as_u64(), diff[0].right.as_u64()), (Some(30000), Some(128)));
    assert!(diff[1].left.is_null());
}

/// The page reads the configs as the server sends them (`/api/configs.json`): every config,
/// every value and the file's order come through JSON unchanged.
#[test]
fn configs_come_through_json_unchanged() {
    let file = shipped();
    let json = serde_json::to_string(&file).unwrap();
    let back: ConfigFile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, file);
    assert_eq!(back.names().collect::<Vec<_>>(), file.names().collect::<Vec<_>>());
    // A key the trainer does not know is refused on the way in, as in the YAML file.
    let err = serde_json::from_str::<ConfigFile>(r#"{"base": {"embed_dims": 8}}"#).unwrap_err();
    assert!(err.to_string().contains("embed_dims"), "{err}");
}
