//! One connection's side of the protocol: who it is (role, learner, follower), its rate limit,
//! what its role may not send, and a short router that hands each message to its domain: runs
//! ([`runs`]), presenting ([`presenting`]) and the class ([`class`]). Every refusal is an
//! `error` message naming what was wrong ([`reply`]); the connection stays open, so one bad
//! request never costs a learner their live charts. The tasks that feed the connection what it
//! follows are in [`super::feeds`].

mod class;
mod presenting;
mod reply;
mod runs;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use scalebook_shared::protocol::{
    ClientMessage, ClientRequest, ErrorCode, ErrorReport, FollowerIdentity, Learner, LearnerIdentity, LearnerKey, PROTOCOL_VERSION, Role,
    RunId, ServerInfo, ServerMessage, ServerReply, request_id_of,
};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use self::reply::{error, rate_limited};
use super::outbox::Outbox;
use crate::auth::Token;
use crate::classroom::Seat;
use crate::learners;
use crate::rate::RateLimiter;
use crate::state::AppState;

/// What a message gets: an answer, nothing, or a refusal naming what was wrong.
type Answer = Result<Option<ServerMessage>, ErrorReport>;

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

    /// Answers one message: refused when the connection's role may not send it
    /// ([`Session::forbidden`]), else handled by its domain's module.
    async fn handle(&mut self, message: ClientMessage) -> Answer {
        if let Some(refusal) = self.forbidden(&message) {
            return Err(refusal);
        }
        match message {
            ClientMessage::Hello { version, learner_key, .. } => self.hello(version, learner_key).await,
            ClientMessage::Ping { nonce } => Ok(Some(ServerMessage::Pong { nonce })),
            ClientMessage::ListRuns { before } => self.list_runs(before).await,
            ClientMessage::Launch(request) => self.launch(request).await,
            ClientMessage::PreviewSlurm(request) => self.preview_slurm(request).await,
            ClientMessage::Cancel { run } => self.cancel(run).await,
            ClientMessage::Resume { run } => self.resume(run).await,
            ClientMessage::Subscribe { run, after_seq, after_log_seq } => self.subscribe(run, after_seq, after_log_seq).await,
            ClientMessage::Unsubscribe { run } => self.unsubscribe(&run),
            ClientMessage::Present { presentation } => self.present(presentation).await,
            ClientMessage::StopPresenting => self.stop_presenting(),
            ClientMessage::Follow { following } => self.follow(following),
            ClientMessage::Introduce(introduction) => self.introduce(introduction).await,
            ClientMessage::ChartSharedRun { follower, run } => self.chart_shared_run(follower, run).await,
            ClientMessage::SharedPoints { run, after, points } => self.shared_points(run, after, points).await,
            ClientMessage::NewClassLink => self.new_class_link(),
            ClientMessage::Invite { name } => self.invite(name),
            ClientMessage::RemoveFollower { follower } => self.remove_follower(follower),
            ClientMessage::JoinClass { link } => self.join_class(link),
            ClientMessage::LeaveClass => self.leave_class().await,
        }
    }

    /// The welcome, once the page speaks this server's protocol. A viewer's first `hello`
    /// fixes the learner it launches as; a later one may not change it.
    async fn hello(&mut self, version: u32, learner_key: Option<LearnerKey>) -> Answer {
        if version != PROTOCOL_VERSION {
            let message = format!("this server speaks protocol version {PROTOCOL_VERSION}, the page {version}: reload the page");
            return Err(ErrorReport::new(ErrorCode::VersionMismatch, message));
        }
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
    async fn learner_for(&self, key: Option<LearnerKey>) -> Option<LearnerIdentity> {
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
