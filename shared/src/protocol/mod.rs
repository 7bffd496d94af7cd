//! The WebSocket protocol between the browser and the server: every message either side may
//! send, as JSON objects tagged by `type` (`{"type": "subscribe", "run": "...", "after_seq": 41}`).
//!
//! Sequence numbers: a run's metric points are numbered by their line in `metrics.jsonl` and
//! its log lines by their line in `job.log` (both from 1). Being derived from the files, they
//! survive a server restart, so a browser that reconnects with the last numbers it saw gets
//! exactly what it missed, from any server that reads the same run directory.

mod class;
mod classroom;
mod learner;
mod role;
mod run;
pub mod run_list;
mod slurm;

pub use crate::metrics::{Bucket, Series, bucketize, series};
pub use class::{
    CLASS_LINK_SCHEME, ClassAddress, ClassLink, ClassState, FINGERPRINT_LEN, FOLLOWER_TOKEN_LEN, Follower, FollowerId, FollowerIdentity,
    INVITATION_SEPARATOR, Introduction, MAX_FOLLOWER_NAME_LEN, MAX_INVITATION_NAME_LEN, MAX_ROSTER_RUN_BYTES, MAX_SHARED_POINTS,
    MAX_SOCKET_PATH_LEN, MAX_SUMMARISED_RUNS, RunSummary, follower_name_ok, invitation_name_ok, shared_copy_id, socket_path_ok,
};
pub use classroom::{Audience, ChartView, MAX_BLOCK_INDEX, MAX_ELEMENT_INDEX, MAX_PRESENTED_RUNS, MAX_SLUG_LEN, Presentation};
pub use learner::{HexName, LEARNER_KEY_LEN, LEARNER_LEN, Learner, LearnerIdentity, LearnerKey, LearnerRuns};
pub use role::{Role, Secret, TOKEN_HEADER};
pub use run::{ExecutorSpec, LaunchRequest, MAX_RUN_ID_LEN, RunHandle, RunId, RunRecord, RunState, StateChange, TrainDevice};
pub use slurm::{MAX_FIELD_LEN, SlurmJob, SlurmRequest, SlurmStatus};

use serde::{Deserialize, Serialize};

use crate::Problems;
use crate::metrics::MetricPoint;

/// Bumped whenever a message changes incompatibly; `hello` and `welcome` carry it.
/// Version 2: requests carry an optional `id`, echoed by their direct answers.
/// Version 3: `welcome` tells the page its [`Role`]; a viewer's launch, cancel or preview is
/// refused with `forbidden`.
/// Version 4: the classroom: `present`, `stop_presenting` and `follow` from the page,
/// `presenting` and `audience` from the server; `hello` may carry a learner key, `welcome`
/// the learner runs allowed and the viewer's learner identity; runs record their learner;
/// error code `quota_exceeded`.
/// Version 5: the class of many servers: `hello` may carry the token (a socket opened without
/// one must send it first), role `follower`; `introduce`, `new_class_link`, `remove_follower`,
/// `join_class` and `leave_class` from a client, `roster`, `class_link` and `class` from the
/// server; `presenter` (whether the presenting page is connected); error code `unauthorized`;
/// a learner's shared run charted by the instructor: `chart_shared_run` and `shared_points`
/// from a client, `share_run` from the class listener, run handle `shared`.
/// Version 6: Slurm's word on a job in the run record (`slurm`: place in the queue, expected
/// start, nodes, time and resources held), `slurm_at` in the heartbeat, `resume` from a
/// client, error code `not_resumable`.
/// Version 7: NaN and infinite values as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`
/// (never `null`), a bucket's `non_finite` count; a learner's run's time limit in
/// `learner_runs`; a connection's learner identity fixed by its first `hello`.
/// Version 8: the run list in pages: `list_runs` may carry `before`, and `runs` says how many
/// `older` runs it left out and echoes `before` (see [`run_list`]).
pub const PROTOCOL_VERSION: u32 = 8;

/// The longest request id accepted.
pub const MAX_REQUEST_ID_LEN: usize = 64;

/// A client's name for one of its requests (any 1 to 64 printable ASCII characters it
/// chooses). Every direct answer to the request, an `error` included, carries the same id, so
/// a client matches answers to requests by id alone, however they interleave.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RequestId(String);

impl RequestId {
    pub fn parse(text: &str) -> Result<RequestId, String> {
        let printable = text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
        if !text.is_empty() && text.len() <= MAX_REQUEST_ID_LEN && printable {
            Ok(RequestId(text.to_owned()))
        } else {
            Err(format!("a request id is 1 to {MAX_REQUEST_ID_LEN} printable ASCII characters"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RequestId {
    type Error = String;
    fn try_from(text: String) -> Result<RequestId, String> {
        RequestId::parse(&text)
    }
}

impl From<RequestId> for String {
    fn from(id: RequestId) -> String {
        id.0
    }
}

/// What the browser sends: a message, and the id its direct answers will carry
/// (`{"id": "7", "type": "launch", ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    #[serde(flatten)]
    pub message: ClientMessage,
}

/// What the server sends: a message, with the id of the request it answers when it answers
/// one (`launched`, `slurm_script`, `runs`, `welcome`, `pong`, `error`). Streamed points, log
/// lines, run updates and heartbeats answer no request and carry none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    #[serde(flatten)]
    pub message: ServerMessage,
}

impl ServerReply {
    /// The direct answer to the request `id`.
    pub fn answer(id: Option<RequestId>, message: ServerMessage) -> ServerReply {
        ServerReply { id, message }
    }
}

impl From<ServerMessage> for ServerReply {
    fn from(message: ServerMessage) -> ServerReply {
        ServerReply { id: None, message }
    }
}

/// The id of a request that could not be read as a whole (too large, rate-limited, not a
/// message of this protocol), when its `id` field can still be read: the error answering it
/// then carries it too.
pub fn request_id_of(text: &str) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct IdOnly {
        #[serde(default)]
        id: Option<RequestId>,
    }
    serde_json::from_str::<IdOnly>(text).ok()?.id
}

/// What the browser sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// The first message: the server answers `welcome`, or `error` (`version_mismatch`).
    /// A socket opened without a token (the page's: its token never travels in a URL, where
    /// proxies log it) must send it here, first, within the server's deadline for strangers;
    /// until then the server sends nothing, and a wrong token closes it (`unauthorized`).
    Hello {
        version: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<Secret>,
        /// A viewer page's learner key from an earlier visit (see [`LearnerIdentity`]), so
        /// its runs stay its own across reloads.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        learner_key: Option<LearnerKey>,
    },
    /// Start streaming a run. Without `after_seq` the server sends the history first; with
    /// it (the last point sequence number seen), exactly the points after it. `after_log_seq`
    /// does the same for log lines (without it: the last lines of the log).
    Subscribe {
        run: RunId,
        #[serde(default)]
        after_seq: Option<u64>,
        #[serde(default)]
        after_log_seq: Option<u64>,
    },
    Unsubscribe {
        run: RunId,
    },
    Launch(LaunchRequest),
    /// Asks for the batch script a Slurm launch would submit, without submitting it: the
    /// server answers `slurm_script`, or `error` (`invalid_launch`) with the problems.
    PreviewSlurm(LaunchRequest),
    Cancel {
        run: RunId,
    },
    /// Goes on with a run that ended before its last step (failed, lost a node, timed out,
    /// was cancelled) from its last checkpoint: the same run, its job submitted again or its
    /// ranks started again. Refused (`not_resumable`) without a checkpoint or once completed.
    Resume {
        run: RunId,
    },
    /// Asks for the run list: without `before`, every run of the instructor's and of this
    /// connection's learner, and the newest [`run_list::RUN_PAGE`] of the other learners' runs;
    /// with it, the next [`run_list::RUN_PAGE`] of the other learners' runs whose ids sort before it.
    ListRuns {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<RunId>,
    },
    /// Answered by `pong` with the same nonce (a client's own liveness check).
    Ping {
        #[serde(default)]
        nonce: u64,
    },
    /// The instructor's page presents (again, after each change): the server keeps it and
    /// sends `presenting` to every connection. Refused with `forbidden` from a viewer, and
    /// with `bad_message` and its problems when a field breaks a rule.
    Present {
        presentation: Presentation,
    },
    /// The instructor's page stops presenting: followers are told `presenting` with none.
    StopPresenting,
    /// Whether this page follows the presentation (counted in the instructor's `audience`).
    Follow {
        following: bool,
    },
    /// A follower server says who it is and, if its learner allows, what it runs (class
    /// listener only; refused with `bad_message` and the problems when a field breaks a rule).
    Introduce(Introduction),
    /// The instructor makes a new class link: the old one stops working, and every follower
    /// that joined with it is disconnected.
    NewClassLink,
    /// The instructor removes a follower from the class: every connection of its identity
    /// ends, and the identity is barred until the next class link.
    RemoveFollower {
        follower: FollowerId,
    },
    /// The instructor invites the learner `name` (see [`invitation_name_ok`]): answered with
    /// `invitation`, a class link for that learner alone, from any host.
    Invite {
        name: String,
    },
    /// This server's owner joins the class of a link (the page's "Join a class" field):
    /// `error` (`bad_message`) naming what is wrong with a link that is not one.
    JoinClass {
        link: Secret,
    },
    /// This server's owner stops following the class.
    LeaveClass,
    /// The instructor charts a run that follower `follower` shares (one of its roster rows):
    /// the server keeps a copy of it, named [`shared_copy_id`], and asks the follower for its
    /// points (`share_run`), now and whenever it joins again.
    ChartSharedRun {
        follower: FollowerId,
        run: RunId,
    },
    /// A follower server sends the points of its learner's run `run` that the class listener
    /// asked for (`share_run`): every point after line `after` up to the last one in `points`,
    /// in order. `after` must be where the copy ends; a message that does not continue the
    /// copy is dropped and the run asked for again from there, so no point is lost or doubled.
    /// `after` 0 with the copy longer starts it over (the learner's run rewrote its metrics).
    SharedPoints {
        run: RunId,
        after: u64,
        points: Vec<SeqPoint>,
    },
}

/// What the server sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    Welcome {
        version: u32,
        server: ServerInfo,
    },
    /// The answer to `list_runs` (and what a connection that missed updates gets): runs in the
    /// order of their ids (oldest first), `older` other learners' runs left out before the
    /// first of them, and the `before` it answers (`None`: the list starts over).
    Runs {
        runs: Vec<RunRecord>,
        #[serde(default)]
        older: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<RunId>,
    },
    /// A run was created or changed state; sent to every connection.
    RunUpdate {
        run: RunRecord,
    },
    /// The answer to this connection's `launch`: the id of the run it created (whose
    /// `run_update` every connection gets).
    Launched {
        run: RunId,
    },
    /// A run's points up to `upto_seq`, folded per tag (sent first to a new subscriber, and
    /// again when the trainer rewrote its metrics file on resume: the series restart).
    History {
        run: RunId,
        upto_seq: u64,
        series: Vec<Series>,
    },
    /// New points, in sequence order.
    Points {
        run: RunId,
        points: Vec<SeqPoint>,
    },
    /// New log lines, in sequence order.
    LogLines {
        run: RunId,
        lines: Vec<LogLine>,
    },
    /// The answer to `preview_slurm`: the script as it would be saved and submitted, with
    /// `RUN_ID` where the new run's id will stand.
    SlurmScript {
        script: String,
    },
    Error(ErrorReport),
    Pong {
        nonce: u64,
    },
    /// Sent every [`ServerInfo::heartbeat_secs`]: proxies drop sockets idle for 60 s.
    Heartbeat {
        time: f64,
        /// When Slurm last answered the server's poll (seconds since the Unix epoch): how old
        /// every Slurm run's state is. Absent while no poll has answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slurm_at: Option<f64>,
    },
    /// What the instructor presents now (`None`: nothing). Sent to every connection on each
    /// change, and to a new connection as it opens; a page that falls behind gets only the
    /// latest.
    Presenting {
        #[serde(default)]
        presentation: Option<Presentation>,
    },
    /// Whether the page that presents is connected: `false` once it left and did not come
    /// back within a few seconds (a reload comes back; a closed laptop does not), so the room
    /// knows the presentation stands still. Sent to every connection as it opens and on change.
    Presenter {
        connected: bool,
    },
    /// How many watch and follow; sent to instructor connections when it changes.
    Audience(Audience),
    /// The follower servers connected to this server's class listener; sent to instructor
    /// connections when it changes.
    Roster {
        followers: Vec<Follower>,
        /// How many of `followers` come without their runs: a roster carries at most
        /// [`MAX_ROSTER_RUN_BYTES`] of run summaries, so no size of room makes it too large for
        /// the instructor's page.
        #[serde(default)]
        withheld: u32,
    },
    /// The class link learners join with (`None`: this server has no class listener); sent to
    /// instructor connections only, as they open, when a new link is made, and when the class
    /// listener starts or stops listening.
    ClassLink {
        #[serde(default)]
        link: Option<Secret>,
        /// Why the class listener does not listen now (its port is taken, say), while it tries
        /// again: learners cannot join until it does. Absent while it listens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unbound: Option<String>,
    },
    /// The answer to `invite`: the invited learner's own class link.
    Invitation {
        name: String,
        link: Secret,
    },
    /// Where this server stands with the class it follows; sent to every connection as it
    /// opens and on each change.
    Class(ClassState),
    /// The class listener asks a follower for the points of its learner's run `run` after
    /// line `after` (`shared_points`), and every point from then on: the instructor charts it.
    ShareRun {
        run: RunId,
        after: u64,
    },
}

/// What the browser learns about the server it talks to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// The server's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// Configs a launch may name.
    pub configs: Vec<String>,
    /// The largest message the server reads.
    pub max_message_bytes: usize,
    pub heartbeat_secs: u64,
    /// How many local rank processes run at once: a run of N ranks counts N, one larger
    /// than the limit runs alone; the rest wait as `queued`.
    pub max_local_ranks: usize,
    /// This machine's memory, bytes: what the ranks of a run here must fit in
    /// ([`crate::launch::machine_memory_problems`]), checked by the page as a config is edited
    /// (0: not said, not checked before the launch).
    #[serde(default)]
    pub memory_bytes: u64,
    /// What the link this connection came through may do.
    pub role: Role,
    /// What learners may launch (nothing unless the server was started with `--viewer-runs`).
    #[serde(default)]
    pub learner_runs: LearnerRuns,
    /// A viewer's identity for its own runs (viewer connections only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learner: Option<LearnerIdentity>,
}

/// A metric point with its sequence number (its line in `metrics.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeqPoint {
    pub seq: u64,
    #[serde(flatten)]
    pub point: MetricPoint,
}

/// A log line with its sequence number (its line in `job.log`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    pub seq: u64,
    pub text: String,
}

/// Why a request was refused. The connection stays open unless the code says otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    pub code: ErrorCode,
    pub message: String,
    /// Per-field problems, when the request failed validation (a form shows them beside
    /// the fields).
    #[serde(default, skip_serializing_if = "Problems::is_empty")]
    pub problems: Problems,
    /// The run the request was about, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, or not a message this protocol knows.
    BadMessage,
    /// Larger than [`ServerInfo::max_message_bytes`]; the message was dropped.
    TooLarge,
    /// Too many messages too fast; messages are dropped until the rate falls.
    RateLimited,
    VersionMismatch,
    /// A run id that names no run.
    UnknownRun,
    /// A launch that failed validation; `problems` says what to fix.
    InvalidLaunch,
    /// The run could not be cancelled (it has already ended).
    NotCancellable,
    /// The run cannot be resumed (it completed, runs still, or left no checkpoint).
    NotResumable,
    /// The link's role may not do this (a viewer's launch, cancel or Slurm preview).
    Forbidden,
    /// The socket's first message did not carry a token this server accepts (it closes).
    Unauthorized,
    /// A learner already has as many runs queued or running as the instructor allows.
    QuotaExceeded,
    /// The server failed (a file it could not write); the message says what.
    Internal,
    /// A request over HTTP with a path or query that breaks a rule; `problems` names the part.
    BadRequest,
    /// Nothing there to answer with over HTTP: no such file, item, rank, dataset or clusters
    /// file; the message says which.
    NotFound,
    /// A run's file that is not written yet (a map, a profile): ask again later.
    NotYet,
    /// A class run's file that only the server it trains on has, which is out of reach now.
    Unreachable,
    /// A file the server reads for every request (the clusters file) breaks a rule;
    /// `problems` names the field. The file's owner must mend it.
    InvalidFile,
}

impl ErrorReport {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorReport {
        ErrorReport { code, message: message.into(), problems: Problems::default(), run: None }
    }

    pub fn with_run(mut self, run: RunId) -> ErrorReport {
        self.run = Some(run);
        self
    }

    pub fn with_problems(mut self, problems: Problems) -> ErrorReport {
        self.problems = problems;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_client(msg: ClientMessage) {
        let text = serde_json::to_string(&msg).unwrap();
        assert_eq!(serde_json::from_str::<ClientMessage>(&text).unwrap(), msg, "{text}");
    }

    fn round_trip_server(msg: ServerMessage) {
        let text = serde_json::to_string(&msg).unwrap();
        assert_eq!(serde_json::from_str::<ServerMessage>(&text).unwrap(), msg, "{text}");
    }

    fn id(text: &str) -> RunId {
        RunId::parse(text).unwrap()
    }

    #[test]
    fn every_client_message_round_trips() {
        round_trip_client(ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None });
        round_trip_client(ClientMessage::Hello {
            version: PROTOCOL_VERSION,
            token: Some(Secret("t".repeat(32))),
            learner_key: Some(LearnerKey::parse(&"ab".repeat(16)).unwrap()),
        });
        round_trip_client(ClientMessage::Subscribe { run: id("r1"), after_seq: Some(41), after_log_seq: None });
        round_trip_client(ClientMessage::Unsubscribe { run: id("r1") });
        round_trip_client(ClientMessage::Launch(LaunchRequest {
            config: "cpu_tiny".into(),
            overrides: vec!["num_iters=8".into()],
            dp: 2,
            executor: ExecutorSpec::Local,
            seed: Some(3),
        }));
        let slurm = SlurmRequest { cluster: "perlmutter".into(), nodes: Some(2), ..SlurmRequest::default() };
        round_trip_client(ClientMessage::PreviewSlurm(LaunchRequest {
            config: "bs64_opt".into(),
            overrides: vec![],
            dp: 1,
            executor: ExecutorSpec::Slurm(Box::new(slurm)),
            seed: None,
        }));
        round_trip_client(ClientMessage::Cancel { run: id("r1") });
        round_trip_client(ClientMessage::ListRuns { before: None });
        round_trip_client(ClientMessage::ListRuns { before: Some(id("r1")) });
        round_trip_client(ClientMessage::Ping { nonce: 9 });
        let presentation =
            Presentation { chapter: "intro".into(), block: Some(2), element: Some(9), quiz: Some(4), charts: ChartView::default() };
        round_trip_client(ClientMessage::Present { presentation });
        round_trip_client(ClientMessage::StopPresenting);
        round_trip_client(ClientMessage::Follow { following: true });
        round_trip_client(ClientMessage::Introduce(Introduction { name: "learner1".into(), runs: Some(vec![]) }));
        round_trip_client(ClientMessage::NewClassLink);
        round_trip_client(ClientMessage::RemoveFollower { follower: 7 });
        round_trip_client(ClientMessage::Invite { name: "ada".into() });
        round_trip_client(ClientMessage::JoinClass { link: Secret("scalebook-class://h:1/#token=x".into()) });
        round_trip_client(ClientMessage::LeaveClass);
        let hello = ClientMessage::Hello { version: PROTOCOL_VERSION, token: Some(Secret("sekrit".into())), learner_key: None };
        assert!(!format!("{hello:?}").contains("sekrit"), "a token never shows in Debug");
    }

    #[test]
    fn every_server_message_round_trips() {
        let point = MetricPoint { step: 3, epoch: 1, wall: 1.7e9, tag: "Loss/train".into(), value: 0.5 };
        let info = ServerInfo {
            version: "0.1.0".into(),
            configs: vec!["cpu_tiny".into()],
            max_message_bytes: 65536,
            heartbeat_secs: 20,
            max_local_ranks: 1,
            memory_bytes: 24 << 30,
            role: Role::Viewer,
            learner_runs: LearnerRuns {
                per_learner: 2,
                configs: vec!["cpu_tiny".into()],
                time_limit_minutes: 30,
                ranks: 2,
                memory_share_bytes: None,
            },
            learner: Some(LearnerIdentity {
                key: LearnerKey::parse(&"ab".repeat(16)).unwrap(),
                learner: Learner::parse("0123456789ab").unwrap(),
            }),
        };
        assert_eq!(serde_json::to_value(&info).unwrap()["role"], "viewer");
        round_trip_server(ServerMessage::Welcome { version: PROTOCOL_VERSION, server: info });
        round_trip_server(ServerMessage::Runs { runs: vec![], older: 0, before: None });
        round_trip_server(ServerMessage::Runs { runs: vec![], older: 120, before: Some(id("r1")) });
        round_trip_server(ServerMessage::Launched { run: id("r1") });
        round_trip_server(ServerMessage::History { run: id("r1"), upto_seq: 1, series: series([&point], 10) });
        round_trip_server(ServerMessage::Points { run: id("r1"), points: vec![SeqPoint { seq: 1, point }] });
        round_trip_server(ServerMessage::LogLines { run: id("r1"), lines: vec![LogLine { seq: 1, text: "hello".into() }] });
        let mut problems = Problems::default();
        problems.push("embed_dim", "1536 is not divisible by num_heads 7");
        round_trip_server(ServerMessage::Error(
            ErrorReport::new(ErrorCode::InvalidLaunch, "invalid").with_problems(problems).with_run(id("r1")),
        ));
        round_trip_server(ServerMessage::SlurmScript { script: "#!/bin/bash\n".into() });
        round_trip_server(ServerMessage::Pong { nonce: 9 });
        round_trip_server(ServerMessage::Heartbeat { time: 1.7e9, slurm_at: Some(1.7e9 - 3.0) });
        round_trip_server(ServerMessage::Presenting { presentation: None });
        let presentation = Presentation { chapter: "intro".into(), block: None, element: None, quiz: None, charts: ChartView::default() };
        round_trip_server(ServerMessage::Presenting { presentation: Some(presentation) });
        round_trip_server(ServerMessage::Audience(Audience { viewers: 3, followers: 0, following: 2 }));
        round_trip_server(ServerMessage::Presenter { connected: false });
        let identity = FollowerIdentity::Account { user: "learner1".into() };
        let follower = Follower { id: 3, identity, name: "learner1".into(), following: false, since: 1.7e9, runs: None };
        round_trip_server(ServerMessage::Roster { followers: vec![follower], withheld: 0 });
        round_trip_server(ServerMessage::ClassLink { link: Some(Secret("scalebook-class://h:1/".into())), unbound: None });
        round_trip_server(ServerMessage::ClassLink { link: Some(Secret("x".into())), unbound: Some("port taken".into()) });
        round_trip_server(ServerMessage::ClassLink { link: None, unbound: None });
        round_trip_server(ServerMessage::Invitation { name: "ada".into(), link: Secret("scalebook-class://h:1/".into()) });
        round_trip_server(ServerMessage::Class(ClassState::Connecting { address: "h:1".into(), attempt: 2, warning: None }));
        let warned = ClassState::Connecting { address: "h:1".into(), attempt: 3, warning: Some("not the instructor's".into()) };
        round_trip_server(ServerMessage::Class(warned));
        assert_eq!(
            serde_json::to_value(ServerMessage::Audience(Audience { viewers: 3, followers: 1, following: 2 })).unwrap(),
            serde_json::json!({"type": "audience", "viewers": 3, "followers": 1, "following": 2})
        );
    }

    #[test]
    fn the_wire_format_is_flat_tagged_json() {
        let text = r#"{"type": "subscribe", "run": "r1", "after_seq": 41}"#;
        let msg: ClientMessage = serde_json::from_str(text).unwrap();
        assert_eq!(msg, ClientMessage::Subscribe { run: id("r1"), after_seq: Some(41), after_log_seq: None });
        let launch: ClientMessage = serde_json::from_str(r#"{"type": "launch", "config": "cpu_tiny"}"#).unwrap();
        assert!(matches!(launch, ClientMessage::Launch(LaunchRequest { ref config, .. }) if config == "cpu_tiny"));
        let err = serde_json::from_str::<ClientMessage>(r#"{"type": "launch", "config": "cpu_tiny", "env": {"A": "1"}}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `env`"), "{err}");
        let list: ClientMessage = serde_json::from_str(r#"{"type": "list_runs"}"#).unwrap();
        assert_eq!(list, ClientMessage::ListRuns { before: None }, "a page of version 7 asks for the first page");
        // A point travels as the trainer wrote it, plus its sequence number.
        let point = MetricPoint { step: 3, epoch: 1, wall: 2.0, tag: "Loss/train".into(), value: 0.5 };
        let json = serde_json::to_value(SeqPoint { seq: 7, point }).unwrap();
        assert_eq!(json, serde_json::json!({"seq": 7, "step": 3, "epoch": 1, "wall": 2.0, "tag": "Loss/train", "value": 0.5}));
        let err = serde_json::to_value(ServerMessage::Error(ErrorReport::new(ErrorCode::TooLarge, "too big"))).unwrap();
        assert_eq!(err, serde_json::json!({"type": "error", "code": "too_large", "message": "too big"}));
    }

    #[test]
    fn requests_and_answers_carry_the_clients_id_beside_the_tagged_message() {
        let request: ClientRequest = serde_json::from_str(r#"{"id": "launch-7", "type": "launch", "config": "cpu_tiny"}"#).unwrap();
        assert_eq!(request.id, Some(RequestId::parse("launch-7").unwrap()));
        assert!(matches!(request.message, ClientMessage::Launch(ref l) if l.config == "cpu_tiny"));
        // Without an id, a request reads as before.
        let bare: ClientRequest = serde_json::from_str(r#"{"type": "list_runs"}"#).unwrap();
        assert_eq!(bare, ClientRequest { id: None, message: ClientMessage::ListRuns { before: None } });
        // Unknown fields are still refused inside the message.
        let err = serde_json::from_str::<ClientRequest>(r#"{"id": "1", "type": "launch", "config": "c", "env": {}}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `env`"), "{err}");
        let list: ClientMessage = serde_json::from_str(r#"{"type": "list_runs"}"#).unwrap();
        assert_eq!(list, ClientMessage::ListRuns { before: None }, "a page of version 7 asks for the first page");
        let answer = ServerReply::answer(Some(RequestId::parse("launch-7").unwrap()), ServerMessage::Launched { run: id("r1") });
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(json, serde_json::json!({"id": "launch-7", "type": "launched", "run": "r1"}));
        assert_eq!(serde_json::from_value::<ServerReply>(json).unwrap(), answer);
        let error = ServerReply::answer(
            Some(RequestId::parse("9").unwrap()),
            ServerMessage::Error(ErrorReport::new(ErrorCode::RateLimited, "slow down")),
        );
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(json, serde_json::json!({"id": "9", "type": "error", "code": "rate_limited", "message": "slow down"}));
        assert_eq!(serde_json::from_value::<ServerReply>(json).unwrap(), error);
        // A streamed message has no id.
        assert_eq!(
            serde_json::to_value(ServerReply::from(ServerMessage::Pong { nonce: 1 })).unwrap(),
            serde_json::json!({"type": "pong", "nonce": 1})
        );
    }

    #[test]
    fn the_id_of_an_unreadable_request_is_still_found() {
        assert_eq!(request_id_of(r#"{"id": "x1", "type": "no_such_message"}"#), Some(RequestId::parse("x1").unwrap()));
        assert_eq!(request_id_of(r#"{"type": "ping"}"#), None);
        assert_eq!(request_id_of("not json"), None);
        let long = format!(r#"{{"id": "{}", "type": "ping"}}"#, "x".repeat(MAX_REQUEST_ID_LEN + 1));
        assert_eq!(request_id_of(&long), None);
        assert!(RequestId::parse("line\nbreak").is_err() && RequestId::parse("").is_err());
    }

    #[test]
    fn a_run_id_with_a_path_in_it_is_not_a_message() {
        let err = serde_json::from_str::<ClientMessage>(r#"{"type": "cancel", "run": "../../etc"}"#).unwrap_err();
        assert!(err.to_string().contains("is not a run id"), "{err}");
    }
}
