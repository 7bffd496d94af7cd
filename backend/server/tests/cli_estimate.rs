//! `scalebook estimate` as a user runs it from the project root: the JSON document (its keys
//! and that they agree with each other), the tables, the layout flags, and bad input exiting
//! with status 2 and every problem.

use std::process::Output;

use serde_json::Value;

use self::cli::{stderr_of_invalid, stdout};

mod cli;

fn estimate(args: &[&str]) -> Output {
    cli::scalebook("estimate", args)
}

fn json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    serde_json::from_str(&stdout(&estimate(&args))).unwrap()
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

#[test]
fn json_has_the_documented_keys_and_they_agree() {
    let doc = json(&["--config", "mp", "--tp", "4", "--dp", "4", "--gpu", "a100-40gb"]);
    let memory = doc["memory_gb"].as_object().unwrap();
    let parts: f64 = memory.iter().filter(|(k, _)| *k != "total").map(|(_, v)| number(v)).sum();
    assert!(memory.len() > 5, "{memory:?}");
    assert!((parts - number(&memory["total"])).abs() < 1e-9);
    assert_eq!(doc["fits"], number(&memory["total"]) <= 40.0);
    assert_eq!(doc["fits"], true);
    let step = number(&doc["step_time_s"]);
    assert!((number(&doc["samples_per_sec"]) * step - 64.0).abs() < 1e-9);
    assert!(number(&doc["tflops_per_gpu"]) > 0.0);
    let collectives = doc["collectives"].as_array().unwrap();
    assert!(!collectives.is_empty());
    for c in collectives {
        for key in ["group", "operation", "bytes", "link", "seconds"] {
            assert!(!c[key].is_null(), "{key} missing in {c}");
        }
        assert!(["nvlink", "network"].contains(&c["link"].as_str().unwrap()), "{c}");
    }
    let tp = collectives.iter().find(|c| c["group"] == "tp" && c["phase"] == "forward").unwrap();
    assert_eq!((tp["operation"].as_str(), tp["link"].as_str(), tp["count"].as_u64()), (Some("all-reduce"), Some("nvlink"), Some(24)));
    assert_eq!(tp["bytes"].as_u64(), Some(16 * 4050 * 1536 * 2));
    assert_eq!(doc["params"]["model"]["total"], 350_135_808u64);
    assert!(doc["terms"].as_array().unwrap().iter().any(|t| t["name"] == "compute_efficiency.fp16"));
}

#[test]
fn the_40gb_verdict_follows_the_tutorial() {
    let tp1 = json(&["--config", "mp", "--dp", "4", "--gpu", "a100-40gb"]);
    assert_eq!(tp1["fits"], false);
    let tp1_80 = json(&["--config", "mp", "--dp", "4", "--gpu", "a100-80gb"]);
    assert_eq!(tp1_80["fits"], true);
    assert_eq!(tp1["memory_gb"], tp1_80["memory_gb"]);
}

#[test]
fn layout_flags_and_options_change_the_estimate() {
    let base = json(&["--config", "bs1024_opt", "--dp", "64"]);
    let blocking = json(&["--config", "bs1024_opt", "--dp", "64", "--no-overlap"]);
    assert!(number(&blocking["step_time_s"]) > number(&base["step_time_s"]));
    assert_eq!(base["gpu"], "a100-40gb", "the cluster's first GPU is the default");
    let cp = json(&["--config", "mp", "--cp", "4", "--dp", "4", "--order", "cp-tp-dp", "--set", "embed_dim=1024"]);
    assert_eq!(cp["layout"]["order"], "cp-tp-dp-pp");
    assert_eq!(cp["tokens_per_rank"], 1013);
    let tf32 = json(&["--config", "short"]);
    let fp32 = json(&["--config", "short", "--no-tf32"]);
    assert_eq!((tf32["precision"].as_str(), fp32["precision"].as_str()), (Some("tf32"), Some("fp32")));
}

#[test]
fn tables_show_the_verdict_memory_time_collectives_and_terms() {
    let text = stdout(&estimate(&["--config", "mp", "--tp", "4", "--dp", "4"]));
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("mp on perlmutter a100-40gb: world 16 = tp 4 × cp 1 × pp 1 × dp 4"), "{first}");
    for fragment in [
        "GiB per GPU: fits",
        "parameters 350,135,808 (95,235,072 per rank)",
        "memory per GPU (GiB)",
        "by ZeRO stage (zero_stage, each runs): 0 ",
        "time per step (s)",
        "collectives per step",
        "  tp    all-reduce     forward     24 ",
        "terms\n",
        "factor    allocator_factor = 1.14",
    ] {
        assert!(text.contains(fragment), "missing {fragment:?} in\n{text}");
    }
    let oom = stdout(&estimate(&["--config", "mp", "--dp", "4"]));
    assert!(oom.lines().nth(1).unwrap().contains("does NOT fit"), "{oom}");
    let single = stdout(&estimate(&["--config", "short_opt"]));
    assert!(single.contains("collectives per step: none (one rank)"), "{single}");
}

#[test]
fn bad_input_prints_every_problem_and_exits_2() {
    let stderr = stderr_of_invalid(&estimate(&["--config", "mp", "--dp", "0", "--cluster", "frontier"]));
    assert!(stderr.contains("dp: must be at least 1, got 0"), "{stderr}");
    assert!(stderr.contains("unknown cluster `frontier`"), "{stderr}");

    let stderr = stderr_of_invalid(&estimate(&["--config", "mp", "--tp", "3", "--dp", "2", "--set", "num_heads=7"]));
    for line in [
        "embed_dim: 1536 is not divisible by num_heads 7",
        "tensor_parallel: 3 does not divide num_heads 7 (every tp rank owns whole heads)",
    ] {
        assert!(stderr.lines().any(|l| l == line), "missing {line:?} in\n{stderr}");
    }

    let stderr = stderr_of_invalid(&estimate(&["--config", "short", "--gpu", "h100"]));
    assert!(stderr.contains("unknown GPU `h100` on perlmutter; it has: a100-40gb, a100-80gb"), "{stderr}");
    let stderr = stderr_of_invalid(&estimate(&["--config", "short", "--cluster", "local", "--gpu", "a100-40gb"]));
    assert!(stderr.contains("gpu: `local` runs on this machine's cores"), "{stderr}");
    let stderr = stderr_of_invalid(&estimate(&["--config", "nope"]));
    assert!(stderr.contains("unknown config `nope`"), "{stderr}");
}

/// `--cluster local`: the ranks are this machine's cores, estimated from its measurement (here
/// a cached one with round figures, so the arithmetic can be checked).
#[test]
fn this_machine_is_estimated_from_its_measured_rates() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("machine.json");
    let rates = |threads: usize| {
        serde_json::json!({
            "threads": threads, "matmul_gflops": [100.0, 100.0, 100.0], "attention_gflops": [50.0, 50.0],
            "copy_gb_per_s": 40.0, "op_overhead_us": 2.0, "step_op_us": 10.0,
        })
    };
    let machine = serde_json::json!({
        "cores": 2, "memory_gb": 16.0, "process_baseline_gb": 0.1, "by_threads": [rates(1), rates(2)],
        "collective_latency_s": 0.001, "collective_gb_per_s": 2.0, "measured_at": 0,
    });
    std::fs::write(&cache, machine.to_string()).unwrap();
    let path = cache.to_str().unwrap();
    let one = json(&["--config", "cpu_tiny", "--cluster", "local", "--machine", path]);
    assert!(one["gpu"].as_str().unwrap().starts_with("this machine's CPU"), "{one}");
    // Its matmuls at the measured 100 GFLOP/s, attention at the measured 50.
    let flops = &one["flops"]["rank_step"];
    let compute = (number(&flops["matmul_forward"]) + number(&flops["matmul_backward"])) / 100e9
        + (number(&flops["attention_forward"]) + number(&flops["attention_backward"])) / 50e9;
    let time = &one["time"];
    let modelled = number(&time["forward_s"]) + number(&time["backward_s"]) - number(&time["elementwise_s"]);
    assert!((modelled - compute).abs() < 1e-12 * compute.max(1.0) + 1e-12, "{modelled} against {compute}");
    assert!(number(&time["overhead_s"]) > 0.0, "a CPU step pays for its ops: {time}");
    // Two ranks: each all-reduce pays Gloo's latency before its bytes.
    let two = json(&["--config", "cpu_tiny", "--cluster", "local", "--machine", path, "--dp", "2"]);
    let all_reduce = &two["collectives"][0];
    assert!(number(&all_reduce["seconds"]) >= 0.001 * number(&all_reduce["count"]), "{all_reduce}");
}

#[test]
fn the_time_table_shows_the_data_loading_the_step_waits_for() {
    // The tutorial's 0-worker loader: the training loop reads the 16 samples one by one.
    let serial = json(&["--config", "short", "--set", "serial_read=true"]);
    let waited = number(&serial["time"]["exposed_data_s"]);
    assert!((waited - 0.484).abs() < 0.01, "{waited}");
    assert_eq!(waited, number(&serial["time"]["data_s"]));
    assert!((number(&serial["samples_per_sec"]) - 8.8).abs() < 0.1, "{}", serial["samples_per_sec"]);
    // Eight workers read beside the step and hide it.
    let eight = json(&["--config", "short", "--set", "num_data_workers=8"]);
    assert_eq!((number(&eight["time"]["exposed_data_s"]), &eight["time"]["data_overlapped"]), (0.0, &Value::Bool(true)));
    let text = stdout(&estimate(&["--config", "short", "--set", "serial_read=true"]));
    for fragment in [
        "data loading, waited for",
        "  all inside the step",
        "factor    loader.prepare_gb_per_s = 1.3700 GB/s",
        "time.exposed_data_loading",
    ] {
        assert!(text.contains(fragment), "missing {fragment:?} in\n{text}");
    }
}
