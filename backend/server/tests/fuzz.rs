//! Fuzzing every client message through what the server does with it before anything runs:
//! the protocol's parsing and, for launches and previews, the launch plan (shared validation,
//! the layout, the Slurm job, this machine's limits). No input may panic, and a refusal lists
//! at most a bounded set of short problems. The corpus (`shared/tests/fuzz-corpus/
//! messages.jsonl`) runs first; then `PROPTEST_CASES` random messages per target.

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use scalebook_server::learners::LearnerLaunch;
use scalebook_server::limits::LaunchLimits;
use scalebook_server::plan::{Launcher, Policy, plan};
use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;
use scalebook_shared::protocol::{ClientMessage, ClientRequest, Learner};

/// The longest problem text accepted for any message.
const MAX_PROBLEM_CHARS: usize = 600;

struct Served {
    configs: ConfigFile,
    clusters: Clusters,
    limits: LaunchLimits,
}

/// Read once: a fuzz run checks millions of messages against the same files.
fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(load)
}

fn load() -> Served {
    let workspace = PathBuf::from(format!("{}/../..", std::env::var("CARGO_MANIFEST_DIR").unwrap()));
    let read = |path: &str| std::fs::read_to_string(workspace.join(path)).unwrap();
    Served {
        configs: ConfigFile::parse(&read("config/ViT.yaml")).unwrap(),
        clusters: Clusters::parse(&read("config/clusters.yaml")).unwrap(),
        limits: LaunchLimits::of_this_machine(&workspace, &[]).unwrap(),
    }
}

fn check(served: &Served, text: &str) {
    let Ok(request) = serde_json::from_str::<ClientRequest>(text) else { return };
    let (ClientMessage::Launch(launch) | ClientMessage::PreviewSlurm(launch)) = request.message else { return };
    let policy = Policy { configs: &served.configs, clusters: Some(&served.clusters), limits: &served.limits };
    // As the instructor launches it, and as a learner does (whose rules come first).
    let learner = LearnerLaunch { learner: Learner::parse("0123456789ab").unwrap(), per_learner: 1 };
    for launcher in [Launcher::Instructor, Launcher::Learner(learner)] {
        if let Err(e) = plan(&policy, launch.clone(), launcher) {
            for problem in e.problems().0 {
                let chars = problem.message.chars().count();
                assert!(chars <= MAX_PROBLEM_CHARS, "a {chars}-char problem for {}", problem.field);
            }
        }
    }
}

#[test]
fn the_corpus_of_hostile_messages_is_answered() {
    let served = served();
    let corpus = format!("{}/../../shared/tests/fuzz-corpus/messages.jsonl", std::env::var("CARGO_MANIFEST_DIR").unwrap());
    for line in std::fs::read_to_string(corpus).unwrap().lines() {
        check(served, &serde_json::from_str::<String>(line).unwrap());
    }
}

/// A launch or preview with fields of every shape: known and unknown configs, overrides of
/// YAML's structure, any dp, local or Slurm with any job settings.
fn a_launch() -> impl Strategy<Value = String> {
    let config = prop_oneof![Just("cpu_tiny".to_owned()), Just("bs64_opt".to_owned()), Just("mp".to_owned()), ".{0,10}"];
    let value = "(\\[|\\]|,|&a|\\*a|!!|[0-9]{1,20}|-1|[a-z_/.]{1,12}|None|\\.nan|'|\"|\n| ){0,12}";
    let key = "(num_iters|depth|embed_dim|num_heads|tensor_parallel|context_parallel|parallel_order|global_batch_size|local_batch_size|\
               num_data_workers|img_size|lr|warmup|train_data_path|global_means_path|amp_mode|[a-z_]{0,8})";
    let an_override = (key, value).prop_map(|(k, v)| format!("{k}={v}"));
    let slurm = (any::<Option<u32>>(), proptest::option::of(".{0,20}"), proptest::option::of("[0-9:-]{0,10}"))
        .prop_map(|(nodes, account, time)| serde_json::json!({ "kind": "slurm", "cluster": "perlmutter", "nodes": nodes, "account": account, "time": time }));
    let executor = prop_oneof![Just(serde_json::json!({ "kind": "local" })), slurm];
    (prop_oneof![Just("launch"), Just("preview_slurm")], config, proptest::collection::vec(an_override, 0..5), any::<u32>(), executor)
        .prop_map(|(kind, config, overrides, dp, executor)| {
            serde_json::json!({ "id": "f", "type": kind, "config": config, "overrides": overrides, "dp": dp % 70, "executor": executor })
                .to_string()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn launches_of_any_shape_are_planned_or_refused_briefly(text in a_launch()) {
        check(served(), &text);
    }

    #[test]
    fn any_text_is_a_message_or_a_parse_error(text in "(\\{|\\}|\\[|\\]|\"type\"|\"launch\"|\"id\"|:|,|\"[a-z_]{0,8}\"|[0-9-]{1,21}|null|true|\\\\u[0-9a-f]{4}| ){0,40}") {
        check(served(), &text);
    }
}
