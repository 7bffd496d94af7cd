//! The rules a launch obeys that the page and the server both check: the page as a learner
//! edits (each bound beside the field that broke it, gone once fixed), the server when the
//! launch arrives (it never trusts the page). The server adds what only it can see: its files,
//! its machine, the quota kept with its run records.
//!
//! The step from a launch's `dp` to its world and layout is [`TrainConfig::world`] and
//! [`TrainConfig::layout_for_dp`].

use crate::Problems;
use crate::config::{ConfigFile, ParamCount, TrainConfig, tokens_per_sample};
use crate::protocol::{ExecutorSpec, LaunchRequest, LearnerRuns};

/// Every rule a learner's `request` breaks, each naming its field: a learner config, trained
/// on this machine (whose runs are forced onto the CPU: the GPUs stay the instructor's).
pub fn learner_problems(settings: &LearnerRuns, request: &LaunchRequest) -> Problems {
    let mut problems = Problems::default();
    if !settings.configs.contains(&request.config) {
        let allowed = settings.configs.join(", ");
        let named = crate::excerpt(&request.config);
        problems.push("config", format!("`{named}` is not a learner config: learners may launch {allowed}"));
    }
    if !matches!(request.executor, ExecutorSpec::Local) {
        problems.push("executor", "learners run on this machine's CPU only: choose this machine, not a Slurm cluster");
    }
    problems
}

/// How much a run asks of the machine, in the three measures a learner's run is bounded by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Size {
    /// The model's parameters (memory for weights, gradients and Adam's moments).
    params: u64,
    /// Tokens in one step's batch (activation memory and time per step).
    tokens_per_step: u64,
    /// Samples trained on: steps times the global batch (how long the run takes).
    samples: u64,
}

impl Size {
    fn of(config: &TrainConfig) -> Size {
        let tokens = tokens_per_sample(config.img_size, config.patch_size) as u64;
        let batch = config.global_batch_size as u64;
        Size {
            params: ParamCount::of(config).total,
            tokens_per_step: tokens.saturating_mul(batch),
            samples: (config.num_iters as u64).saturating_mul(batch),
        }
    }

    /// The largest of `sizes` in each measure.
    fn largest(sizes: impl IntoIterator<Item = Size>) -> Size {
        sizes.into_iter().fold(Size::default(), |max, s| Size {
            params: max.params.max(s.params),
            tokens_per_step: max.tokens_per_step.max(s.tokens_per_step),
            samples: max.samples.max(s.samples),
        })
    }
}

/// The rules that keep a learner's run small: at most `max_local_ranks` ranks (a larger run
/// runs alone, holding up the whole room), and no larger in any measure than the largest
/// learner config as the instructor wrote it in `served`. A learner may still change anything
/// within that (a smaller model, another learning rate, fewer steps), as the chapters invite.
pub fn learner_size_problems(
    effective: &TrainConfig,
    world: u32,
    max_local_ranks: usize,
    settings: &LearnerRuns,
    served: &ConfigFile,
) -> Problems {
    let mut problems = Problems::default();
    if world as usize > max_local_ranks {
        problems.push(
            "dp",
            format!("a learner's run has at most {max_local_ranks} ranks (the server's --max-local-ranks); this one has {world}"),
        );
    }
    let most = Size::largest(settings.configs.iter().filter_map(|name| served.get(name).ok()).map(|config| Size::of(&config)));
    let size = Size::of(effective);
    let bounds = [
        ("embed_dim", size.params, most.params, "parameters", "reduce embed_dim or depth"),
        ("global_batch_size", size.tokens_per_step, most.tokens_per_step, "tokens a step", "reduce global_batch_size or img_size"),
        ("num_iters", size.samples, most.samples, "training samples", "reduce num_iters or global_batch_size"),
    ];
    for (field, value, bound, what, fix) in bounds {
        if value > bound {
            problems.push(
                field,
                format!("a learner's run has at most {bound} {what} (the largest learner config); this one has {value}: {fix}"),
            );
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SlurmRequest;

    fn served() -> ConfigFile {
        ConfigFile::parse(include_str!("../../config/ViT.yaml")).unwrap()
    }

    #[test]
    fn a_learner_launches_learner_configs_on_this_machine_only() {
        let rules = LearnerRuns { per_learner: 2, configs: vec!["cpu_tiny".into()] };
        let mut request = LaunchRequest { config: "cpu_tiny".into(), overrides: vec![], dp: 1, executor: ExecutorSpec::Local, seed: None };
        assert!(learner_problems(&rules, &request).is_empty());
        request.config = "short".into();
        request.executor = ExecutorSpec::Slurm(Box::new(SlurmRequest { cluster: "perlmutter".into(), ..SlurmRequest::default() }));
        let fields: Vec<String> = learner_problems(&rules, &request).0.into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["config", "executor"]);
    }

    #[test]
    fn a_learners_run_is_no_larger_than_the_largest_learner_config() {
        let file = served();
        let rules = LearnerRuns { per_learner: 1, configs: vec!["cpu_tiny".into(), "cpu_short".into()] };
        let fields = |config: &TrainConfig, world| -> Vec<String> {
            learner_size_problems(config, world, 1, &rules, &file).0.into_iter().map(|p| p.field).collect()
        };
        let (tiny, short) = (file.get("cpu_tiny").unwrap(), file.get("cpu_short").unwrap());
        assert!(fields(&tiny, 1).is_empty() && fields(&short, 1).is_empty());
        assert_eq!(fields(&tiny, 2), ["dp"]);
        // Within the bounds a learner may change anything: a smaller model trained longer.
        let mut changed = tiny.clone();
        changed.apply_overrides(&["num_iters=64", "lr=1.0e-3"]).unwrap();
        assert!(fields(&changed, 1).is_empty());
        let mut large = short.clone();
        large.apply_overrides(&["embed_dim=256", "global_batch_size=16", "num_iters=129"]).unwrap();
        assert_eq!(fields(&large, 1), ["embed_dim", "global_batch_size", "num_iters"]);
        let message = learner_size_problems(&large, 1, 1, &rules, &file).0[0].message.clone();
        assert!(message.starts_with("a learner's run has at most"), "{message}");
    }
}
