//! The rules a launch obeys that the page and the server both check: the page as a learner
//! edits (each bound beside the field that broke it, gone once fixed), the server when the
//! launch arrives (it never trusts the page). The server adds what only it can see: its files,
//! its machine, the quota kept with its run records.
//!
//! The step from a launch's `dp` to its world and layout is [`TrainConfig::world`] and
//! [`TrainConfig::layout_for_dp`].

use crate::Problems;
use crate::config::{ConfigFile, ERA5_TRAIN_SAMPLES, ParamCount, TrainConfig, tokens_per_sample};
use crate::estimate::{self, RunLoad};
use crate::profile::StepWindow;
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
    /// Epochs: each ends with a validation pass, maps and a checkpoint, however few its steps.
    epochs: u64,
    /// Validation samples over the whole run (unbounded without `limit_nsamples_val`).
    validation_samples: u64,
}

impl Size {
    fn of(config: &TrainConfig) -> Size {
        let tokens = tokens_per_sample(config.img_size, config.patch_size) as u64;
        let batch = config.global_batch_size as u64;
        let samples = (config.num_iters as u64).saturating_mul(batch);
        let epoch = config.limit_nsamples.unwrap_or(ERA5_TRAIN_SAMPLES).max(1) as u64;
        let epochs = samples.div_ceil(epoch);
        Size {
            params: ParamCount::of(config).total,
            tokens_per_step: tokens.saturating_mul(batch),
            samples,
            epochs,
            validation_samples: config.limit_nsamples_val.map_or(u64::MAX, |n| epochs.saturating_mul(n as u64)),
        }
    }

    /// The largest of `sizes` in each measure.
    fn largest(sizes: impl IntoIterator<Item = Size>) -> Size {
        sizes.into_iter().fold(Size::default(), |max, s| Size {
            params: max.params.max(s.params),
            tokens_per_step: max.tokens_per_step.max(s.tokens_per_step),
            samples: max.samples.max(s.samples),
            epochs: max.epochs.max(s.epochs),
            validation_samples: max.validation_samples.max(s.validation_samples),
        })
    }
}

/// The rules that keep a learner's run small: its shape ([`learner_shape_problems`]) and what
/// it asks of the machine ([`learner_load_problems`]).
pub fn learner_size_problems(effective: &TrainConfig, world: u32, settings: &LearnerRuns, served: &ConfigFile) -> Problems {
    let mut problems = learner_shape_problems(effective, world, settings, served);
    problems.0.extend(learner_load_problems(effective, world, settings, served).0);
    problems
}

/// The rules on a learner's run as configured: at most the ranks the instructor allows
/// (`settings.ranks`), and no larger in any measure than the largest learner config as the
/// instructor wrote it in `served`. A learner may still change anything within that (a smaller
/// model, another learning rate, fewer steps), as the chapters invite.
pub fn learner_shape_problems(effective: &TrainConfig, world: u32, settings: &LearnerRuns, served: &ConfigFile) -> Problems {
    let mut problems = Problems::default();
    if world > settings.ranks {
        problems.push(
            "dp",
            format!("a learner's run has at most {} ranks (the instructor's --learner-ranks); this one has {world}", settings.ranks),
        );
    }
    let most = Size::largest(settings.configs.iter().filter_map(|name| served.get(name).ok()).map(|config| Size::of(&config)));
    let size = Size::of(effective);
    // Where the instructor gave learners a share of memory, a step's batch is bounded by what
    // its activations need (`learner_load_problems`); otherwise by the learner configs' batch.
    let tokens_bound = if settings.memory_share_bytes.is_some() { u64::MAX } else { most.tokens_per_step };
    let bounds = [
        ("embed_dim", size.params, most.params, "parameters", "reduce embed_dim or depth"),
        ("global_batch_size", size.tokens_per_step, tokens_bound, "tokens a step", "reduce global_batch_size or img_size"),
        (
            "num_iters",
            size.samples,
            most.samples.saturating_mul(LEARNER_SAMPLES_FACTOR),
            "training samples",
            "reduce num_iters or global_batch_size",
        ),
        (
            "limit_nsamples",
            size.epochs,
            most.epochs.max(LEARNER_EPOCHS),
            "epochs (each validates, draws maps and saves a checkpoint)",
            "raise limit_nsamples or reduce num_iters",
        ),
        (
            "limit_nsamples_val",
            size.validation_samples,
            // Validating a sample costs less than training on it: as many as training may have.
            most.validation_samples.max(most.samples.saturating_mul(LEARNER_SAMPLES_FACTOR)),
            "validation samples over the run",
            "set limit_nsamples_val lower",
        ),
    ];
    for (field, value, bound, what, fix) in bounds {
        if value > bound {
            problems.push(field, format!("a learner's run has at most {bound} {what}; this one has {value}: {fix}"));
        }
    }
    if let Ok(Some(window)) = StepWindow::parse(&effective.profile)
        && window.steps().len() > MAX_LEARNER_PROFILE_STEPS
    {
        let steps = window.steps().len();
        problems.push(
            "profile",
            format!(
                "a learner's run profiles at most {MAX_LEARNER_PROFILE_STEPS} steps (every op of every step is recorded: \
                 a trace grows by megabytes a step); this one asks for {steps}, e.g. profile: 5:8"
            ),
        );
    }
    problems
}

/// Trace bytes the trainer writes per transformer block per profiled step on one rank: every
/// op of a block's forward, backward and optimizer update is an event. Measured: a learner's
/// `depth=64` run profiled for 8 steps wrote 278.8 MB (issue #49), 545 kB a block a step.
pub const TRACE_BYTES_PER_BLOCK_STEP: u64 = 545_000;

/// The rules that bound what a learner's run asks of the machine beyond its size: memory
/// (its ranks' weights, optimizer state and saved activations, from [`estimate::run_load`])
/// within the instructor's share, work a step and trace bytes no more than the largest
/// learner config's. A deep, narrow model passes the parameter bound and fails these.
pub fn learner_load_problems(effective: &TrainConfig, world: u32, settings: &LearnerRuns, served: &ConfigFile) -> Problems {
    let mut problems = Problems::default();
    let Ok(load) = estimate::run_load(effective, world) else {
        return problems; // the config's own rules name what is wrong with it
    };
    let largest = settings.configs.iter().filter_map(|name| served.get(name).ok());
    let (mut most, mut most_depth) = (RunLoad { memory_bytes: 0.0, flops_per_sample: 0.0, ops_per_step: 0.0 }, 0);
    for config in largest {
        let run = estimate::run_load(&config, 1).unwrap_or(most);
        most = RunLoad {
            flops_per_sample: most.flops_per_sample.max(run.flops_per_sample),
            ops_per_step: most.ops_per_step.max(run.ops_per_step),
            ..most
        };
        most_depth = most_depth.max(config.depth);
    }
    let memory = load.memory_bytes * f64::from(world);
    if let Some(share) = settings.memory_share_bytes
        && memory > share as f64
    {
        problems.push(
            "depth",
            format!(
                "a learner's run may use {} of memory, its share of this machine (the instructor's --learner-memory-share, \
                 by default the machine's memory over the learner runs it runs at once); \
                 this one needs {} for weights, Adam state and activations: reduce depth, embed_dim or global_batch_size",
                mib(share as f64),
                mib(memory)
            ),
        );
    }
    let work = [
        (load.flops_per_sample / 1e9, most.flops_per_sample / 1e9, "GFLOP a sample", "reduce depth, embed_dim or img_size"),
        (load.ops_per_step, most.ops_per_step, "ops a step (each a CPU's turn, however small)", "reduce depth"),
    ];
    for (value, bound, what, fix) in work {
        if value > bound {
            problems.push(
                "depth",
                format!(
                    "a learner's run may do at most {bound:.1} {what}, as the largest learner config's; this one does {value:.1}: {fix}"
                ),
            );
        }
    }
    // A window past the step bound is refused by it already (see `learner_size_problems`).
    if let Ok(Some(window)) = StepWindow::parse(&effective.profile)
        && window.steps().len() <= MAX_LEARNER_PROFILE_STEPS
    {
        let trace = |depth: usize, steps: usize, ranks: u32| {
            TRACE_BYTES_PER_BLOCK_STEP.saturating_mul((depth * steps) as u64).saturating_mul(u64::from(ranks))
        };
        let (bytes, bound) =
            (trace(effective.depth, window.steps().len(), world), trace(most_depth, MAX_LEARNER_PROFILE_STEPS, settings.ranks));
        if bytes > bound {
            problems.push(
                "profile",
                format!(
                    "a learner's profile may write at most {} of traces (the largest learner config's depth {most_depth}, \
                     {MAX_LEARNER_PROFILE_STEPS} steps, {} ranks); this one would write {}: profile fewer steps or reduce depth",
                    mib(bound as f64),
                    settings.ranks,
                    mib(bytes as f64)
                ),
            );
        }
    }
    problems
}

/// `bytes` in MiB, as a bound is said.
fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / f64::from(1u32 << 20))
}

/// Bytes one rank holds per parameter when training in fp32 with Adam: the weights, their
/// gradients and the two moments.
const TRAINING_BYTES_PER_PARAM: u64 = 16;

/// The bound every run on this server's machine keeps, whoever launches it: its `world` ranks'
/// weights, gradients and Adam state fit in the machine's `memory_bytes`. The page checks it
/// as the config is edited, the server when the launch arrives. A model too large is blamed on
/// the one of `embed_dim` and `depth` that `overrides` changed last (a learner who raised
/// `embed_dim` is told about `embed_dim`), else on `depth`.
pub fn machine_memory_problems(config: &TrainConfig, world: u32, memory_bytes: u64, overrides: &[String]) -> Problems {
    let mut problems = Problems::default();
    let params = ParamCount::of(config).total;
    let needed = params.saturating_mul(TRAINING_BYTES_PER_PARAM).saturating_mul(u64::from(world));
    if needed > memory_bytes {
        problems.push(
            size_key(overrides),
            format!(
                "a model of {params} parameters needs {} GiB for weights, gradients and Adam state on {world} rank(s); \
                 this machine has {} GiB: reduce depth or embed_dim",
                needed >> 30,
                memory_bytes >> 30
            ),
        );
    }
    problems
}

/// The key a model too large is blamed on (see [`machine_memory_problems`]).
fn size_key(overrides: &[String]) -> &'static str {
    let key = |o: &String| o.split_once('=').map(|(k, _)| k.trim().to_owned());
    overrides.iter().rev().filter_map(key).find_map(|k| ["embed_dim", "depth"].into_iter().find(|s| *s == k)).unwrap_or("depth")
}

/// How many times the largest learner config's training samples a learner's run may train on:
/// SC22's rule for a larger batch (half the steps at eight times the batch) trains on four times
/// the samples, and the large-batch chapter has learners run it; the instructor's time limit
/// still ends a run that outlasts it.
pub const LEARNER_SAMPLES_FACTOR: u64 = 4;

/// Epochs a learner's run may have even when no learner config has as many: a small model
/// trained longer, as the chapters invite, is many short epochs.
pub const LEARNER_EPOCHS: u64 = 64;

/// Steps a learner's run may profile: the tutorial's few steps past the warm-up, not hundreds.
pub const MAX_LEARNER_PROFILE_STEPS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SlurmRequest;

    fn served() -> ConfigFile {
        ConfigFile::parse(include_str!("../shipped/ViT.yaml")).unwrap()
    }

    #[test]
    fn a_learner_launches_learner_configs_on_this_machine_only() {
        let rules =
            LearnerRuns { per_learner: 2, configs: vec!["cpu_tiny".into()], time_limit_minutes: 30, ranks: 2, memory_share_bytes: None };
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
        let rules = LearnerRuns {
            per_learner: 1,
            configs: vec!["cpu_tiny".into(), "cpu_short".into()],
            time_limit_minutes: 30,
            ranks: 2,
            memory_share_bytes: None,
        };
        let fields = |config: &TrainConfig, world| -> Vec<String> {
            learner_size_problems(config, world, &rules, &file).0.into_iter().map(|p| p.field).collect()
        };
        let (tiny, short) = (file.get("cpu_tiny").unwrap(), file.get("cpu_short").unwrap());
        assert!(fields(&tiny, 1).is_empty() && fields(&short, 1).is_empty());
        assert!(fields(&short, 2).is_empty(), "two ranks, as the distributed chapters' layouts");
        assert_eq!(fields(&tiny, 3), ["dp"]);
        let message = learner_size_problems(&tiny, 4, &rules, &file).0[0].message.clone();
        assert_eq!(message, "a learner's run has at most 2 ranks (the instructor's --learner-ranks); this one has 4");
        // Within the bounds a learner may change anything: a smaller model trained longer.
        let mut changed = tiny.clone();
        changed.apply_overrides(&["num_iters=64", "lr=1.0e-3"]).unwrap();
        assert!(fields(&changed, 1).is_empty());
        let mut large = short.clone();
        // Past the samples bound: more than four times cpu_short's 1,024.
        large.apply_overrides(&["embed_dim=256", "global_batch_size=16", "num_iters=257"]).unwrap();
        assert_eq!(fields(&large, 1), ["embed_dim", "global_batch_size", "num_iters", "depth"], "each sample computes more too");
        let message = learner_size_problems(&large, 1, &rules, &file).0[0].message.clone();
        assert!(message.starts_with("a learner's run has at most"), "{message}");
        // As few samples as cpu_short, spread over 1024 epochs of one sample, each validating
        // the whole validation set: hours of validation, maps and checkpoints.
        let mut endless = short.clone();
        endless.apply_overrides(&["global_batch_size=1", "limit_nsamples=1", "num_iters=1024", "limit_nsamples_val=None"]).unwrap();
        assert_eq!(fields(&endless, 1), ["limit_nsamples", "limit_nsamples_val"]);
        let message = learner_size_problems(&endless, 1, &rules, &file).0[0].message.clone();
        assert!(message.contains("at most 64 epochs") && message.contains("this one has 1024"), "{message}");
        let mut profiled = short.clone();
        profiled.apply_overrides(&["profile=5:8"]).unwrap();
        assert!(fields(&profiled, 1).is_empty());
        profiled.apply_overrides(&["profile=1:129"]).unwrap();
        assert_eq!(fields(&profiled, 1), ["profile"]);
    }

    /// The learner rules of a room that gives each run `share` bytes.
    fn room(share: Option<u64>) -> LearnerRuns {
        let configs = vec!["cpu_tiny".into(), "cpu_short".into()];
        LearnerRuns { per_learner: 1, configs, time_limit_minutes: 30, ranks: 2, memory_share_bytes: share }
    }

    /// `name` of the shipped file with `overrides`, and the problems of its load on `world` ranks.
    fn load_problems(name: &str, overrides: &[&str], world: u32, rules: &LearnerRuns) -> Vec<(String, String)> {
        let file = served();
        let mut config = file.get(name).unwrap();
        config.apply_overrides(overrides).unwrap();
        learner_load_problems(&config, world, rules, &file).0.into_iter().map(|p| (p.field, p.message)).collect()
    }

    #[test]
    fn the_learner_configs_are_within_their_own_load() {
        let rules = room(Some(1 << 30));
        for (name, world) in [("cpu_tiny", 1), ("cpu_tiny", 2), ("cpu_short", 1), ("cpu_short", 2), ("cpu_mp", 2)] {
            assert_eq!(load_problems(name, &["profile=5:8"], world, &rules), [], "{name} on {world} rank(s)");
        }
    }

    #[test]
    fn a_deep_narrow_profiled_run_is_refused_for_its_work_and_trace() {
        // Fewer parameters than cpu_short, so the parameter bound lets it through.
        let deep = ["depth=64", "embed_dim=32", "profile=5:13"];
        let file = served();
        let mut config = file.get("cpu_short").unwrap();
        config.apply_overrides(&deep).unwrap();
        assert!(ParamCount::of(&config).total < ParamCount::of(&file.get("cpu_short").unwrap()).total);
        let problems = load_problems("cpu_short", &deep, 1, &room(None));
        let fields: Vec<&str> = problems.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(fields, ["depth", "depth", "profile"]);
        assert!(
            problems[0].1.starts_with("a learner's run may do at most") && problems[0].1.contains("GFLOP a sample"),
            "{}",
            problems[0].1
        );
        let trace = &problems[2].1;
        assert!(trace.contains("at most 33.3 MiB of traces") && trace.contains("depth 4, 8 steps, 2 ranks"), "{trace}");
        assert!(trace.contains("would write 266.1 MiB"), "{trace}");
    }

    /// The large-batch chapter's sweeps: the same samples in larger batches over fewer steps.
    #[test]
    fn a_larger_batch_over_fewer_steps_is_a_learners_run_where_memory_is_shared() {
        let file = served();
        let mut config = file.get("cpu_short").unwrap();
        config.apply_overrides(&["global_batch_size=64", "num_iters=16", "limit_nsamples=256", "limit_nsamples_val=64"]).unwrap();
        assert_eq!(learner_size_problems(&config, 1, &room(Some(2 << 30)), &file).0, []);
        // Without a share of memory to bound its activations, the batch is bounded by the
        // learner configs' own.
        let fields: Vec<String> = learner_size_problems(&config, 1, &room(None), &file).0.into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["global_batch_size"]);
        // With one, a batch whose activations do not fit is refused by the memory it needs.
        config.apply_overrides(&["global_batch_size=1024", "num_iters=1", "limit_nsamples=1024", "limit_nsamples_val=1024"]).unwrap();
        assert!(estimate::run_load(&config, 1).is_ok());
        let fields: Vec<String> = learner_size_problems(&config, 1, &room(Some(2 << 30)), &file).0.into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["depth"]);
    }

    #[test]
    fn a_run_thousands_of_blocks_deep_is_refused() {
        let problems = load_problems("cpu_tiny", &["depth=4096", "embed_dim=8", "num_heads=2"], 1, &room(Some(1 << 30)));
        let fields: Vec<&str> = problems.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(fields, ["depth"], "{problems:?}");
        assert!(problems[0].1.contains("ops a step (each a CPU's turn, however small)"), "{}", problems[0].1);
    }

    #[test]
    fn a_run_is_refused_past_the_memory_share_and_says_the_share() {
        let file = served();
        let short = file.get("cpu_short").unwrap();
        let needed = estimate::run_load(&short, 2).unwrap().memory_bytes * 2.0;
        assert_eq!(load_problems("cpu_short", &[], 2, &room(Some(needed.ceil() as u64))), []);
        let share = (needed * 0.9) as u64;
        let problems = load_problems("cpu_short", &[], 2, &room(Some(share)));
        assert_eq!(problems.len(), 1, "{problems:?}");
        let (field, message) = &problems[0];
        assert_eq!(field, "depth");
        let said = format!(
            "may use {} of memory, its share of this machine (the instructor's --learner-memory-share, by default",
            mib(share as f64)
        );
        assert!(message.contains(&said), "{message}");
    }
}
