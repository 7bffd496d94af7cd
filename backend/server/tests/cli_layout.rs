//! `scalebook layout` as a user runs it: JSON checked against every case of the tutorial's
//! `rank-groups.json`, the table, and bad layouts.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Case {
    world: u32,
    sizes: BTreeMap<String, u32>,
    order: String,
    effective_order: String,
    groups: BTreeMap<String, Vec<Vec<u32>>>,
}

const TOKENS: [&str; 9] = ["dp", "tp", "cp", "pp", "tp-cp", "dp-cp", "tp-pp", "tp-dp", "tp-dp-cp"];

fn cases() -> Vec<Case> {
    let path = format!("{}/../../shared/tests/data/rank-groups.json", std::env::var("CARGO_MANIFEST_DIR").unwrap());
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn layout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scalebook")).arg("layout").args(args).output().unwrap()
}

fn case_args(case: &Case) -> Vec<String> {
    let mut args: Vec<String> = case.sizes.iter().flat_map(|(dim, size)| [format!("--{dim}"), size.to_string()]).collect();
    args.extend(["--order".to_owned(), case.order.clone()]);
    args
}

#[test]
fn json_matches_every_reference_case() {
    for case in cases() {
        for gpus_per_node in [4u32, 8] {
            let mut args = case_args(&case);
            args.extend(["--gpus-per-node".to_owned(), gpus_per_node.to_string(), "--json".to_owned()]);
            let out = layout(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            let text = String::from_utf8(out.stdout).unwrap();
            let json: Value = serde_json::from_str(&text).unwrap();

            assert_eq!(json["world"], case.world, "{args:?}");
            assert_eq!(json["order"], case.effective_order.as_str(), "{args:?}");
            let nodes: Vec<Vec<u32>> = (0..case.world.div_ceil(gpus_per_node))
                .map(|n| (n * gpus_per_node..((n + 1) * gpus_per_node).min(case.world)).collect())
                .collect();
            assert_eq!(json["nodes"], serde_json::to_value(&nodes).unwrap(), "{args:?}");
            for token in TOKENS {
                let expected = &case.groups[token];
                assert_eq!(json["groups"][token], serde_json::to_value(expected).unwrap(), "{args:?} {token}");
                let crosses = expected.iter().any(|g| g.iter().any(|r| r / gpus_per_node != g[0] / gpus_per_node));
                assert_eq!(json["crosses_nodes"][token], crosses, "{args:?} {token}");
            }
            assert_eq!(json["groups"].as_object().unwrap().len(), TOKENS.len());
            assert_eq!(json["crosses_nodes"].as_object().unwrap().len(), TOKENS.len());
        }
    }
}

#[test]
fn json_lists_tokens_in_the_tutorial_order() {
    let out = layout(&["--tp", "2", "--cp", "2", "--dp", "4", "--order", "tp-cp-dp", "--json"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let positions: Vec<usize> = TOKENS.iter().map(|t| text.find(&format!("\"{t}\":[")).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn table_shows_each_token_with_its_groups() {
    let out = layout(&["--tp", "2", "--cp", "2", "--dp", "64", "--order", "cp-tp-dp"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("world 256"), "{text}");
    assert!(text.contains("cp-tp-dp-pp"), "{text}");
    for token in TOKENS {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(token)).unwrap_or_else(|| panic!("{token}: {text}"));
        assert!(line.contains('['), "{line}");
    }
    let cp = text.lines().find(|l| l.starts_with("cp ")).unwrap();
    // cp is fastest here: pairs of consecutive ranks, on one node each.
    assert!(cp.contains("[0,1] [2,3]") && cp.contains(" no ") && cp.contains("more)"), "{cp}");
    let dp = text.lines().find(|l| l.starts_with("dp ")).unwrap();
    assert!(dp.contains("yes") && dp.contains("gradient all-reduce") && dp.contains('…'), "{dp}");
}

#[test]
fn bad_layouts_exit_2_with_one_line_naming_the_field() {
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--tp", "2", "--cp", "4", "--order", "tp-dp"], &["order", "cp", "4"]),
        (&["--tp", "2", "--order", "tp-ep-dp"], &["order", "`ep`"]),
        (&["--tp", "0", "--order", "tp-dp"], &["tp", "at least 1"]),
        (&["--gpus-per-node", "0"], &["gpus_per_node"]),
        (&["--tp", "0", "--dp", "3", "--order", "tp-tp", "--gpus-per-node", "0"], &["tp:", "order:", "dp", "gpus_per_node"]),
    ];
    for (args, mentions) in cases {
        let out = layout(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        for mention in mentions {
            assert!(stderr.contains(mention), "{args:?} should mention {mention}: {stderr}");
        }
    }
}
