//! Fuzzing what a browser sends through `shared`'s parsers: config YAML (the editor's text),
//! `key=value` overrides and the Slurm fields. Every input must get an answer (a config, or
//! problems naming fields) without a panic, and refusals stay short whatever the input's size.
//! The corpus (`tests/fuzz-corpus/*.jsonl`, one JSON string or object per line) holds the
//! hostile cases met so far and runs first; then `PROPTEST_CASES` random cases per target
//! (proptest's default, 256, in the test command; BENCHMARKS.md has the long run).

use std::sync::OnceLock;

use proptest::prelude::*;
use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::{ConfigFile, TrainConfig};
use scalebook_shared::layout::Layout;
use scalebook_shared::protocol::SlurmRequest;

const SHIPPED: &str = include_str!("../shipped/ViT.yaml");
const CLUSTERS: &str = include_str!("../shipped/clusters.yaml");
/// The longest refusal text accepted for any input: a short excerpt of it, the rule, the bound.
const MAX_PROBLEM_CHARS: usize = 600;

fn corpus<T: serde::de::DeserializeOwned>(name: &str) -> Vec<T> {
    let path = format!("{}/tests/fuzz-corpus/{name}", std::env::var("CARGO_MANIFEST_DIR").unwrap());
    std::fs::read_to_string(&path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The config overrides apply to, read once (a long run checks millions of inputs).
fn base() -> TrainConfig {
    static BASE: OnceLock<TrainConfig> = OnceLock::new();
    BASE.get_or_init(|| ConfigFile::parse(SHIPPED).unwrap().get("cpu_tiny").unwrap()).clone()
}

fn clusters() -> &'static Clusters {
    static CLUSTERS_FILE: OnceLock<Clusters> = OnceLock::new();
    CLUSTERS_FILE.get_or_init(|| Clusters::parse(CLUSTERS).unwrap())
}

fn check_overrides(overrides: &[String]) {
    let mut config = base();
    if let Err(e) = config.apply_overrides(overrides) {
        for problem in e.problems().0 {
            assert!(problem.message.chars().count() <= MAX_PROBLEM_CHARS, "a {}-char problem for {}", problem.message.len(), problem.field);
        }
        assert_eq!(config, base(), "a refused set of overrides changed the config");
    } else if let Ok(layout) = config.layout(config.tensor_parallel * config.context_parallel) {
        // What was accepted must be writable and read back as the same config.
        let again = ConfigFile::parse(&config.to_yaml("fuzzed")).unwrap().get("fuzzed").unwrap();
        assert_eq!(again, config);
        let _ = config.derived(layout.world() as usize, None);
    }
}

fn check_slurm(request: &SlurmRequest) {
    let layout = base().layout(1).unwrap();
    if let Ok(job) = request.resolve(clusters(), &layout) {
        let fields = [Some(&job.job_name), Some(&job.account), Some(&job.qos), job.reservation.as_ref()];
        for field in fields.into_iter().flatten() {
            assert!(
                !field.contains(|c: char| c.is_control() || c.is_whitespace() || "$`;|&<>\\\"'".contains(c)),
                "{field:?} reached a script"
            );
        }
    }
}

#[test]
fn the_corpus_of_hostile_inputs_is_answered() {
    for text in corpus::<String>("configs.jsonl") {
        let _ = ConfigFile::parse(&text);
    }
    for text in corpus::<String>("overrides.jsonl") {
        check_overrides(&[text]);
    }
    for request in corpus::<serde_json::Value>("slurm.jsonl") {
        let mut request = request;
        if request.get("cluster").is_none() {
            request["cluster"] = "perlmutter".into();
        }
        if let Ok(request) = serde_json::from_value::<SlurmRequest>(request) {
            check_slurm(&request);
        }
    }
}

/// Text made of YAML's structure: indentation, keys, flow brackets, anchors, aliases, tags,
/// quotes, comments, numbers in every spelling.
fn yaml_soup() -> impl Strategy<Value = String> {
    proptest::string::string_regex(
        "(\n|  |- |[a-z_]{1,14}: |embed_dim|img_size|[\\[\\]{},:&*!|>'\"#%@`\\\\-]|<<|[0-9.eE+-]{1,8}|None|true|~|\\.inf|\t|\u{0}|é){0,60}",
    )
    .unwrap()
}

/// One override: a real key (or not), `=`, a value of YAML's structure.
fn an_override() -> impl Strategy<Value = String> {
    let keys: Vec<String> = TrainConfig::FIELDS.iter().map(|f| f.name.to_owned()).chain(["no_such_key".into(), String::new()]).collect();
    (proptest::sample::select(keys), prop_oneof![Just("=".to_owned()), Just(String::new()), Just("==".to_owned())], yaml_soup())
        .prop_map(|(key, eq, value)| format!("{key}{eq}{value}"))
}

fn slurm_field() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        proptest::string::string_regex("[a-zA-Z0-9_.:-]{0,12}|.{0,40}|[0-9]{1,3}:[0-9]{2}:[0-9]{2}|[0-9]-[0-9]{2}").unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn config_text_never_panics(text in yaml_soup()) {
        if let Ok(file) = ConfigFile::parse(&text) {
            for name in file.names() {
                let _ = file.get(name).map(|c| c.validate(4));
            }
        }
    }

    #[test]
    fn overrides_never_panic_and_refusals_stay_short(overrides in proptest::collection::vec(an_override(), 0..6)) {
        check_overrides(&overrides);
    }

    #[test]
    fn slurm_fields_never_reach_a_script_unchecked(
        (gpu, time, account, qos, reservation, job_name) in (slurm_field(), slurm_field(), slurm_field(), slurm_field(), slurm_field(), slurm_field()),
        nodes in proptest::option::of(any::<u32>()),
        cluster in prop_oneof![Just("perlmutter".to_owned()), Just("local".to_owned()), ".{0,12}"],
    ) {
        let request = SlurmRequest { cluster, gpu, nodes, time, account, qos, reservation, job_name };
        check_slurm(&request);
    }

    #[test]
    fn layouts_of_any_size_are_checked_not_overflowed(tp in any::<u32>(), cp in any::<u32>(), dp in any::<u32>(), pp in any::<u32>()) {
        let sizes = scalebook_shared::layout::Sizes { tp, cp, dp, pp };
        let _ = Layout::new(sizes, "tp-cp-dp-pp");
    }
}
