//! `scalebook search` as an instructor runs it from the project root: the tables, the JSON
//! document (its counts agree), the tutorial's choice beside the best, and bad input exiting
//! with status 2 and a line naming the flag or the rule.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use self::cli::{stderr_of_invalid, stdout};

mod cli;

fn search(args: &[&str]) -> Output {
    cli::scalebook("search", args)
}

fn json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    serde_json::from_str(&stdout(&search(&args))).unwrap()
}

#[test]
fn search_table_ranks_explains_and_sets_the_tutorials_choice_beside_the_best() {
    let text = stdout(&search(&["--config", "mp", "--cluster", "perlmutter", "--gpus", "16", "--top", "5"]));
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("mp on 16 × perlmutter a100-40gb (40 GiB): 7,616 layouts searched, "), "{first}");
    for fragment in [
        "fastest 5 ",
        "  rank  tp  cp  pp   dp order     zero recompute micro samples/s GiB/GPU  limited by",
        "Pareto front: ",
        "why: ",
        "arithmetic (matmuls and attention)",
        "left out, by rule",
        "tensor_parallel: tp must divide num_heads",
        "e.g. tp 16 does not divide num_heads 8",
        "pp: pp must be at most depth: every pipeline stage needs a block",
        "the tutorial's choice",
        "--config=mp --tensor_parallel=4 (checklist 000-75)",
        "--context_parallel=4 --parallel_order=cp-tp-dp (checklist 000-81)",
        "    behind the best mostly by ",
    ] {
        assert!(text.contains(fragment), "missing {fragment:?} in\n{text}");
    }
    let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("fastest 5")).skip(2).take(5).collect();
    assert!(table.iter().all(|l| l.split_whitespace().count() > 10), "{table:?}");
    assert!(text.lines().any(|l| l.starts_with("    rank ") && l.contains(" of ")), "the tutorial's rank\n{text}");
}

#[test]
fn search_json_counts_agree_and_names_the_tutorials_rank() {
    let doc = json(&["--config", "mp", "--gpus", "16", "--gpu", "a100-80gb", "--top", "3"]);
    assert_eq!((doc["gpu"].as_str(), doc["gpus"].as_u64()), (Some("a100-80gb"), Some(16)));
    let excluded: u64 = doc["exclusions"].as_array().unwrap().iter().map(|e| e["count"].as_u64().unwrap()).sum();
    assert_eq!(excluded + doc["valid"].as_u64().unwrap(), doc["searched"].as_u64().unwrap());
    assert_eq!(doc["searched"], 7616);
    let top = doc["top"].as_array().unwrap();
    assert_eq!(top.len(), 3);
    let speed = |r: &Value| r["samples_per_sec"].as_f64().unwrap();
    assert!(speed(&top[0]) >= speed(&top[2]));
    for key in ["candidate", "memory_gb", "step_time_s", "limit", "split"] {
        assert!(!top[0][key].is_null(), "{key} missing in {}", top[0]);
    }
    assert_eq!(top[0]["candidate"]["sizes"]["tp"].as_u64().map(|tp| 8 % tp), Some(0));
    let tutorial = doc["tutorial"].as_array().unwrap();
    assert_eq!(tutorial.len(), 2);
    for standing in tutorial {
        assert!(standing["rank"].as_u64().unwrap() >= 1, "{standing}");
        assert_eq!(standing["judgement"]["verdict"], "valid");
    }
    assert_eq!(tutorial[0]["choice"]["sizes"]["tp"], 4);
    assert!(!tutorial[0]["behind_best"]["part"].is_null(), "{}", tutorial[0]);
    assert!(doc["front"].as_array().unwrap()[0][0] == 1);
}

#[test]
fn search_bad_input_names_the_flag_or_the_rule_and_exits_2() {
    let stderr = stderr_of_invalid(&search(&["--config", "mp", "--gpus", "0"]));
    assert!(stderr.contains("gpus: must be at least 1, got 0"), "{stderr}");
    let stderr = stderr_of_invalid(&search(&["--config", "mp", "--gpus", "16", "--gpu", "h100"]));
    assert!(stderr.contains("gpu: unknown GPU `h100` on perlmutter; it has: a100-40gb, a100-80gb"), "{stderr}");
    let stderr = stderr_of_invalid(&search(&["--config", "mp", "--gpus", "2", "--cluster", "local"]));
    assert!(stderr.contains("cluster: `local` runs ranks on CPU cores"), "{stderr}");
    let stderr = stderr_of_invalid(&search(&["--config", "nope", "--gpus", "2"]));
    assert!(stderr.contains("unknown config `nope`"), "{stderr}");
    let stderr = stderr_of_invalid(&search(&["--config", "mp", "--gpus", "16", "--top", "0"]));
    assert!(stderr.contains("--top"), "{stderr}");

    // A config whose smallest layout does not fit: every rule that left layouts out, and the
    // least memory any layout needed.
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("wide.yaml");
    std::fs::write(&yaml, "wide:\n  embed_dim: 8192\n  depth: 48\n  amp_mode: fp16\n").unwrap();
    let stderr = stderr_of_invalid(&search(&["--config", "wide", "--yaml", yaml.to_str().unwrap(), "--gpus", "1"]));
    assert!(stderr.contains("gpus: no layout of 1 GPU runs `wide` on the a100-40gb: all 40 break a rule"), "{stderr}");
    assert!(stderr.contains("memory: the layout that needs least, tp 1 × cp 1 × pp 1 × dp 1"), "{stderr}");
}

#[test]
fn search_why_names_the_data_loading_a_step_waits_for() {
    // `short` reads each 0-worker batch inside the step (shared over the rank's threads), so
    // its split has a data-loading part; only a DALI loader's time is left out now.
    let text = stdout(&search(&["--config", "short", "--gpus", "1", "--top", "3"]));
    for fragment in ["data loading the step waits for", "(not modelled: a DALI loader's time)"] {
        assert!(text.contains(fragment), "missing {fragment:?} in\n{text}");
    }
    assert!(!text.contains("data loading's time"), "{text}");
}

/// A reader that stops after the first line (`scalebook search … | head -1`) ends the output
/// quietly: success, no panic. The table of 1,000 layouts is larger than a pipe holds, so the
/// search is still writing when the reader goes.
#[test]
fn search_into_a_pipe_closed_early_ends_quietly() {
    let args = ["search", "--config", "mp", "--cluster", "perlmutter", "--gpus", "64", "--top", "1000"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_scalebook"))
        .current_dir(cli::root())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("layouts searched"), "{first}");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && !stderr.contains("panicked"), "{:?}: {stderr}", output.status);
}
