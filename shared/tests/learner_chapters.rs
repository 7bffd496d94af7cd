//! Every launch a chapter offers (its `run` blocks and each line of its `sweep` blocks) that a
//! learner's run may have as configured (`launch::learner_shape_problems`) stays within what
//! it may ask of the machine (`launch::learner_load_problems`), so that bounding learners'
//! memory, work and traces closes no hands-on part of a chapter that was open to them.

use std::path::{Path, PathBuf};

use scalebook_shared::chapter::{self, Part};
use scalebook_shared::config::ConfigFile;
use scalebook_shared::launch::{learner_load_problems, learner_shape_problems};
use scalebook_shared::protocol::LearnerRuns;
use scalebook_shared::sweep::parse_variants;

fn root() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("..")
}

/// A block's `key=value` setting from its info string.
fn setting<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.split_whitespace().find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
}

/// (chapter, config, overrides, dp) of every launch the chapters offer.
fn launches() -> Vec<(String, String, Vec<String>, u32)> {
    let mut launches = Vec::new();
    for entry in std::fs::read_dir(root().join("static/chapters")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for part in chapter::parts(&std::fs::read_to_string(&path).unwrap()) {
            let Part::Block { info, body } = part else { continue };
            let config = setting(&info, "config").unwrap_or("cpu_short").to_owned();
            if info.starts_with("run") {
                let dp = setting(&info, "dp").map_or(1, |dp| dp.parse().unwrap());
                launches.push((name.clone(), config, Vec::new(), dp));
            } else if info.starts_with("sweep") {
                for variant in parse_variants(&body).unwrap() {
                    launches.push((name.clone(), config.clone(), variant.overrides, variant.dp));
                }
            }
        }
    }
    launches
}

#[test]
fn every_chapters_launch_is_within_a_learners_load() {
    let file = ConfigFile::parse(&std::fs::read_to_string(root().join("config/ViT.yaml")).unwrap()).unwrap();
    // The default learner configs, two ranks, and two gigabytes a run: the share of a 16 GiB
    // laptop running eight learner runs at once (the large-batch chapter's batch of 64 needs
    // 1.2 GiB by the estimate).
    let configs = vec!["cpu_tiny".into(), "cpu_short".into()];
    let rules = LearnerRuns { per_learner: 1, configs, time_limit_minutes: 30, ranks: 2, memory_share_bytes: Some(2 << 30) };
    let (launches, mut open) = (launches(), 0);
    assert!(launches.len() > 40, "the chapters offer {} launches", launches.len());
    for (chapter, name, overrides, dp) in launches {
        let mut config = file.get(&name).unwrap();
        config.apply_overrides(&overrides).unwrap();
        let world = u32::try_from(config.world(dp as usize)).unwrap();
        if !learner_shape_problems(&config, world, &rules, &file).is_empty() {
            // An instructor's exercise, refused to learners before any load is counted; but a
            // learner does the large-batch chapter's sweeps (larger batches, fewer steps).
            assert_ne!(chapter, "large-batch.md", "{name} {overrides:?} is refused to learners");
            continue;
        }
        open += 1;
        let problems = learner_load_problems(&config, world, &rules, &file);
        assert!(problems.is_empty(), "{chapter}: {name} {overrides:?} dp={dp}: {problems:?}");
    }
    assert!(open > 30, "{open} of the chapters' launches are open to learners");
}
