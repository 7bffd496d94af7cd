//! `scalebook config` as a user runs it from the project root: the effective config and its
//! derived values, JSON output, the list, and bad input exiting with status 2.

use std::process::Output;

use serde_json::Value;

use self::cli::{stderr_of_invalid, stdout};

mod cli;

fn config(args: &[&str]) -> Output {
    cli::scalebook("config", args)
}

#[test]
fn show_prints_every_key_then_the_derived_values() {
    let text = stdout(&config(&["show", "base"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "base:");
    for line in ["  embed_dim: 384", "  img_size: [360, 720]", "  lr: 0.0005", "  limit_nsamples: None"] {
        assert!(lines.contains(&line), "missing {line:?} in\n{text}");
    }
    assert!(text.contains("#   parameters: 23,832,960 "), "{text}");
    assert!(text.contains("#   iters_per_epoch: 2372\n"), "{text}");
    assert!(text.contains("#   num_epochs: 12 "), "{text}");
}

#[test]
fn json_carries_the_config_and_derived_values() {
    let output = config(&["show", "mp", "--world", "16", "--set", "tensor_parallel=4", "--json"]);
    let doc: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(doc["name"], "mp");
    assert_eq!(doc["config"]["embed_dim"], 1536);
    assert_eq!(doc["config"]["tensor_parallel"], 4);
    let derived = &doc["derived"];
    assert_eq!((derived["dp"].as_u64(), derived["local_batch_size"].as_u64()), (Some(4), Some(16)));
    assert_eq!(derived["iters_per_epoch"], 593);
    assert_eq!(derived["params"]["total"], 350_135_808u64);
}

#[test]
fn overrides_and_dataset_size_change_the_result() {
    let args = ["show", "short", "--set", "limit_nsamples=None", "--dataset-samples", "1600", "--json"];
    let doc: Value = serde_json::from_str(&stdout(&config(&args))).unwrap();
    assert_eq!(doc["config"]["limit_nsamples"], Value::Null);
    assert_eq!(doc["derived"]["iters_per_epoch"], 100);
    assert_eq!(doc["derived"]["num_epochs"], 1);
}

#[test]
fn an_invalid_config_prints_every_problem_and_exits_2() {
    let output = config(&["show", "base", "--set", "num_heads=7", "--set", "tensor_parallel=3", "--world", "4"]);
    let stderr = stderr_of_invalid(&output);
    let lines: Vec<&str> = stderr.lines().collect();
    for line in [
        "embed_dim: 384 is not divisible by num_heads 7",
        "tensor_parallel: 3 does not divide num_heads 7 (every tp rank owns whole heads)",
    ] {
        assert!(lines.contains(&line), "missing {line:?} in\n{stderr}");
    }
    assert!(lines.iter().any(|l| l.starts_with("world: 4 ranks is not divisible")), "{stderr}");
}

#[test]
fn bad_names_files_and_overrides_exit_2() {
    let stderr = stderr_of_invalid(&config(&["show", "nope"]));
    assert!(stderr.contains("unknown config `nope`") && stderr.contains("cpu_short"), "{stderr}");

    let stderr = stderr_of_invalid(&config(&["show", "base", "--set", "embd_dim=3"]));
    assert!(stderr.contains("embd_dim: unknown key; did you mean `embed_dim`?"), "{stderr}");

    let stderr = stderr_of_invalid(&config(&["show", "base", "--yaml", "no/such/file.yaml"]));
    assert!(stderr.contains("cannot read no/such/file.yaml"), "{stderr}");

    let bad = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(bad.path(), "base:\n  num_heads: eight\n").unwrap();
    let stderr = stderr_of_invalid(&config(&["show", "base", "--yaml", bad.path().to_str().unwrap()]));
    assert!(stderr.contains("num_heads: expected a whole number, got \"eight\""), "{stderr}");
}

#[test]
fn the_output_is_itself_a_loadable_config() {
    let text = stdout(&config(&["show", "cpu_short", "--set", "depth=2"]));
    let file = scalebook_shared::config::ConfigFile::parse(&text).unwrap();
    assert_eq!(file.get("cpu_short").unwrap().depth, 2);
}

#[test]
fn list_names_every_config_with_its_differences_from_base() {
    let text = stdout(&config(&["list"]));
    let line = |name: &str| text.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_default();
    assert!(line("base").contains("(the tutorial's base)"), "{text}");
    assert!(line("short").ends_with("num_iters=128 limit_nsamples=512 limit_nsamples_val=128"), "{text}");
    assert!(line("bs32_opt").contains("global_batch_size=32"), "{text}");
    assert!(line("cpu_short").contains("img_size=[90, 180]"), "{text}");
    assert_eq!(text.lines().count(), 19);
}
