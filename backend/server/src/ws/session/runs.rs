//! A session's run messages: the list, launches (the instructor's, and a learner's when the
//! instructor allows them), Slurm previews, cancels and resumes of one's own runs, and the
//! subscriptions to a run's points.

use std::time::Instant;

use scalebook_shared::Problems;
use scalebook_shared::protocol::{ErrorCode, ErrorReport, ExecutorSpec, LaunchRequest, RunId, ServerMessage};

use super::reply::report;
use super::{Answer, Session};
use crate::learners::{self, LearnerLaunch};
use crate::plan::{self, LaunchPlan, Launcher, Policy};
use crate::refusal::internal_error;
use crate::ws::feeds::{forward, run_list, shown_to};

impl Session {
    /// The first page of the runs this connection sees (or the page before `before`).
    pub(super) async fn list_runs(&self, before: Option<RunId>) -> Answer {
        let mine = self.learner.as_ref().map(|identity| &identity.learner);
        Ok(Some(run_list(&self.state.runs, self.role, mine, before).await))
    }

    pub(super) async fn launch(&self, request: LaunchRequest) -> Answer {
        let launcher = self.launcher()?;
        if matches!(launcher, Launcher::Learner(_)) && !self.state.launch_rates.allow(self.peer, Instant::now()) {
            return Err(ErrorReport::new(ErrorCode::RateLimited, learners::launch_rate_refusal()));
        }
        let plan = self.plan(request, launcher).await?;
        let record = self.state.runs.launch(plan).await.map_err(|e| report(&e, None))?;
        Ok(Some(ServerMessage::Launched { run: record.id }))
    }

    pub(super) async fn preview_slurm(&self, request: LaunchRequest) -> Answer {
        if !matches!(request.executor, ExecutorSpec::Slurm(_)) {
            let mut problems = Problems::default();
            problems.push("executor", "only a Slurm launch has a batch script: choose a slurm cluster");
            return Err(ErrorReport::new(ErrorCode::InvalidLaunch, "nothing to preview").with_problems(problems));
        }
        let plan = self.plan(request, Launcher::Instructor).await?;
        let script = self.state.runs.preview_script(&plan).map_err(|e| report(&e, None))?;
        Ok(Some(ServerMessage::SlurmScript { script }))
    }

    pub(super) async fn cancel(&self, run: RunId) -> Answer {
        if let Some(refusal) = self.not_theirs(&run).await {
            return Err(refusal);
        }
        self.state.runs.cancel(&run).await.map_err(|e| report(&e, Some(&run)))?;
        Ok(None)
    }

    pub(super) async fn resume(&self, run: RunId) -> Answer {
        if let Some(refusal) = self.not_theirs(&run).await {
            return Err(refusal);
        }
        let quota = match self.launcher()? {
            Launcher::Learner(launch) => Some(launch),
            Launcher::Instructor => None,
        };
        self.state.runs.resume(&run, quota.as_ref()).await.map_err(|e| report(&e, Some(&run)))?;
        Ok(None)
    }

    /// Follows `run` from the points after `after_seq` and the log lines after
    /// `after_log_seq`, in place of an earlier subscription to it.
    pub(super) async fn subscribe(&mut self, run: RunId, after_seq: Option<u64>, after_log_seq: Option<u64>) -> Answer {
        let runs = &self.state.runs;
        if !runs.record(&run).await.is_none_or(|record| shown_to(self.role, &record)) {
            return Err(ErrorReport::new(ErrorCode::UnknownRun, format!("no run {run}")).with_run(run));
        }
        let subscription = runs.subscribe(&run, after_seq, after_log_seq).await.map_err(|e| report(&e, Some(&run)))?;
        let task = tokio::spawn(forward(runs.clone(), run.clone(), subscription, self.out.clone()));
        if let Some(previous) = self.subscriptions.insert(run, task.abort_handle()) {
            previous.abort();
        }
        Ok(None)
    }

    pub(super) fn unsubscribe(&mut self, run: &RunId) -> Answer {
        if let Some(task) = self.subscriptions.remove(run) {
            task.abort();
        }
        Ok(None)
    }

    /// Who launches from this connection: the instructor, or a viewer's learner when the
    /// instructor lets learners launch (whose rules `plan` then checks).
    fn launcher(&self) -> Result<Launcher, ErrorReport> {
        if self.role.may_launch() {
            return Ok(Launcher::Instructor);
        }
        let identity = self.launching_learner().ok_or_else(|| {
            ErrorReport::new(
                ErrorCode::Forbidden,
                "this page has no learner identity: many new learners joined just now; reload the page in a minute",
            )
        })?;
        let per_learner = self.state.limits.learners.per_learner;
        Ok(Launcher::Learner(LearnerLaunch { learner: identity.learner.clone(), per_learner }))
    }

    /// The refusal of a viewer's cancel of a run that is not their own (the instructor's, or
    /// another learner's). A run that does not exist is left to the cancel to report.
    async fn not_theirs(&self, run: &RunId) -> Option<ErrorReport> {
        if self.role.may_launch() {
            return None;
        }
        let owner = self.state.runs.record(run).await?.learner;
        let mine = self.learner.as_ref().map(|identity| &identity.learner);
        let whose = match owner {
            Some(owner) if Some(&owner) == mine => return None,
            Some(_) => "another learner's",
            None => "the instructor's",
        };
        let message = format!("run {run} is {whose}: a learner may cancel only their own runs");
        Some(ErrorReport::new(ErrorCode::Forbidden, message).with_run(run.clone()))
    }

    /// Validates a launch against the served configs, clusters and limits, on a blocking
    /// thread: it looks at the data paths on disk (a shared filesystem may be slow), and the
    /// async workers stay free for every other connection meanwhile.
    async fn plan(&self, request: LaunchRequest, launcher: Launcher) -> Result<LaunchPlan, ErrorReport> {
        let state = self.state.clone();
        let planned = tokio::task::spawn_blocking(move || {
            let policy = Policy { configs: &state.configs.file, clusters: state.clusters.clusters.as_ref(), limits: &state.limits };
            plan::plan(&policy, request, launcher)
        })
        .await
        .map_err(|e| ErrorReport::new(ErrorCode::Internal, internal_error(&format!("the launch could not be checked: {e}"))))?;
        planned.map_err(|e| ErrorReport::new(ErrorCode::InvalidLaunch, format!("the launch was refused: {e}")).with_problems(e.problems()))
    }
}
