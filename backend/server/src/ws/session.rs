//! One connection's side of the protocol: what it subscribed to, and the answer to each
//! message it sends. Every refusal is an `error` message naming what was wrong; the connection
//! stays open, so one bad request never costs a learner their live charts.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::Problems;
use scalebook_shared::protocol::{
    Audience, ClassLink, ClassState, ClientMessage, ClientRequest, ErrorCode, ErrorReport, ExecutorSpec, FollowerIdentity, LaunchRequest,
    Learner, LearnerIdentity, PROTOCOL_VERSION, Presentation, RequestId, Role, RunId, RunRecord, Secret, ServerInfo, ServerMessage,
    ServerReply, request_id_of, run_list,
};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;

use super::outbox::{Closed, Outbox};
use crate::Error;
use crate::auth::Token;
use crate::class::shared::SharedRuns;
use crate::class::{ClassKey, for_followers};
use crate::classroom::{AUDIENCE_SETTLE, Roster, Seat, roster_message};
use crate::learners::{self, LearnerLaunch};
use crate::plan::{self, LaunchPlan, Launcher, Policy};
use crate::rate::RateLimiter;
use crate::runs::RunManager;
use crate::state::AppState;
use crate::stream::{Backlog, Subscription};
use crate::wire::encode;

pub struct Session {
    state: Arc<AppState>,
    /// What the link this connection came through may do.
    role: Role,
    /// Messages for this connection from the tasks that follow its subscriptions.
    out: Outbox,
    subscriptions: HashMap<RunId, AbortHandle>,
    limiter: RateLimiter,
    /// Messages are being dropped for rate; the client has been told once.
    limited: bool,
    /// This connection in the classroom's head count.
    seat: Seat,
    /// The learner a viewer connection launches as, fixed by its first `hello`: the key it
    /// presents from an earlier visit, or a fresh one; `None` on the instructor's link, before
    /// the `hello`, or when the server hands out no more new identities for now.
    learner: Option<LearnerIdentity>,
    /// The first `hello` was answered: the learner identity is fixed for this connection.
    greeted: bool,
    /// A follower's class link (on the class listener): when it is replaced, the follower goes.
    key_changes: Option<watch::Receiver<Token>>,
    /// Who a follower is, once it introduced itself (`None` before; its identity is fixed
    /// when it connects, the introduction only says it is ready to be asked for runs).
    introduced: watch::Sender<Option<FollowerIdentity>>,
    /// Who a follower is (the class listener's finding, not the follower's word).
    identity: Option<FollowerIdentity>,
    /// The learner of `learner`, for the task that sends this connection the run list again
    /// when it missed updates (the page's own runs come whole).
    learner_seen: watch::Sender<Option<Learner>>,
    /// The client's address (`None` off the gated listeners), which bounds its learner launches.
    peer: Option<IpAddr>,
}

impl Session {
    /// A connection of `role` from `peer`; a follower's as `identity`, which a follower
    /// connection must have (one without is counted as nobody's and may do nothing of a
    /// follower's).
    pub fn new(state: Arc<AppState>, role: Role, out: Outbox, peer: Option<IpAddr>, identity: Option<FollowerIdentity>) -> Session {
        let limiter = RateLimiter::new(state.ws.messages_per_sec, state.ws.burst, Instant::now());
        let identity = identity.filter(|_| role == Role::Follower);
        let seat = match &identity {
            Some(identity) => state.classroom.join_follower(identity.clone()),
            None => state.classroom.join(role),
        };
        let key_changes = state.class.as_ref().filter(|_| role == Role::Follower).map(|key| key.changes());
        let introduced = watch::Sender::new(None);
        let learner_seen = watch::Sender::new(None);
        Session {
            state,
            role,
            out,
            subscriptions: HashMap::new(),
            limiter,
            limited: false,
            seat,
            learner: None,
            greeted: false,
            key_changes,
            introduced,
            identity,
            learner_seen,
            peer,
        }
    }

    /// The learner this connection launches as once its first `hello` fixed it (see
    /// [`forward_updates`]).
    pub fn learners(&self) -> watch::Receiver<Option<Learner>> {
        self.learner_seen.subscribe()
    }

    /// Who a follower is, once it introduced itself.
    pub fn introduced(&self) -> watch::Receiver<Option<FollowerIdentity>> {
        self.introduced.subscribe()
    }

    /// Resolves, with the reason, when a follower must go: the instructor removed it or made
    /// a new class link (never, for other connections).
    pub async fn dismissed(&mut self) -> &'static str {
        let key_changed = async {
            match &mut self.key_changes {
                Some(changes) => {
                    // A closed channel (the server is stopping) is no dismissal.
                    if changes.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.seat.dismissed() => "removed from the class by the instructor",
            () = key_changed => "the instructor made a new class link: ask them for it",
        }
    }

    /// The replies to one text message from the client (none for a dropped one). Each direct
    /// answer carries the request's id, an error too, whenever the id can be read.
    pub async fn receive(&mut self, text: &str) -> Vec<ServerReply> {
        let max = self.state.ws.max_message_bytes;
        if let Some(refusal) = self.limit() {
            // A dropped request that names itself is told so (a few bytes each, so a client
            // never waits forever for an answer); the rest of a flood, once.
            let id = if text.len() <= max { request_id_of(text) } else { None };
            let report = match (&id, refusal) {
                (Some(_), _) => Some(rate_limited()),
                (None, first) => first,
            };
            return report.map(|report| error(id, report)).into_iter().collect();
        }
        if text.len() > max {
            let message = format!("a message of {} bytes was dropped: the limit is {max} bytes", text.len());
            return vec![error(None, ErrorReport::new(ErrorCode::TooLarge, message))];
        }
        match serde_json::from_str::<ClientRequest>(text) {
            Ok(ClientRequest { id, message }) => match self.handle(message).await {
                Ok(answer) => answer.map(|m| ServerReply::answer(id, m)).into_iter().collect(),
                Err(report) => vec![error(id, report)],
            },
            Err(e) => {
                let message = format!("not a message of protocol version {PROTOCOL_VERSION}: {e}");
                vec![error(request_id_of(text), ErrorReport::new(ErrorCode::BadMessage, message))]
            }
        }
    }

    /// A binary frame: not part of the protocol, and counted against the rate like any other.
    pub fn receive_binary(&mut self) -> Vec<ServerReply> {
        if let Some(refusal) = self.limit() {
            return refusal.map(|report| error(None, report)).into_iter().collect();
        }
        vec![error(None, ErrorReport::new(ErrorCode::BadMessage, "binary messages are not part of the protocol: send JSON text"))]
    }

    /// `None` when a message may be handled now; else it is dropped, and the first dropped
    /// message of a flood gets the error (`Some(Some(..))`), the rest nothing.
    fn limit(&mut self) -> Option<Option<ErrorReport>> {
        if self.limiter.allow(Instant::now()) {
            self.limited = false;
            return None;
        }
        let first = !std::mem::replace(&mut self.limited, true);
        Some(first.then(rate_limited))
    }

    async fn handle(&mut self, message: ClientMessage) -> Result<Option<ServerMessage>, ErrorReport> {
        if let Some(refusal) = self.forbidden(&message) {
            return Err(refusal);
        }
        let runs = &self.state.runs;
        match message {
            ClientMessage::Hello { version, learner_key, .. } if version == PROTOCOL_VERSION => {
                if !std::mem::replace(&mut self.greeted, true) && self.role == Role::Viewer {
                    self.learner = self.learner_for(learner_key).await;
                    self.learner_seen.send_replace(self.learner.as_ref().map(|identity| identity.learner.clone()));
                } else if let (Some(key), Some(mine)) = (learner_key, &self.learner)
                    && key != mine.key
                {
                    let message = format!("this connection launches as learner {}: a connection keeps its first identity", mine.learner);
                    return Err(ErrorReport::new(ErrorCode::Forbidden, message));
                }
                Ok(Some(ServerMessage::Welcome { version: PROTOCOL_VERSION, server: self.info() }))
            }
            ClientMessage::Hello { version, .. } => Err(ErrorReport::new(
                ErrorCode::VersionMismatch,
                format!("this server speaks protocol version {PROTOCOL_VERSION}, the page {version}: reload the page"),
            )),
            ClientMessage::ListRuns { before } => {
                let mine = self.learner.as_ref().map(|identity| &identity.learner);
                Ok(Some(run_list(runs, self.role, mine, before).await))
            }
            ClientMessage::Launch(request) => {
                let launcher = self.launcher()?;
                if matches!(launcher, Launcher::Learner(_)) && !self.state.launch_rates.allow(self.peer, Instant::now()) {
                    return Err(ErrorReport::new(ErrorCode::RateLimited, learners::launch_rate_refusal()));
                }
                let plan = self.plan(request, launcher).await?;
                let record = runs.launch(plan).await.map_err(|e| report(&e, None))?;
                Ok(Some(ServerMessage::Launched { run: record.id }))
            }
            ClientMessage::PreviewSlurm(request) => {
                if !matches!(request.executor, ExecutorSpec::Slurm(_)) {
                    let mut problems = Problems::default();
                    problems.push("executor", "only a Slurm launch has a batch script: choose a slurm cluster");
                    return Err(ErrorReport::new(ErrorCode::InvalidLaunch, "nothing to preview").with_problems(problems));
                }
                let plan = self.plan(request, Launcher::Instructor).await?;
                let script = runs.preview_script(&plan).map_err(|e| report(&e, None))?;
                Ok(Some(ServerMessage::SlurmScript { script }))
            }
            ClientMessage::Cancel { run } => {
                if let Some(refusal) = self.not_theirs(&run).await {
                    return Err(refusal);
                }
                runs.cancel(&run).await.map_err(|e| report(&e, Some(&run)))?;
                Ok(None)
            }
            ClientMessage::Resume { run } => {
                if let Some(refusal) = self.not_theirs(&run).await {
                    return Err(refusal);
                }
                let quota = match self.launcher()? {
                    Launcher::Learner(launch) => Some(launch),
                    Launcher::Instructor => None,
                };
                runs.resume(&run, quota.as_ref()).await.map_err(|e| report(&e, Some(&run)))?;
                Ok(None)
            }
            ClientMessage::Subscribe { run, after_seq, after_log_seq } => {
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
            ClientMessage::Unsubscribe { run } => {
                if let Some(task) = self.subscriptions.remove(&run) {
                    task.abort();
                }
                Ok(None)
            }
            ClientMessage::Ping { nonce } => Ok(Some(ServerMessage::Pong { nonce })),
            ClientMessage::Present { presentation } => {
                let problems = presentation.problems();
                if !problems.is_empty() {
                    return Err(ErrorReport::new(ErrorCode::BadMessage, "the presentation was refused").with_problems(problems));
                }
                let to_followers = self.followers_view(presentation.clone()).await;
                self.seat.present(Some(presentation), Some(to_followers));
                Ok(None)
            }
            ClientMessage::StopPresenting => {
                self.seat.present(None, None);
                Ok(None)
            }
            ClientMessage::Follow { following } => {
                self.seat.follow(following);
                Ok(None)
            }
            ClientMessage::Introduce(introduction) => {
                let problems = introduction.problems();
                if !problems.is_empty() {
                    return Err(ErrorReport::new(ErrorCode::BadMessage, "the introduction was refused").with_problems(problems));
                }
                let identity = self.follower_identity()?.clone();
                let shared = introduction.runs.clone().unwrap_or_default();
                self.seat.introduce(introduction);
                self.state.shared.update(&identity, &shared).await;
                self.introduced.send_if_modified(|now| now.replace(identity.clone()).as_ref() != Some(&identity));
                Ok(None)
            }
            ClientMessage::ChartSharedRun { follower, run } => {
                self.class_key()?;
                let (identity, summary) = self.state.classroom.shared_run(follower, &run).ok_or_else(|| {
                    ErrorReport::new(
                        ErrorCode::UnknownRun,
                        format!("follower {follower} shares no run {run} (not in the class, or not shared)"),
                    )
                    .with_run(run.clone())
                })?;
                self.state.shared.chart(&identity, &summary).await.map_err(|e| ErrorReport::new(ErrorCode::BadMessage, e).with_run(run))?;
                Ok(None)
            }
            ClientMessage::SharedPoints { run, after, points } => {
                let identity = self.follower_identity()?.clone();
                self.state
                    .shared
                    .points(&identity, &run, after, points)
                    .await
                    .map_err(|e| ErrorReport::new(ErrorCode::BadMessage, e).with_run(run))
            }
            ClientMessage::NewClassLink => {
                let key = self.class_key()?;
                key.renew().map_err(|e| report(&e, None))?;
                self.state.classroom.new_class_link();
                Ok(None)
            }
            ClientMessage::Invite { name } => {
                let link = self.class_key()?.invitation(&name).map_err(|why| {
                    let mut problems = Problems::default();
                    problems.push("name", why.trim_start_matches("name: "));
                    ErrorReport::new(ErrorCode::BadMessage, "no invitation was made").with_problems(problems)
                })?;
                tracing::info!(%name, "an invitation was made");
                Ok(Some(ServerMessage::Invitation { name, link: Secret(link.to_string()) }))
            }
            ClientMessage::RemoveFollower { follower } => {
                self.class_key()?;
                match self.state.classroom.remove(follower) {
                    true => Ok(None),
                    false => Err(ErrorReport::new(ErrorCode::BadMessage, format!("no follower {follower} is in the class"))),
                }
            }
            ClientMessage::JoinClass { link: Secret(text) } => {
                let link = ClassLink::parse(&text)
                    .map_err(|problems| ErrorReport::new(ErrorCode::BadMessage, "that is not a class link").with_problems(problems))?;
                self.state.following.join_and_keep(link);
                Ok(None)
            }
            ClientMessage::LeaveClass => {
                self.state.following.leave().await;
                Ok(None)
            }
        }
    }

    /// `presentation` as follower servers get it: without the runs they are not shown (a
    /// learner's run, the copy of one), which their pages could never chart.
    async fn followers_view(&self, mut presentation: Presentation) -> Presentation {
        let runs = &self.state.runs;
        let mut shown = HashSet::new();
        for id in &presentation.charts.runs {
            if runs.record(id).await.is_some_and(|record| for_followers(&record)) {
                shown.insert(id.clone());
            }
        }
        presentation.charts.retain(|id| shown.contains(id));
        presentation
    }

    /// Who this follower connection is (every follower has an identity; see [`Session::new`]).
    fn follower_identity(&self) -> Result<&FollowerIdentity, ErrorReport> {
        self.identity.as_ref().ok_or_else(|| ErrorReport::new(ErrorCode::Forbidden, "this connection has no follower identity"))
    }

    /// The class listener's key, or the refusal of a class message on a server without one.
    fn class_key(&self) -> Result<&Arc<ClassKey>, ErrorReport> {
        self.state.class.as_ref().ok_or_else(|| {
            ErrorReport::new(ErrorCode::BadMessage, "this server has no class listener: start it with --class-listen ADDRESS:PORT")
        })
    }

    /// The refusal of a message this connection's role may not send: a viewer reads and
    /// follows, and never starts, stops or submits anything another user would see, except a
    /// learner's own runs when the instructor allows them (their rules are checked with the
    /// launch and the cancel); a follower server reads the instructor's runs, follows and
    /// introduces itself, nothing more. Every message is named here, so a new one must be
    /// placed on one side or the other.
    fn forbidden(&self, message: &ClientMessage) -> Option<ErrorReport> {
        let (what, run) = match (self.role, message) {
            (
                _,
                ClientMessage::Hello { .. }
                | ClientMessage::Follow { .. }
                | ClientMessage::Subscribe { .. }
                | ClientMessage::Unsubscribe { .. }
                | ClientMessage::ListRuns { .. }
                | ClientMessage::Ping { .. },
            ) => return None,
            (Role::Follower, ClientMessage::Introduce(_) | ClientMessage::SharedPoints { .. }) => return None,
            (_, ClientMessage::Introduce(_)) => ("introduce themselves: only a follower server on the class listener does", None),
            (_, ClientMessage::SharedPoints { run, .. }) => {
                ("share a run's points: only a follower server on the class listener does", Some(run))
            }
            (Role::Instructor, _) => return None,
            // When learners may launch, `launcher` and `not_theirs` say why one cannot.
            (Role::Viewer, ClientMessage::Launch(_) | ClientMessage::Cancel { .. } | ClientMessage::Resume { .. })
                if self.state.limits.learners.per_learner > 0 =>
            {
                return None;
            }
            (_, ClientMessage::Launch(_)) => ("launch runs", None),
            (_, ClientMessage::Cancel { run }) => ("cancel runs", Some(run)),
            (_, ClientMessage::Resume { run }) => ("resume runs", Some(run)),
            (_, ClientMessage::PreviewSlurm(_)) => ("prepare Slurm jobs", None),
            (_, ClientMessage::Present { .. } | ClientMessage::StopPresenting) => ("present", None),
            (
                _,
                ClientMessage::NewClassLink
                | ClientMessage::RemoveFollower { .. }
                | ClientMessage::ChartSharedRun { .. }
                | ClientMessage::Invite { .. },
            ) => ("run the class", None),
            (_, ClientMessage::JoinClass { .. } | ClientMessage::LeaveClass) => ("join or leave a class for this server", None),
        };
        let who = if self.role == Role::Follower { "a follower" } else { "viewers" };
        let report =
            ErrorReport::new(ErrorCode::Forbidden, format!("{who} cannot {what}: only the instructor's link can; ask your instructor"));
        Some(match run {
            Some(run) => report.with_run(run.clone()),
            None => report,
        })
    }

    /// The identity a viewer's first `hello` gives it: the learner of the key from an earlier
    /// visit (its runs stay its own), or a fresh one; a learner this server does not know costs
    /// one of the server's new-identity tokens ([`learners::Identities`]).
    async fn learner_for(&self, key: Option<scalebook_shared::protocol::LearnerKey>) -> Option<LearnerIdentity> {
        let identity = match key {
            Some(key) => learners::identity(key),
            None => {
                learners::new_identity().map_err(|e| tracing::warn!("no learner identity for a viewer (it launches nothing): {e}")).ok()?
            }
        };
        let has_runs = self.state.runs.shown().await.iter().any(|r| r.learner.as_ref() == Some(&identity.learner));
        let admitted = self.state.identities.admit(identity, has_runs, self.peer);
        if admitted.is_none() {
            tracing::warn!(peer = ?self.peer, "a viewer gets no learner identity: its address, or the server, handed out its new identities for now");
        }
        admitted
    }

    /// The learner this connection launches as, when the instructor lets learners launch.
    fn launching_learner(&self) -> Option<&LearnerIdentity> {
        self.learner.as_ref().filter(|_| self.state.limits.learners.per_learner > 0)
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
        .map_err(|e| ErrorReport::new(ErrorCode::Internal, format!("the launch could not be checked: {e}")))?;
        planned.map_err(|e| ErrorReport::new(ErrorCode::InvalidLaunch, format!("the launch was refused: {e}")).with_problems(e.problems()))
    }

    fn info(&self) -> ServerInfo {
        ServerInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            configs: self.state.configs.file.names().map(str::to_owned).collect(),
            max_message_bytes: self.state.ws.max_message_bytes,
            heartbeat_secs: self.state.ws.heartbeat.as_secs(),
            max_local_ranks: self.state.runs.max_local_ranks(),
            memory_bytes: self.state.limits.memory_bytes,
            role: self.role,
            learner_runs: self.state.limits.learners.clone(),
            learner: self.learner.clone(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for task in self.subscriptions.values() {
            task.abort();
        }
    }
}

fn rate_limited() -> ErrorReport {
    ErrorReport::new(ErrorCode::RateLimited, "too many messages: they are dropped until you send fewer")
}

/// The most problems an error answer lists, and the most characters of each text in it: a
/// short request must never produce a long answer, whatever it held.
const MAX_PROBLEMS: usize = 32;
const MAX_TEXT_CHARS: usize = 500;

/// An error answering request `id`, cut to its bounds.
fn error(id: Option<RequestId>, mut report: ErrorReport) -> ServerReply {
    let cut = |text: &mut String| {
        if let Some((at, _)) = text.char_indices().nth(MAX_TEXT_CHARS) {
            text.truncate(at);
            text.push('…');
        }
    };
    cut(&mut report.message);
    report.problems.0.truncate(MAX_PROBLEMS);
    for problem in &mut report.problems.0 {
        cut(&mut problem.field);
        cut(&mut problem.message);
    }
    ServerReply::answer(id, ServerMessage::Error(report))
}

fn report(error: &Error, run: Option<&RunId>) -> ErrorReport {
    let code = match error {
        Error::UnknownRun { .. } => ErrorCode::UnknownRun,
        Error::NotCancellable { .. } | Error::FollowedRun { .. } | Error::InstructorsRun { .. } => ErrorCode::NotCancellable,
        Error::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
        Error::NotResumable { .. } => ErrorCode::NotResumable,
        _ => ErrorCode::Internal,
    };
    let report = ErrorReport::new(code, error.to_string());
    match run {
        Some(run) => report.with_run(run.clone()),
        None => report,
    }
}

/// Sends a subscriber what it missed, then every live message, at the pace the connection
/// takes them. A viewer too slow for the broadcast (it fell more than the channel's capacity
/// behind) is resubscribed from where it got to, so it skips nothing and repeats nothing, and
/// reads what it missed from the file.
async fn forward(runs: Arc<RunManager>, id: RunId, mut subscription: Subscription, out: Outbox) {
    loop {
        let Subscription { backlog, replay, mut cursor, mut live } = subscription;
        if let Some(backlog) = backlog
            && send_backlog(backlog, &id, &out).await.is_err()
        {
            return;
        }
        for text in replay {
            if out.send_paced(text).await.is_err() {
                return;
            }
        }
        subscription = loop {
            match live.recv().await {
                Ok(frame) => {
                    cursor = frame.cursor;
                    if out.send_paced(frame.text).await.is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => match runs.subscribe(&id, Some(cursor.points), Some(cursor.log)).await {
                    Ok(again) => break again,
                    Err(_) => return,
                },
                Err(broadcast::error::RecvError::Closed) => return,
            }
        };
    }
}

/// Sends the points a subscriber missed from the run's file, one page read per message sent,
/// so only one page is ever in flight.
async fn send_backlog(backlog: Backlog, id: &RunId, out: &Outbox) -> Result<(), Closed> {
    let mut backlog = Some(backlog);
    while let Some(rest) = backlog.take() {
        match rest.read_next().await {
            Ok(Some((text, rest))) => {
                out.send_paced(text).await?;
                backlog = Some(rest);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("run {id}: cannot read its metrics for a viewer behind: {e}"),
        }
    }
    Ok(())
}

/// Sends one connection the presentation as it stands, then each new one. A connection that
/// was busy meanwhile skips to the latest: a follower needs where the instructor is now.
pub async fn forward_presentations(mut presentations: watch::Receiver<Utf8Bytes>, out: Outbox) {
    while presentations.changed().await.is_ok() {
        let text = presentations.borrow_and_update().clone();
        if out.send(text).await.is_err() {
            return;
        }
    }
}

/// Sends an instructor's connection the head count, then each change once it settled.
pub async fn forward_audience(mut audiences: watch::Receiver<Audience>, out: Outbox) {
    while audiences.changed().await.is_ok() {
        tokio::time::sleep(AUDIENCE_SETTLE).await;
        let audience = *audiences.borrow_and_update();
        if out.send(encode(&ServerMessage::Audience(audience))).await.is_err() {
            return;
        }
    }
}

/// Whether a connection of `role` sees `record` (a follower server: see [`for_followers`]).
fn shown_to(role: Role, record: &RunRecord) -> bool {
    role != Role::Follower || for_followers(record)
}

/// The run list a connection of `role` whose learner is `mine` is sent (see
/// [`run_list::page`]).
async fn run_list(runs: &RunManager, role: Role, mine: Option<&Learner>, before: Option<RunId>) -> ServerMessage {
    let shown = runs.shown().await.into_iter().filter(|r| shown_to(role, r)).collect();
    let (runs, older) = run_list::page(shown, mine, before.as_ref(), run_list::RUN_PAGE);
    ServerMessage::Runs { runs, older, before }
}

/// Forwards every run's changes (those its role sees) to one connection; one that fell behind
/// gets the list's first page again (its learner's, from `learner`).
pub async fn forward_updates(runs: Arc<RunManager>, role: Role, learner: watch::Receiver<Option<Learner>>, out: Outbox) {
    let mut updates = runs.updates();
    loop {
        let text = match updates.recv().await {
            Ok(text) if role == Role::Follower => match serde_json::from_str::<ServerMessage>(text.as_str()) {
                Ok(ServerMessage::RunUpdate { run }) if !shown_to(role, &run) => continue,
                _ => text,
            },
            Ok(text) => text,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let mine = learner.borrow().clone();
                encode(&run_list(&runs, role, mine.as_ref(), None).await)
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if out.send(text).await.is_err() {
            return;
        }
    }
}

/// Sends a follower's connection what the instructor charts of its learner's runs (`share_run`),
/// once it introduced itself and whenever the instructor charts another.
pub async fn forward_asks(shared: Arc<SharedRuns>, mut introduced: watch::Receiver<Option<FollowerIdentity>>, out: Outbox) {
    let mut charts = shared.charts();
    let mut asked = HashSet::new();
    loop {
        let identity = introduced.borrow_and_update().clone();
        for ask in match &identity {
            Some(identity) => shared.asks(identity, &mut asked).await,
            None => vec![],
        } {
            if out.send(encode(&ask)).await.is_err() {
                return;
            }
        }
        tokio::select! {
            changed = introduced.changed() => {
                if changed.is_err() {
                    return;
                }
                asked.clear();
            }
            changed = charts.changed() => if changed.is_err() { return },
        }
    }
}

/// Sends an instructor's connection the roster, then each change once it settled.
///
/// Bounded in bytes ([`roster_message`]) and sent at the page's pace: a roster waits for the
/// one before it to leave, so however large the room and however often it changes, the
/// instructor's page is never dropped for being behind (it gets the latest roster next).
pub async fn forward_roster(mut rosters: watch::Receiver<Roster>, out: Outbox) {
    while rosters.changed().await.is_ok() {
        tokio::time::sleep(AUDIENCE_SETTLE).await;
        let message = roster_message(&rosters.borrow_and_update());
        if out.send_paced(encode(&message)).await.is_err() {
            return;
        }
    }
}

/// Sends an instructor's connection the class link (none without a class listener) with
/// whether its class listener listens, then again at each new link and each change of that.
pub async fn forward_class_links(key: Option<Arc<ClassKey>>, out: Outbox) {
    let Some(key) = key else {
        let _ = out.send(encode(&ServerMessage::ClassLink { link: None, unbound: None })).await;
        return;
    };
    let (mut changes, mut unbound) = (key.changes(), key.unbound());
    loop {
        let link = Some(Secret(key.link().to_string()));
        let message = ServerMessage::ClassLink { link, unbound: unbound.borrow_and_update().clone() };
        if out.send(encode(&message)).await.is_err() {
            return;
        }
        let changed = tokio::select! {
            changed = changes.changed() => changed,
            changed = unbound.changed() => changed,
        };
        if changed.is_err() {
            return;
        }
    }
}

/// Sends a connection where this server stands with the class it follows, then each change.
pub async fn forward_class_states(mut states: watch::Receiver<ClassState>, out: Outbox) {
    loop {
        let state = states.borrow_and_update().clone();
        if out.send(encode(&ServerMessage::Class(state))).await.is_err() || states.changed().await.is_err() {
            return;
        }
    }
}

/// Sends a connection whether the presenting page is connected, then each change.
pub async fn forward_presenter(mut states: watch::Receiver<bool>, out: Outbox) {
    loop {
        let connected = *states.borrow_and_update();
        if out.send(encode(&ServerMessage::Presenter { connected })).await.is_err() || states.changed().await.is_err() {
            return;
        }
    }
}
