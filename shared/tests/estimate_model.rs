//! How the estimate responds to layouts, placement and options: the collectives each group runs
//! and over which link, what the order string changes, the what-ifs, the explainable terms and
//! the problems it reports.

use scalebook_shared::Error;
use scalebook_shared::cluster::{Cluster, Clusters, Precision};
use scalebook_shared::config::{ConfigFile, TrainConfig};
use scalebook_shared::estimate::{Collective, Estimate, EstimateOptions, Link, Measured, Operation, Phase, TermKind, estimate};
use scalebook_shared::layout::{Layout, Sizes, Token};

fn perlmutter() -> Cluster {
    Clusters::parse(include_str!("../shipped/clusters.yaml")).unwrap().get("perlmutter").unwrap().clone()
}

fn config(name: &str, set: &[&str]) -> TrainConfig {
    let mut config = ConfigFile::parse(include_str!("../shipped/ViT.yaml")).unwrap().get(name).unwrap();
    config.apply_overrides(set).unwrap();
    config
}

fn run(config: &TrainConfig, sizes: Sizes, order: &str, options: EstimateOptions) -> Result<Estimate, Error> {
    let cluster = perlmutter();
    let layout = Layout::new(sizes, order).unwrap();
    estimate(config, &layout, &cluster, cluster.gpu("a100-80gb").unwrap(), &options)
}

fn sizes(tp: u32, cp: u32, dp: u32) -> Sizes {
    Sizes { tp, cp, dp, pp: 1 }
}

fn find(e: &Estimate, group: Token, operation: Operation, phase: Phase) -> &Collective {
    e.collectives
        .iter()
        .find(|c| c.group == group && c.operation == operation && c.phase == phase)
        .unwrap_or_else(|| panic!("no {group} {operation:?} {phase:?} in {:#?}", e.collectives))
}

#[test]
fn tp_runs_activation_all_reduces_on_nvlink_and_dp_crosses_nodes() {
    let e = run(&config("mp", &["tensor_parallel=4"]), sizes(4, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let activations = 16 * 4050 * 1536;
    let forward = find(&e, Token::TP, Operation::AllReduce, Phase::Forward);
    assert_eq!((forward.count, forward.bytes, forward.link), (24, 2 * activations, Link::Nvlink));
    let backward = find(&e, Token::TP, Operation::AllReduce, Phase::Backward);
    assert_eq!((backward.count, backward.bytes), (48, 4 * activations));
    assert!((forward.bus_gb_per_s - 300.0 * 0.67).abs() < 1e-9);
    // 2·(n−1)/n · bytes / bus bandwidth, per call.
    let per_call = 1.5 * (2 * activations) as f64 / (forward.bus_gb_per_s * 1e9);
    assert!((forward.seconds - 24.0 * per_call).abs() < 1e-12);
    // dp groups [0, 4, 8, 12]: one rank per node, so one 25 GB/s NIC each.
    let grads = find(&e, Token::DP, Operation::AllReduce, Phase::Backward);
    assert_eq!((grads.link, grads.bytes, grads.overlapped), (Link::Network, 4 * 95_235_072, true));
    assert!((grads.bus_gb_per_s - 25.0 * 0.9).abs() < 1e-9);
}

#[test]
fn the_order_decides_which_group_leaves_the_node() {
    let config = config("mp", &["tensor_parallel=4"]);
    let tp_first = run(&config, sizes(4, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let dp_first =
        run(&TrainConfig { parallel_order: "dp-tp-cp".into(), ..config.clone() }, sizes(4, 1, 4), "dp-tp-cp", EstimateOptions::default())
            .unwrap();
    assert_eq!(find(&dp_first, Token::TP, Operation::AllReduce, Phase::Forward).link, Link::Network);
    assert_eq!(find(&dp_first, Token::DP, Operation::AllReduce, Phase::Backward).link, Link::Nvlink);
    assert!(dp_first.step_time_s > 2.0 * tp_first.step_time_s);
    assert_eq!(dp_first.memory_gb, tp_first.memory_gb);
}

#[test]
fn a_ring_across_nodes_uses_every_nic_of_a_node() {
    let bs1024 = config("bs1024_opt", &[]);
    let e = run(&bs1024, sizes(1, 1, 64), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let grads = find(&e, Token::DP, Operation::AllReduce, Phase::Backward);
    assert_eq!(grads.link, Link::Network);
    assert!((grads.bus_gb_per_s - 4.0 * 25.0 * 0.9).abs() < 1e-9);
    let one_node = run(&config("bs64_opt", &[]), sizes(1, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    assert_eq!(find(&one_node, Token::DP, Operation::AllReduce, Phase::Backward).link, Link::Nvlink);
}

#[test]
fn cp_gathers_keys_and_values_and_splits_tokens_unevenly() {
    let config = config("mp", &["embed_dim=1024", "context_parallel=4", "parallel_order=cp-tp-dp"]);
    let e = run(&config, sizes(1, 4, 4), "cp-tp-dp", EstimateOptions::default()).unwrap();
    assert_eq!(e.tokens_per_rank, 1013);
    let gather = find(&e, Token::CP, Operation::AllGather, Phase::Forward);
    // k and v of all 4050 tokens, 2 per block, 12 blocks. fp32 although the run is fp16: the
    // distributed layers' fp32 bias add promotes autocast's half-precision q, k and v.
    assert_eq!((gather.count, gather.bytes, gather.link), (24, 4 * 16 * 4050 * 1024, Link::Nvlink));
    let scatter = find(&e, Token::CP, Operation::ReduceScatter, Phase::Backward);
    assert_eq!((scatter.count, scatter.bytes), (24, gather.bytes));
    let hook = e.collectives.iter().find(|c| c.group == Token::CP && c.overlapped).unwrap();
    assert_eq!(hook.bytes, 4 * e.params.cp_reduced);
    // Each rank keeps its own 1013 queries but the keys and values of all 4050 tokens.
    let saved = |prefix: &str| e.saved_activations.iter().find(|t| t.name.starts_with(prefix)).unwrap().bytes_per_sample;
    assert_eq!(saved("q of"), (2 * 1013 * 1024) as f64);
    assert_eq!(saved("k and v"), (2 * 2 * 4050 * 1024) as f64);
}

#[test]
fn options_change_precision_and_overlap() {
    let short = config("short", &[]);
    let one = sizes(1, 1, 1);
    let tf32 = run(&short, one, "tp-cp-dp", EstimateOptions::default()).unwrap();
    let fp32 = run(&short, one, "tp-cp-dp", EstimateOptions { tf32: false, ..EstimateOptions::default() }).unwrap();
    assert_eq!((tf32.precision, fp32.precision), (Precision::Tf32, Precision::Fp32));
    assert!(fp32.step_time_s > tf32.step_time_s);
    let bs1024 = config("bs1024_opt", &[]);
    let overlapped = run(&bs1024, sizes(1, 1, 64), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let after = run(&bs1024, sizes(1, 1, 64), "tp-cp-dp", EstimateOptions { overlap_dp: false, ..EstimateOptions::default() }).unwrap();
    let t = &overlapped.time;
    assert!(t.exposed_overlapped_comm_s < t.overlapped_comm_s);
    assert!((after.step_time_s - overlapped.step_time_s - (t.overlapped_comm_s - t.exposed_overlapped_comm_s)).abs() < 1e-12);
}

#[test]
fn the_config_switches_overlap_and_sets_the_last_bucket() {
    let bs1024 = config("bs1024_opt", &[]);
    let layout = sizes(1, 1, 64);
    let overlapped = run(&bs1024, layout, "tp-cp-dp", EstimateOptions::default()).unwrap();
    let serial = run(&config("bs1024_opt", &["overlap_grad_reduce=false"]), layout, "tp-cp-dp", EstimateOptions::default()).unwrap();
    assert_eq!(serial.time.exposed_overlapped_comm_s, serial.time.overlapped_comm_s);
    assert!(serial.step_time_s > overlapped.step_time_s);
    // One bucket as large as all the gradients: nothing starts before backward ends.
    let one_bucket = run(&config("bs1024_opt", &["bucket_cap_mb=1000"]), layout, "tp-cp-dp", EstimateOptions::default()).unwrap();
    assert_eq!(one_bucket.time.exposed_overlapped_comm_s, one_bucket.time.overlapped_comm_s);
}

#[test]
fn recomputation_trades_activation_memory_for_a_forward_pass() {
    let layout = sizes(1, 1, 4);
    let kept = run(&config("mp", &[]), layout, "tp-cp-dp", EstimateOptions::default()).unwrap();
    let recomputed = run(&config("mp", &["activation_checkpointing=true"]), layout, "tp-cp-dp", EstimateOptions::default()).unwrap();
    // Each what-if is the other run.
    assert!(kept.recompute_what_if.recompute && !recomputed.recompute_what_if.recompute);
    assert!((kept.recompute_what_if.total_gb - recomputed.memory_gb.total).abs() < 1e-9);
    assert!((recomputed.recompute_what_if.step_time_s - kept.step_time_s).abs() < 1e-12);
    // Only the activations change; the forward pass is paid twice.
    assert!((kept.memory_gb.weights - recomputed.memory_gb.weights).abs() < 1e-12);
    assert!(recomputed.memory_gb.activations < kept.memory_gb.activations / 4.0);
    assert!((recomputed.time.recompute_s - recomputed.time.forward_s).abs() < 1e-12 && kept.time.recompute_s == 0.0);
    assert!((recomputed.step_time_s - kept.step_time_s - recomputed.time.forward_s).abs() < 1e-9);
    // What is kept: every block's input, and one block's tensors at a time.
    let depth = 12;
    let counts: Vec<u64> = recomputed.saved_activations.iter().map(|t| t.count).collect();
    assert_eq!(counts.iter().filter(|&&c| c == depth).count(), 1, "{counts:?}");
}

#[test]
fn zero_stages_shrink_the_training_state_only() {
    let e = run(&config("mp", &[]), sizes(1, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let totals: Vec<f64> = e.zero_what_if.iter().map(|z| z.total_gb).collect();
    assert_eq!(e.zero_what_if.iter().map(|z| z.stage).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!((totals[0] - e.memory_gb.total).abs() < 1e-9);
    assert!(totals.windows(2).all(|w| w[1] < w[0]), "{totals:?}");
    // Activations dominate: even stage 3 keeps them whole.
    assert!(totals[3] > e.memory_gb.activations);
}

#[test]
fn terms_explain_every_factor_and_result() {
    let e = run(&config("mp", &["data_loader_config=dali"]), sizes(1, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let names: Vec<&str> = e.terms().iter().map(|t| t.name.as_str()).collect();
    for name in [
        "peak_tflops.fp16",
        "compute_efficiency.fp16",
        "attention_full_rate_head_dim",
        "nvlink_efficiency",
        "network_efficiency",
        "runtime_overhead_gb",
        "dali_overhead_gb",
        "allocator_factor",
        "loader.prepare_gb_per_s",
        "loader.storage_gb_per_s",
        "loader.page_cache_gb_per_gpu",
        "time.exposed_data_loading",
        "memory.total",
        "step_time",
        "samples_per_sec",
    ] {
        assert!(names.contains(&name), "no term {name} in {names:?}");
    }
    let value = |name: &str| e.terms().iter().find(|t| t.name == name).unwrap();
    assert_eq!(value("samples_per_sec").value, e.samples_per_sec);
    assert_eq!(value("compute_efficiency.fp16").kind, TermKind::Factor);
    assert_eq!(value("memory.data_loader").value, perlmutter().estimate.unwrap().dali_overhead_gb);
    // Every saved tensor and every collective has its line.
    assert_eq!(names.iter().filter(|n| n.starts_with("activation: ")).count(), e.saved_activations.len());
    assert!(e.collectives.iter().all(|c| names.iter().any(|n| n.ends_with(&*c.what))));
}

#[test]
fn data_loading_is_a_named_part_of_the_step() {
    let one = sizes(1, 1, 1);
    let serial = run(&config("short", &["serial_read=true"]), one, "tp-cp-dp", EstimateOptions::default()).unwrap();
    let term = |e: &Estimate, name: &str| e.terms().iter().find(|t| t.name == name).cloned().unwrap_or_else(|| panic!("no term {name}"));
    let waited = term(&serial, "time.exposed_data_loading");
    assert_eq!((waited.value, waited.kind), (serial.time.exposed_data_s, TermKind::Derived));
    assert!(waited.note.contains("0 workers read inside the step"), "{}", waited.note);
    assert!(term(&serial, "loader.readers").note.contains("serial_read"));
    assert_eq!(term(&serial, "loader.sample_bytes").value, 4.0 * 2.0 * 20.0 * 360.0 * 720.0 / 1e6);
    assert_eq!(term(&serial, "loader.cached_share").value, 1.0, "short's 512 samples fit in the page cache");
    assert!(term(&serial, "step_time").note.contains("exposed data loading"));
    // The step is the rest plus the wait, and the wait is the batch's whole reading.
    let t = serial.time;
    let rest = t.forward_s + t.backward_s + t.recompute_s + t.optimizer_s + t.overhead_s + t.blocking_comm_s + t.exposed_overlapped_comm_s;
    assert!((t.total_s - rest - t.exposed_data_s).abs() < 1e-12 && t.exposed_data_s == t.data_s);
    assert!((term(&serial, "loader.batch_read").value - t.data_s).abs() < 1e-12);
    // DALI's time is not modelled, as before: no loader terms, no wait.
    let dali = run(&config("short", &["data_loader_config=dali"]), one, "tp-cp-dp", EstimateOptions::default()).unwrap();
    assert_eq!((dali.time.data_s, dali.time.exposed_data_s), (0.0, 0.0));
    assert!(dali.terms().iter().all(|t| !t.name.starts_with("loader.") || t.kind == TermKind::Factor));
}

#[test]
fn group_traffic_and_measured_comparison() {
    let e = run(&config("mp", &["tensor_parallel=4"]), sizes(4, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let groups = e.by_group();
    assert_eq!(groups.iter().map(|g| g.group).collect::<Vec<_>>(), [Token::TP, Token::DP]);
    let tp: u64 = e.collectives.iter().filter(|c| c.group == Token::TP).map(|c| c.bytes * c.count).sum();
    assert_eq!(groups[0].bytes_per_step, tp);
    // The forward's and the backward's all-reduces: one operation, counted once.
    assert_eq!(groups[0].operations_text(), "all-reduce ×72");
    let rows = e.compare(&Measured { samples_per_sec: Some(72.6), memory_gb: Some(37.5), step_time_s: None });
    assert_eq!(rows.iter().map(|r| r.quantity).collect::<Vec<_>>(), ["samples_per_sec", "memory_gb"]);
    assert_eq!(rows[0].measured, 72.6);
    assert_eq!(rows[1].estimated, e.memory_gb.total);
}

#[test]
fn json_reads_back() {
    let e = run(&config("bs64_opt", &[]), sizes(1, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let back: Estimate = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
    assert_eq!((&back.layout, &back.params, back.fits), (&e.layout, &e.params, e.fits));
    assert_eq!((back.collectives.len(), back.terms().len()), (e.collectives.len(), e.terms().len()));
    // Decimal text keeps floats to within an ulp or so.
    assert!((back.samples_per_sec / e.samples_per_sec - 1.0).abs() < 1e-12);
}

#[test]
fn every_problem_is_reported_at_once() {
    let cluster = Clusters::parse(include_str!("../shipped/clusters.yaml")).unwrap();
    let local = cluster.get("local").unwrap();
    let pm = perlmutter();
    let layout = Layout::new(Sizes { tp: 4, cp: 1, dp: 2, pp: 2 }, "tp-cp-dp-pp").unwrap();
    let bad = config("base", &["num_heads=7"]);
    let err = estimate(&bad, &layout, local, pm.gpu("a100-40gb").unwrap(), &EstimateOptions::default()).unwrap_err();
    let problems = err.problems();
    for (field, fragment) in [
        ("embed_dim", "not divisible by num_heads 7"),
        ("tensor_parallel", "the layout has tp 4"),
        ("pipeline_parallel", "the layout has pp 2"),
        ("cluster", "CPU cores"),
        ("cluster", "interconnect"),
        ("cluster", "`estimate` section"),
    ] {
        assert!(problems.for_field(field).any(|p| p.message.contains(fragment)), "no {field}: {fragment} in\n{problems}");
    }
    let reordered = Layout::new(sizes(1, 1, 4), "dp-tp-cp").unwrap();
    let err = estimate(&config("bs64_opt", &[]), &reordered, &pm, pm.gpu("a100-40gb").unwrap(), &EstimateOptions::default()).unwrap_err();
    assert!(err.problems().for_field("parallel_order").any(|p| p.message.contains("dp-tp-cp")), "{err}");
}

/// `mp` on 16 of Perlmutter's A100s as tp 4 × pp 2 × dp 2 with `m` micro-batches.
fn pipelined(schedule: &str, m: usize, zero: usize) -> Estimate {
    let set = ["tensor_parallel=4", "pipeline_parallel=2", "parallel_order=tp-pp-dp"];
    let mut c = config("mp", &set);
    c.apply_overrides(&[format!("num_micro_batches={m}"), format!("pipeline_schedule={schedule}"), format!("zero_stage={zero}")]).unwrap();
    run(&c, Sizes { tp: 4, cp: 1, pp: 2, dp: 2 }, "tp-pp-dp", EstimateOptions::default()).unwrap()
}

#[test]
fn the_bubble_is_the_simulations_idle_share() {
    use scalebook_shared::pipeline::{Schedule, idle_share, simulate};
    for (name, schedule, m) in
        [("gpipe", Schedule::GPipe, 8), ("1f1b", Schedule::OneFOneB, 8), ("interleaved", Schedule::Interleaved(2), 8)]
    {
        let e = pipelined(name, m, 0);
        let pipeline = e.pipeline.as_ref().unwrap();
        let simulated = idle_share(&simulate(schedule, 2, m, 1.0), 2);
        assert!((pipeline.bubble_fraction - simulated).abs() < 1e-12, "{name}: {} vs {simulated}", pipeline.bubble_fraction);
        // The bubble is (p − 1)/(v·m) of the passes, p2p transfers and tp's collectives included.
        let t = &e.time;
        let between: f64 = e.collectives.iter().filter(|c| !c.overlapped && c.phase != Phase::Step).map(|c| c.seconds).sum();
        let passes = t.forward_s + t.backward_s + t.recompute_s + t.overhead_s + between;
        let v = if name == "interleaved" { 2.0 } else { 1.0 };
        assert!((t.bubble_s - passes / (v * m as f64)).abs() < 1e-12, "{name}: {t:?}");
    }
}

#[test]
fn two_stages_halve_the_blocks_and_pass_one_micro_batch_activation_each_way() {
    let one = run(&config("mp", &["tensor_parallel=4"]), sizes(4, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let two = pipelined("1f1b", 8, 0);
    let stage = two.pipeline.as_ref().unwrap();
    assert_eq!(stage.per_stage.iter().map(|s| s.blocks).collect::<Vec<_>>(), [6, 6]);
    // The heaviest stage holds half the blocks' parameters and one end of the model.
    let blocks = |e: &Estimate| e.params.column_parallel + e.params.row_parallel + e.params.block_replicated;
    assert_eq!(2 * blocks(&two), blocks(&one));
    // Each transfer is one micro-batch's fp32 residual stream: 64 samples / dp 2 / 8 = 4.
    let send = find(&two, Token::PP, Operation::SendRecv, Phase::Forward);
    assert_eq!((send.bytes, send.count), (4 * 4 * 4050 * 1536, 8));
    assert_eq!(find(&two, Token::PP, Operation::SendRecv, Phase::Backward).bytes, send.bytes);
    // tp-pp-dp on four-GPU nodes: the two stages of a tp group are on different nodes.
    assert_eq!(send.link, Link::Network);
    // dp's all-reduce covers one stage's parameters only.
    // (the collectives are the slowest stage's, the last: its blocks, final LayerNorm and head).
    let model = two.params.model;
    let last = blocks(&one) / 2 + model.final_norm + model.head;
    assert_eq!(two.pipeline.as_ref().unwrap().slowest_stage, 1);
    assert_eq!(find(&two, Token::DP, Operation::AllReduce, Phase::Backward).bytes, 4 * last);
}

#[test]
fn zero_3_moves_about_one_and_a_half_all_reduces() {
    let e = run(&config("mp", &["tensor_parallel=4", "zero_stage=3"]), sizes(4, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let ddp = run(&config("mp", &["tensor_parallel=4"]), sizes(4, 1, 4), "tp-cp-dp", EstimateOptions::default()).unwrap();
    let ring = |e: &Estimate| -> f64 {
        let dp = e.collectives.iter().filter(|c| c.group == Token::DP && c.bytes > 4);
        dp.map(|c| c.seconds * c.bus_gb_per_s).sum()
    };
    let factor = ring(&e) / ring(&ddp);
    assert!((1.4..=1.5).contains(&factor), "{factor}");
    assert!((e.zero_what_if[3].dp_bytes_factor - factor).abs() < 1e-6);
    assert!(e.memory_gb.total < ddp.memory_gb.total && e.step_time_s > ddp.step_time_s);
    assert!((e.memory_gb.total - ddp.zero_what_if[3].total_gb).abs() < 1e-9);
}
