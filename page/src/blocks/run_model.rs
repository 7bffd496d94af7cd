//! The run block's decisions, apart from its signals: the request it would send, whether the
//! Launch button may be pressed (and the one reason shown when not), a learner's rules checked
//! as the server checks them, and what a server's answer does to the block.

use scalebook_shared::config::{ConfigFile, LayoutRun, TrainConfig, zero_stage_problem};
use scalebook_shared::protocol::{ExecutorSpec, LaunchRequest, LearnerRuns, RunId, SlurmRequest};
use scalebook_shared::{Problem, Problems, launch};

use crate::requests::Answer;

/// A request waiting for the server: a launch, or a preview of the script for this request.
#[derive(Debug, Clone, PartialEq)]
pub enum Waiting {
    Launch(u64),
    Preview(u64, LaunchRequest),
}

/// What a server's answer to the waiting request does to the block.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The run was launched: open it.
    Open(RunId),
    /// The script a Slurm launch of `request` would submit.
    Script(LaunchRequest, String),
    /// Refused, with the message and the problems each naming its field.
    Refused(String, Problems),
    /// A script for a request that was not a preview: nothing to show.
    Nothing,
}

/// What `answer` to `waiting` does.
pub fn settle(waiting: Waiting, answer: Answer) -> Settled {
    match (answer, waiting) {
        (Answer::Launched(id), _) => Settled::Open(id),
        (Answer::Script(script), Waiting::Preview(_, request)) => Settled::Script(request, script),
        (Answer::Refused(report), _) => Settled::Refused(report.message, report.problems),
        (Answer::Script(_), Waiting::Launch(_)) => Settled::Nothing,
    }
}

/// The config as it will run: `name` from `file` with the working `overrides`.
pub fn effective(file: &ConfigFile, name: &str, overrides: &[String]) -> Option<TrainConfig> {
    let mut config = file.get(name).ok()?;
    config.apply_overrides(overrides).ok()?;
    Some(config)
}

/// The launch request: on this machine, or as a batch job on the Slurm cluster of `slurm`.
pub fn request(config: String, overrides: Vec<String>, dp: u32, slurm: Option<SlurmRequest>) -> LaunchRequest {
    let executor = match slurm {
        Some(slurm) => ExecutorSpec::Slurm(Box::new(slurm)),
        None => ExecutorSpec::Local,
    };
    LaunchRequest { config, overrides, dp, executor, seed: None }
}

/// The launch of a layout explored in an estimate or a rank grid: `config` run as `layout`
/// (its sizes, order, ZeRO stage, micro-batches and schedule as overrides), with its dp as the
/// run's replicas, here or as a batch job (`slurm`). A ZeRO stage with nothing to shard over
/// (dp 1) is refused at once by the config's own rule; the rest of a layout's rules need the
/// config, which the estimate beside it and the server both check.
pub fn layout_request(config: String, layout: &LayoutRun, slurm: Option<SlurmRequest>) -> Result<LaunchRequest, Problem> {
    if let Some(rule) = zero_stage_problem(layout.zero as usize, Some(layout.sizes.dp as usize)) {
        return Err(Problem::new("zero_stage", rule));
    }
    Ok(request(config, layout.overrides(), layout.sizes.dp, slurm))
}

/// A learner's rules for `request`, as the server will check them (`shared::launch`), each
/// naming the field that broke it. The size rules need the effective config and the file;
/// without them only the request's own rules are checked.
pub fn learner_problems(allowed: &LearnerRuns, request: &LaunchRequest, sized: Option<(&TrainConfig, &ConfigFile)>) -> Problems {
    let mut problems = launch::learner_problems(allowed, request);
    if let Some((config, file)) = sized {
        let world = u32::try_from(config.world(request.dp as usize)).unwrap_or(u32::MAX);
        problems.0.extend(launch::learner_size_problems(config, world, allowed, file).0);
    }
    problems
}

/// What the Launch button waits for, in the order a user can fix it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    /// A learner's page: their runs, whether their rules pass, and how many runs they use.
    pub learner: Option<(LearnerRuns, bool, usize)>,
    pub config_problems: usize,
    pub slurm_ok: bool,
    pub connected: bool,
    pub waiting: bool,
}

impl Gate {
    /// Why the block may not launch now, or `None` when it may.
    pub fn blocked(&self) -> Option<String> {
        if let Some((allowed, rules_pass, in_use)) = &self.learner {
            if !rules_pass {
                return Some("a learner may not launch this: see below".to_owned());
            }
            if *in_use >= allowed.per_learner as usize {
                return Some(format!("you are using all {} of your runs: wait for one to end, or cancel one", allowed.per_learner));
            }
        }
        if self.config_problems > 0 {
            Some("fix the config's problems first".to_owned())
        } else if !self.slurm_ok {
            Some("fix the job settings first".to_owned())
        } else if !self.connected {
            Some("waiting for the server connection".to_owned())
        } else {
            self.waiting.then(|| "waiting for the server…".to_owned())
        }
    }
}

/// The line under the block saying what runs: the file's config, or it with the changes.
pub fn changes_line(overrides: &[String]) -> String {
    if overrides.is_empty() {
        "Runs the config as the file defines it.".to_owned()
    } else {
        format!("With your changes: {}", overrides.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;
    use scalebook_shared::protocol::{ErrorCode, ErrorReport};

    use super::*;

    const CONFIGS: &str = include_str!("../../shipped/ViT.yaml");

    fn file() -> ConfigFile {
        ConfigFile::parse(CONFIGS).unwrap()
    }

    fn learner(per_learner: u32) -> LearnerRuns {
        LearnerRuns { per_learner, configs: vec!["cpu_tiny".into()], time_limit_minutes: 30, ranks: 2, memory_share_bytes: None }
    }

    fn open_gate() -> Gate {
        Gate { learner: None, config_problems: 0, slurm_ok: true, connected: true, waiting: false }
    }

    #[test]
    fn the_gate_names_the_first_thing_to_fix() {
        assert_eq!(open_gate().blocked(), None);
        let all_wrong =
            Gate { learner: Some((learner(1), false, 1)), config_problems: 2, slurm_ok: false, connected: false, waiting: true };
        assert_eq!(all_wrong.blocked().as_deref(), Some("a learner may not launch this: see below"));
        let used_up = Gate { learner: Some((learner(2), true, 2)), ..open_gate() };
        assert_eq!(used_up.blocked().as_deref(), Some("you are using all 2 of your runs: wait for one to end, or cancel one"));
        assert_eq!(Gate { learner: Some((learner(2), true, 1)), ..open_gate() }.blocked(), None);
        assert_eq!(
            Gate { config_problems: 1, slurm_ok: false, ..open_gate() }.blocked().as_deref(),
            Some("fix the config's problems first")
        );
        assert_eq!(Gate { slurm_ok: false, connected: false, ..open_gate() }.blocked().as_deref(), Some("fix the job settings first"));
        assert_eq!(Gate { connected: false, waiting: true, ..open_gate() }.blocked().as_deref(), Some("waiting for the server connection"));
        assert_eq!(Gate { waiting: true, ..open_gate() }.blocked().as_deref(), Some("waiting for the server…"));
    }

    #[test]
    fn answers_open_the_run_show_the_script_or_the_refusal() {
        let request = request("cpu_tiny".into(), vec![], 1, None);
        let id = RunId::parse("20261125-101010-cpu_tiny").unwrap();
        assert_eq!(settle(Waiting::Launch(1), Answer::Launched(id.clone())), Settled::Open(id));
        assert_eq!(
            settle(Waiting::Preview(2, request.clone()), Answer::Script("#!/bin/bash".into())),
            Settled::Script(request, "#!/bin/bash".into())
        );
        assert_eq!(settle(Waiting::Launch(3), Answer::Script("#!/bin/bash".into())), Settled::Nothing);
        let report = ErrorReport::new(ErrorCode::BadRequest, "no");
        assert_eq!(settle(Waiting::Launch(4), Answer::Refused(report)), Settled::Refused("no".into(), Problems::default()));
    }

    #[test]
    fn a_learner_is_told_each_rule_beside_its_field() {
        let file = file();
        let config = effective(&file, "cpu_tiny", &["embed_dim=100000".into()]).unwrap();
        let asked = request("cpu_tiny".into(), vec!["embed_dim=100000".into()], 1, None);
        let problems = learner_problems(&learner(1), &asked, Some((&config, &file)));
        assert!(problems.0.iter().any(|p| p.field == "embed_dim"), "{problems:?}");
        let plain = request("cpu_tiny".into(), vec![], 1, None);
        let config = effective(&file, "cpu_tiny", &[]).unwrap();
        assert!(learner_problems(&learner(1), &plain, Some((&config, &file))).is_empty());
        let other = request("base".into(), vec![], 1, None);
        assert!(learner_problems(&learner(1), &other, None).0.iter().any(|p| p.field == "config"));
    }

    #[test]
    fn the_request_goes_where_it_is_sent_and_says_what_changed() {
        assert_eq!(request("a".into(), vec![], 2, None).executor, ExecutorSpec::Local);
        let slurm = SlurmRequest { cluster: "perlmutter".into(), ..SlurmRequest::default() };
        assert!(matches!(request("a".into(), vec![], 2, Some(slurm)).executor, ExecutorSpec::Slurm(s) if s.cluster == "perlmutter"));
        assert_eq!(changes_line(&[]), "Runs the config as the file defines it.");
        assert_eq!(changes_line(&["lr=0.1".into(), "dp=2".into()]), "With your changes: lr=0.1, dp=2");
        assert_eq!(effective(&file(), "nope", &[]), None);
    }

    #[test]
    fn a_layout_runs_as_its_sizes_order_and_stages() {
        let sizes = Sizes { tp: 2, cp: 1, dp: 2, pp: 1 };
        let asked = layout_request("cpu_mp".into(), &LayoutRun::new(sizes, "tp-cp-dp"), None).unwrap();
        assert_eq!(asked.overrides, ["tensor_parallel=2", "context_parallel=1", "parallel_order=tp-cp-dp"]);
        assert_eq!((asked.dp, &asked.executor, asked.config.as_str()), (2, &ExecutorSpec::Local, "cpu_mp"));
        let slurm = SlurmRequest { cluster: "perlmutter".into(), gpu: Some("a100-40gb".into()), ..SlurmRequest::default() };
        let asked = layout_request("mp".into(), &LayoutRun::new(sizes, "tp-cp-dp"), Some(slurm.clone())).unwrap();
        assert_eq!(asked.executor, ExecutorSpec::Slurm(Box::new(slurm)));
        let piped = LayoutRun { micro_batches: 4, ..LayoutRun::new(Sizes { pp: 2, ..sizes }, "tp-cp-dp-pp") };
        let asked = layout_request("cpu_mp".into(), &piped, None).unwrap();
        assert_eq!(asked.overrides[3..], ["pipeline_parallel=2", "num_micro_batches=4", "pipeline_schedule=1f1b"]);
    }

    #[test]
    fn a_zero_layout_runs_with_its_stage_over_its_dp_ranks() {
        let sizes = Sizes { tp: 2, cp: 1, dp: 2, pp: 1 };
        let zero = |stage: u32, dp: u32| LayoutRun { zero: stage, ..LayoutRun::new(Sizes { dp, ..sizes }, "tp-cp-dp") };
        let asked = layout_request("cpu_mp".into(), &zero(3, 2), None).unwrap();
        assert_eq!(asked.overrides, ["tensor_parallel=2", "context_parallel=1", "parallel_order=tp-cp-dp", "zero_stage=3"]);
        assert_eq!(asked.dp, 2);
        // One replica has nothing to shard: refused by the config's rule, against its field.
        let refused = layout_request("cpu_mp".into(), &zero(1, 1), None).unwrap_err();
        assert_eq!(refused.field, "zero_stage");
        assert!(refused.message.contains("shards over dp, which is 1 here"), "{refused}");
        assert_eq!(layout_request("cpu_mp".into(), &zero(4, 2), None).unwrap_err().field, "zero_stage");
    }
}
