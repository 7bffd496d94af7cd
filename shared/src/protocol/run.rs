//! Runs as the server records them (`runs/<id>/run.json`) and the browser lists them: the id,
//! what was launched, where, and every state it went through.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Learner, SlurmRequest, SlurmStatus};
use crate::layout::Layout;
use crate::{Error, Problems};

/// The longest run id the server accepts; generated ids are about 20 characters.
pub const MAX_RUN_ID_LEN: usize = 64;

/// A run's name and the name of its directory under the runs directory.
///
/// The server generates ids; one read from the wire or a URL is checked here, before it can
/// become part of a path: only ASCII letters, digits, `-` and `_`, starting with a letter or a
/// digit, so `..`, `/`, `%2F` or an absolute path can never name a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    pub fn parse(text: &str) -> Result<RunId, Error> {
        let starts_well = text.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        let chars_ok = text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if starts_well && chars_ok && text.len() <= MAX_RUN_ID_LEN {
            return Ok(RunId(text.to_owned()));
        }
        let mut problems = Problems::default();
        problems.push(
            "run",
            format!(
                "`{}` is not a run id: at most {MAX_RUN_ID_LEN} ASCII letters, digits, `-` or `_`, starting with a letter or digit",
                text.escape_debug()
            ),
        );
        Err(Error::Invalid(problems))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = Error;
    fn try_from(text: String) -> Result<Self, Error> {
        RunId::parse(&text)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a run's state stands. The last six are final; each final state but `completed` comes
/// with a reason (the trainer's last error line, the signal, the scheduler's verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for a free slot (local) or in the scheduler's queue (Slurm `PENDING`).
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
    OutOfMemory,
    /// The job exceeded its time limit.
    Timeout,
    /// A node of the job failed.
    NodeFailure,
    /// The run's process or job vanished without leaving an exit status.
    Lost,
}

impl RunState {
    pub const ALL: [RunState; 9] = [
        RunState::Queued,
        RunState::Running,
        RunState::Completed,
        RunState::Failed,
        RunState::Cancelled,
        RunState::OutOfMemory,
        RunState::Timeout,
        RunState::NodeFailure,
        RunState::Lost,
    ];

    /// Whether the run can still change (and so needs watching after a server restart).
    pub fn is_final(self) -> bool {
        !matches!(self, RunState::Queued | RunState::Running)
    }

    /// What a person reads: `out of memory`, `node failure`, ...
    pub fn label(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::OutOfMemory => "out of memory",
            RunState::Timeout => "timeout",
            RunState::NodeFailure => "node failure",
            RunState::Lost => "lost",
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One entry of a run's state history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateChange {
    pub state: RunState,
    /// Seconds since the Unix epoch.
    pub at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a run executes, as the browser chooses it. Internally tagged: `{"kind": "local"}`,
/// `{"kind": "slurm", "cluster": "perlmutter", "nodes": 2}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutorSpec {
    /// Trainer processes on the server's machine.
    #[default]
    Local,
    /// A batch job on a Slurm cluster of `clusters.yaml` (boxed: every run record carries
    /// an executor, most of them local).
    Slurm(Box<SlurmRequest>),
}

/// How the server finds a started run again after a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunHandle {
    /// The run's process group leader. `start_ticks` (its start time, from the kernel) tells
    /// it apart from an unrelated process that got the same pid after a reboot or wrap-around.
    Local { pgid: u32, start_ticks: u64 },
    /// A submitted batch job: its id, and the Slurm cluster `sbatch --parsable` named when
    /// the site runs several (queries then go to that cluster).
    Slurm {
        job_id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slurm_cluster: Option<String>,
    },
    /// A run read from a TensorBoard logdir (`scalebook tb import`, `serve --watch-logdir`):
    /// the logdir, and the run's directory in it as TensorBoard names runs (`.` for the logdir
    /// itself). Its points are copied from the event files there; nothing of it runs here.
    Logdir { logdir: String, run: String },
    /// A run of the class this server follows: the instructor's run `upstream`, at the class
    /// listener `address`. Its points and log lines are copied here as they arrive; it trains
    /// on the instructor's side, never here, and only the instructor can stop it.
    Class { address: String, upstream: RunId },
    /// A learner's run that a follower of this server's class shares, charted by the
    /// instructor: run `upstream` of the follower named `follower`. Its points are copied here
    /// as they arrive; it trains on the learner's side, and only they can stop it.
    Shared { follower: String, upstream: RunId },
}

/// What the browser asks to run. Only typed, validated fields: the server checks every one
/// against the served config file (`shared` validation again, never trusting the browser).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchRequest {
    /// A config name from the served file.
    pub config: String,
    /// `key=value` overrides, applied in order.
    #[serde(default)]
    pub overrides: Vec<String>,
    /// Data-parallel replicas (default 1): the one size of the layout the config does not
    /// fix. Everything else (tp, cp, the order, batch sizes, epochs) follows from the config
    /// through `shared`, in the browser, the server and the trainer alike.
    #[serde(default = "one")]
    pub dp: u32,
    #[serde(default)]
    pub executor: ExecutorSpec,
    #[serde(default)]
    pub seed: Option<u64>,
}

fn one() -> u32 {
    1
}

/// Everything known about one run; `run.json` on disk and `run_update` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    /// The config name the run started from.
    pub config: String,
    pub overrides: Vec<String>,
    /// The config after the overrides, key by key. Kept as plain JSON so records written by
    /// an older version still load when the config gains or loses a key.
    pub effective: Map<String, Value>,
    pub layout: Layout,
    pub executor: ExecutorSpec,
    #[serde(default)]
    pub seed: Option<u64>,
    /// Every state the run went through, oldest first; never empty.
    pub history: Vec<StateChange>,
    pub created_at: f64,
    #[serde(default)]
    pub started_at: Option<f64>,
    #[serde(default)]
    pub ended_at: Option<f64>,
    #[serde(default)]
    pub handle: Option<RunHandle>,
    /// Set before the run is signalled, so a run that dies from the signal is `cancelled`
    /// even when the server that sent it has been restarted since.
    #[serde(default)]
    pub cancel_requested: bool,
    /// The learner who launched it; `None` for the instructor's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learner: Option<Learner>,
    /// The device the launch fixed (a learner's run: the CPU); `None`: the trainer's choice
    /// (a GPU when it has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<TrainDevice>,
    /// How long the run may train before its supervisor stops it, in seconds: a learner's
    /// run's limit (the server's `--learner-time-limit`), decided with the run's plan and kept
    /// with it, so it holds across server restarts; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<u64>,
    /// What Slurm last said about the run's job beyond its state (a Slurm run's only; boxed:
    /// most runs have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<Box<SlurmStatus>>,
    /// Whether its directory held a checkpoint to go on from when it last ended (the server
    /// looks as it records the end): a run without one cannot be resumed, so none is offered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checkpoint: bool,
}

/// A device the server may fix for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainDevice {
    /// The CPU: a learner's run leaves the machine's GPUs to the instructor.
    Cpu,
}

impl TrainDevice {
    /// The trainer's `--device` value.
    pub fn flag(self) -> &'static str {
        match self {
            TrainDevice::Cpu => "cpu",
        }
    }
}

impl RunRecord {
    /// The record of run `id` of `config` (as the file defines it) on `layout` and `executor`,
    /// created at `at` in `state`, with nothing else known yet: what every maker of records
    /// starts from, setting what it knows on top (`RunRecord { seed, ..RunRecord::new(…) }`).
    pub fn new(id: RunId, config: String, layout: Layout, executor: ExecutorSpec, at: f64, state: RunState) -> RunRecord {
        RunRecord {
            id,
            config,
            overrides: Vec::new(),
            effective: Map::new(),
            layout,
            executor,
            seed: None,
            history: vec![StateChange { state, at, reason: None }],
            created_at: at,
            started_at: None,
            ended_at: None,
            handle: None,
            cancel_requested: false,
            learner: None,
            device: None,
            time_limit_s: None,
            slurm: None,
            checkpoint: false,
        }
    }

    /// A local `cpu_tiny` run `id` (which must be a run id) on one rank, created at `at` in
    /// `state` and launched by `learner` (`None`: the instructor): the run the tests of every
    /// crate list, page and count.
    #[cfg(any(test, feature = "testing"))]
    pub fn sample(id: &str, at: f64, learner: Option<Learner>, state: RunState) -> RunRecord {
        let layout = Layout::new(crate::layout::Sizes::default(), "tp-cp-dp").expect("one rank lays out");
        let id = RunId::parse(id).expect("a run id");
        RunRecord { learner, ..RunRecord::new(id, "cpu_tiny".into(), layout, ExecutorSpec::Local, at, state) }
    }

    /// The state now (`lost` for a record whose history was emptied by hand).
    pub fn state(&self) -> RunState {
        self.history.last().map_or(RunState::Lost, |change| change.state)
    }

    /// Whether it may go on from its last checkpoint: it ended before its last step and left
    /// a checkpoint (the server refuses any other resume).
    pub fn resumable(&self) -> bool {
        let state = self.state();
        state.is_final() && state != RunState::Completed && self.checkpoint
    }

    /// The reason given with the current state.
    pub fn reason(&self) -> Option<&str> {
        self.history.last().and_then(|change| change.reason.as_deref())
    }

    /// Moves to `state` at time `at`, keeping the timestamps in step.
    pub fn transition(&mut self, state: RunState, at: f64, reason: Option<String>) {
        match state {
            RunState::Running => self.started_at = Some(at),
            s if s.is_final() => self.ended_at = Some(at),
            _ => {}
        }
        self.history.push(StateChange { state, at, reason });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_that_could_leave_the_runs_directory_are_refused() {
        for good in ["20250101-120000-1", "a", "run_7"] {
            assert_eq!(RunId::parse(good).unwrap().as_str(), good);
        }
        let too_long = "a".repeat(MAX_RUN_ID_LEN + 1);
        for bad in ["", "..", "../x", "a/b", "/etc", "-rf", ".hidden", "a%2Fb", "a b", "é", too_long.as_str()] {
            let err = RunId::parse(bad).unwrap_err();
            assert_eq!(err.problems().0[0].field, "run", "{bad}");
        }
        // The same check guards ids read from the wire.
        let err = serde_json::from_str::<RunId>(r#""../x""#).unwrap_err();
        assert!(err.to_string().contains("is not a run id"), "{err}");
    }

    #[test]
    fn states_use_snake_case_names_and_only_queued_and_running_are_live() {
        let names: Vec<String> = RunState::ALL.iter().map(|s| serde_json::to_string(s).unwrap()).collect();
        assert_eq!(
            names,
            [
                "\"queued\"",
                "\"running\"",
                "\"completed\"",
                "\"failed\"",
                "\"cancelled\"",
                "\"out_of_memory\"",
                "\"timeout\"",
                "\"node_failure\"",
                "\"lost\""
            ]
        );
        let live: Vec<_> = RunState::ALL.into_iter().filter(|s| !s.is_final()).collect();
        assert_eq!(live, [RunState::Queued, RunState::Running]);
    }

    #[test]
    fn a_launch_request_needs_only_a_config_name_and_rejects_unknown_fields() {
        let req: LaunchRequest = serde_json::from_str(r#"{"config": "cpu_tiny"}"#).unwrap();
        assert_eq!(req.executor, ExecutorSpec::Local);
        assert!(req.overrides.is_empty() && req.dp == 1 && req.seed.is_none());
        let err = serde_json::from_str::<LaunchRequest>(r#"{"config": "cpu_tiny", "command": "rm -rf /"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `command`"), "{err}");
        let err = serde_json::from_str::<ExecutorSpec>(r#"{"kind": "ssh"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `ssh`"), "{err}");
    }

    #[test]
    fn handles_say_how_to_find_a_run_again() {
        let local = serde_json::to_value(RunHandle::Local { pgid: 42, start_ticks: 7 }).unwrap();
        assert_eq!(local, serde_json::json!({"kind": "local", "pgid": 42, "start_ticks": 7}));
        let slurm = serde_json::to_value(RunHandle::Slurm { job_id: 4242, slurm_cluster: None }).unwrap();
        assert_eq!(slurm, serde_json::json!({"kind": "slurm", "job_id": 4242}));
        let back: RunHandle = serde_json::from_str(r#"{"kind": "slurm", "job_id": 9, "slurm_cluster": "pm"}"#).unwrap();
        assert_eq!(back, RunHandle::Slurm { job_id: 9, slurm_cluster: Some("pm".into()) });
    }

    #[test]
    fn transitions_append_to_the_history_and_stamp_start_and_end() {
        let layout = Layout::new(Default::default(), "tp-cp-dp").unwrap();
        let mut record = RunRecord::new(RunId::parse("r1").unwrap(), "cpu_tiny".into(), layout, ExecutorSpec::Local, 1.0, RunState::Queued);
        assert_eq!((record.state(), record.created_at, record.started_at), (RunState::Queued, 1.0, None));
        record.transition(RunState::Running, 2.0, None);
        record.transition(RunState::OutOfMemory, 3.0, Some("CUDA out of memory".into()));
        assert_eq!((record.started_at, record.ended_at), (Some(2.0), Some(3.0)));
        assert_eq!(record.state(), RunState::OutOfMemory);
        assert_eq!(record.reason(), Some("CUDA out of memory"));
        let back: RunRecord = serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn only_a_run_that_ended_early_with_a_checkpoint_is_resumable() {
        let ended = |state: RunState, checkpoint: bool| {
            let mut record = RunRecord::sample("r1", 1.0, None, RunState::Running);
            record.transition(state, 2.0, None);
            RunRecord { checkpoint, ..record }
        };
        assert!(ended(RunState::Cancelled, true).resumable());
        assert!(ended(RunState::Failed, true).resumable());
        // Cancelled before its first epoch ended: nothing to go on from.
        assert!(!ended(RunState::Cancelled, false).resumable());
        assert!(!ended(RunState::Completed, true).resumable());
        assert!(!ended(RunState::Running, true).resumable(), "it has not ended");
        // Written only when there is one, read as none from records written before.
        let text = serde_json::to_string(&ended(RunState::Cancelled, false)).unwrap();
        assert!(!text.contains("checkpoint"), "{text}");
        let back: RunRecord = serde_json::from_str(&serde_json::to_string(&ended(RunState::Failed, true)).unwrap()).unwrap();
        assert!(back.checkpoint);
    }
}
