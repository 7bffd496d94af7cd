//! Runs as this page knows them: the server's records, and for every run the page watches its
//! metric series and log tail, streamed over the WebSocket. Each stream remembers the last
//! sequence numbers it holds, so after a reconnection it asks for exactly what it missed.
//!
//! The runs charted together ("overlaid") are kept in localStorage, so a reload (or the next
//! day's session) reopens them.

mod learner;
mod stream;

pub use learner::Whose;
#[cfg(test)]
pub use learner::record as test_record;
pub use stream::{RunStream, start_wall};

use std::collections::HashMap;

use leptos::prelude::*;
use scalebook_shared::protocol::{
    Audience, ClassState, ClientMessage, ClientRequest, ErrorCode, ErrorReport, Follower, LaunchRequest, Learner, LearnerRuns,
    PROTOCOL_VERSION, Presentation, RunId, RunRecord, Secret, ServerInfo, ServerMessage, ServerReply, run_list,
};
use send_wrapper::SendWrapper;

use crate::net::urls;
use crate::net::ws::{ConnectionState, Socket};
use scalebook_page::requests::Requests;

const CHARTED_KEY: &str = "scalebook-charted-runs";
const NAMES_KEY: &str = "scalebook-run-names";

pub use scalebook_page::requests::Answer;
use scalebook_page::runs::list;
use scalebook_page::runs::names::{self, RunName, RunNames};
pub use scalebook_page::runs::whose::from_class;

use crate::routing::slug_from_hash;
use crate::storage;

/// The page's runs; provided as context by the app.
#[derive(Clone, Copy)]
pub struct Runs {
    /// The runs the server sent, in the order of their ids (oldest first): the instructor's and
    /// this page's own whole, other learners' runs as far back as the page asked.
    pub records: RwSignal<Vec<RunRecord>>,
    /// How many other learners' runs are older than those in `records` (see
    /// [`Runs::show_older`]).
    pub older: RwSignal<u64>,
    /// The runs drawn on the charts, in the order their colours are assigned.
    pub charted: RwSignal<Vec<RunId>>,
    pub connection: RwSignal<ConnectionState>,
    pub server: RwSignal<Option<ServerInfo>>,
    /// The last error the server reported that no block asked for.
    pub notice: RwSignal<Option<String>>,
    /// What the instructor presents now (see `classroom`).
    pub presentation: RwSignal<Option<Presentation>>,
    /// Whether the page that presents is connected (`false`: it left; the presentation stands
    /// still until it comes back).
    pub presenter_connected: RwSignal<bool>,
    /// How many watch and follow (told to an instructor's page).
    pub audience: RwSignal<Audience>,
    /// The link learners join this server's class with (told to an instructor's page; `None`:
    /// this server has no class listener).
    pub class_link: RwSignal<Option<Secret>>,
    /// Why this server's class listener does not listen now (its port taken), while it tries
    /// again (told to an instructor's page; `None`: it listens, or there is none).
    pub class_unbound: RwSignal<Option<String>>,
    /// The follower servers in this server's class (told to an instructor's page).
    pub roster: RwSignal<Vec<Follower>>,
    /// How many of them came without their runs (the roster is bounded in bytes).
    pub roster_withheld: RwSignal<u32>,
    /// The invitations this page made, newest last: each learner's name and class link.
    pub invitations: RwSignal<Vec<(String, Secret)>>,
    /// Where this server stands with the class it follows.
    pub class: RwSignal<ClassState>,
    /// When Slurm last answered the server's poll, with the server's time then (its
    /// heartbeat's): how old every Slurm run's state is.
    pub slurm_at: RwSignal<Option<(f64, f64)>>,
    /// What this page remembers of the runs it launched (kept in localStorage): the chapter
    /// each came from, and a sweep variant's name.
    pub names: RwSignal<RunNames>,
    /// The names of launches not yet answered, by ticket.
    naming: StoredValue<HashMap<u64, RunName>>,
    answers: RwSignal<HashMap<u64, Answer>>,
    /// Launches and previews waiting for their answer, matched by request id.
    requests: StoredValue<Requests>,
    streams: StoredValue<HashMap<RunId, RunStream>>,
    socket: StoredValue<Option<SendWrapper<Socket>>>,
}

impl Runs {
    /// Creates the store and opens the connection; the static edition has no server to
    /// connect to, and stays unconnected (its blocks that need one say so instead).
    pub fn start() -> Runs {
        let runs = Runs::unconnected();
        if crate::edition::is_static() {
            return runs;
        }
        for id in runs.charted.get_untracked() {
            runs.watch(&id);
        }
        let socket = Socket::start(urls::websocket(), runs.connection, move || runs.connected(), move |m| runs.handle(m));
        runs.socket.set_value(Some(SendWrapper::new(socket)));
        runs
    }

    /// The store before its connection opens (also what component tests chart with).
    pub(crate) fn unconnected() -> Runs {
        Runs {
            records: RwSignal::new(Vec::new()),
            older: RwSignal::new(0),
            charted: RwSignal::new(load_charted()),
            connection: RwSignal::new(ConnectionState::Connecting),
            server: RwSignal::new(None),
            notice: RwSignal::new(None),
            presentation: RwSignal::new(None),
            presenter_connected: RwSignal::new(true),
            audience: RwSignal::new(Audience::default()),
            class_link: RwSignal::new(None),
            class_unbound: RwSignal::new(None),
            roster: RwSignal::new(Vec::new()),
            roster_withheld: RwSignal::new(0),
            invitations: RwSignal::new(Vec::new()),
            class: RwSignal::new(ClassState::Alone),
            slurm_at: RwSignal::new(None),
            names: RwSignal::new(storage::load_json(NAMES_KEY).unwrap_or_default()),
            naming: StoredValue::new(HashMap::new()),
            answers: RwSignal::new(HashMap::new()),
            requests: StoredValue::new(Requests::default()),
            streams: StoredValue::new(HashMap::new()),
            socket: StoredValue::new(None),
        }
    }

    /// Sends a message whose answer (if any) nobody waits for.
    pub fn send(&self, message: &ClientMessage) -> bool {
        self.send_request(&ClientRequest { id: None, message: message.clone() })
    }

    fn send_request(&self, request: &ClientRequest) -> bool {
        self.socket.with_value(|s| s.as_ref().is_some_and(|s| s.send(request)))
    }

    /// After every (re)connection: introduce ourselves, fetch the run list, and resume every
    /// stream from where it stopped.
    fn connected(&self) {
        // The token goes first, in the message (the socket's URL carries none); a viewer's page
        // also presents the key of its earlier visits, so its runs stay its own.
        let token = urls::token().map(Secret);
        self.send(&ClientMessage::Hello { version: PROTOCOL_VERSION, token, learner_key: learner::load_key() });
        self.send(&ClientMessage::ListRuns { before: None });
        let resume: Vec<ClientMessage> =
            self.streams.with_value(|streams| streams.iter().map(|(id, stream)| stream.subscribe_message(id)).collect());
        for message in resume {
            self.send(&message);
        }
        // A request whose answer the old socket never delivered will not get one.
        let lost = self.requests.try_update_value(|r| r.abandon_all()).unwrap_or_default();
        for ticket in lost {
            let report = ErrorReport::new(ErrorCode::Internal, "the connection dropped before the server answered: check the run list");
            self.answers.update(|a| {
                a.insert(ticket, Answer::Refused(report.clone()));
            });
        }
    }

    /// The stream of run `id`, subscribing to it the first time.
    pub fn watch(&self, id: &RunId) -> RunStream {
        if let Some(stream) = self.stream(id) {
            return stream;
        }
        let stream = RunStream::new();
        self.streams.update_value(|s| {
            s.insert(id.clone(), stream.clone());
        });
        self.send(&stream.subscribe_message(id));
        stream
    }

    pub fn stream(&self, id: &RunId) -> Option<RunStream> {
        self.streams.with_value(|s| s.get(id).cloned())
    }

    pub fn record(&self, id: &RunId) -> Option<RunRecord> {
        self.records.with(|records| records.iter().find(|r| &r.id == id).cloned())
    }

    /// Sends a launch from the chapter on screen; the answer appears under the returned ticket
    /// in [`Runs::answer`], and the run is charted in that chapter.
    pub fn launch(&self, request: LaunchRequest) -> Result<u64, String> {
        self.launch_in(request, None, slug_from_hash(&window().location().hash().unwrap_or_default()))
    }

    /// [`Runs::launch`] from `chapter`, whichever is on screen, of a run the charts' legends
    /// call `name` (a sweep's variant: the sweep goes on while the learner reads another).
    pub fn launch_in(&self, request: LaunchRequest, name: Option<String>, chapter: Option<String>) -> Result<u64, String> {
        let ticket = self.request(&ClientMessage::Launch(request))?;
        self.naming.update_value(|n| {
            n.insert(ticket, RunName { chapter, name });
        });
        Ok(ticket)
    }

    /// Asks for the batch script a Slurm launch would submit (answered like a launch).
    pub fn preview_slurm(&self, request: LaunchRequest) -> Result<u64, String> {
        self.request(&ClientMessage::PreviewSlurm(request))
    }

    fn request(&self, message: &ClientMessage) -> Result<u64, String> {
        let Some((ticket, id)) = self.requests.try_update_value(|r| r.open()) else {
            return Err("the page is closing".into());
        };
        if self.send_request(&ClientRequest { id: Some(id), message: message.clone() }) {
            Ok(ticket)
        } else {
            self.requests.update_value(|r| r.forget(ticket));
            Err("not connected to the server: wait for the indicator to say connected".into())
        }
    }

    /// Whether this page's link may launch any run anywhere, and cancel any (reactive): the
    /// instructor's. A learner's narrower rights are [`Runs::learner_runs`]. The server
    /// decides and enforces both; the page only hides what would be refused. Until the
    /// server's `welcome` says, the controls show: a viewer's page learns it is one within a
    /// moment.
    pub fn may_launch(&self) -> bool {
        self.server.with(|server| server.as_ref().is_none_or(|info| info.role.may_launch()))
    }

    /// What this page may launch as a learner (reactive): on a viewer's page, when the
    /// instructor lets learners launch, the learner configs and how many runs at once.
    pub fn learner_runs(&self) -> Option<LearnerRuns> {
        self.server.with(|server| {
            let info = server.as_ref().filter(|info| !info.role.may_launch() && info.learner.is_some())?;
            (info.learner_runs.per_learner > 0).then(|| info.learner_runs.clone())
        })
    }

    /// This page's learner (a viewer's page, once welcomed; reactive).
    pub fn learner(&self) -> Option<Learner> {
        self.server.with(|server| server.as_ref()?.learner.as_ref().map(|identity| identity.learner.clone()))
    }

    fn learner_untracked(&self) -> Option<Learner> {
        self.server.with_untracked(|server| server.as_ref()?.learner.as_ref().map(|identity| identity.learner.clone()))
    }

    /// Whose `record` is, seen from this page (reactive).
    pub fn whose(&self, record: &RunRecord) -> Whose {
        Whose::of(record, self.learner().as_ref(), self.may_launch())
    }

    /// Whether this page may cancel `record` (reactive): the instructor's any, a learner their
    /// own; nobody here a run of the class this server follows (it trains on the class
    /// instructor's side, and only they can stop it).
    pub fn may_cancel(&self, record: &RunRecord) -> bool {
        !from_class(record) && (self.may_launch() || (self.learner_runs().is_some() && self.whose(record) == Whose::Yours))
    }

    /// How many of this learner's runs are queued or running (reactive).
    pub fn learner_runs_in_use(&self) -> usize {
        let me = self.learner();
        self.records.with(|records| records.iter().filter(|r| !r.state().is_final() && me.is_some() && r.learner == me).count())
    }

    /// Every run as the run lists show them (reactive): this learner's own first, then the
    /// rest, newest first within each.
    pub fn listed(&self) -> Vec<RunRecord> {
        learner::own_first(self.records.get(), self.learner().as_ref(), self.may_launch())
    }

    /// Asks for the next page of older runs of other learners (see [`Runs::older`]).
    pub fn show_older(&self) -> bool {
        let me = self.learner_untracked();
        let before = self.records.with_untracked(|records| run_list::oldest_paged(records.iter(), me.as_ref()).cloned());
        before.is_some() && self.send(&ClientMessage::ListRuns { before })
    }

    pub fn answer(&self, ticket: u64) -> Option<Answer> {
        self.answers.with(|a| a.get(&ticket).cloned())
    }

    pub fn cancel(&self, id: &RunId) -> bool {
        self.send(&ClientMessage::Cancel { run: id.clone() })
    }

    /// Asks the server to go on with an ended run from its last checkpoint.
    pub fn resume(&self, id: &RunId) -> bool {
        self.send(&ClientMessage::Resume { run: id.clone() })
    }

    /// Charts run `id` (or stops), by hand: a run charted so shows in every chapter's charts.
    pub fn set_charted(&self, id: &RunId, on: bool) {
        if on && self.names.with_untracked(|n| n.get(id).is_some_and(|n| n.chapter.is_some())) {
            self.names.update(|n| {
                if let Some(name) = n.get_mut(id) {
                    name.chapter = None;
                }
            });
            storage::keep_json(NAMES_KEY, &self.names.get_untracked());
        }
        self.chart(id, on);
    }

    fn chart(&self, id: &RunId, on: bool) {
        if on {
            self.watch(id);
        }
        self.charted.update(|charted| {
            charted.retain(|c| c != id);
            if on {
                charted.push(id.clone());
            }
        });
        save_charted(&self.charted.get_untracked());
    }

    fn handle(&self, reply: ServerReply) {
        // The request this answers, if it is one this page waits on.
        let ticket = reply.id.as_ref().and_then(|id| self.requests.try_update_value(|r| r.settle(id)).flatten());
        let answer = |answer: Answer| {
            if let Some(ticket) = ticket {
                self.answers.update(|a| {
                    a.insert(ticket, answer);
                });
            }
        };
        match reply.message {
            ServerMessage::Welcome { server, .. } => {
                if let Some(identity) = &server.learner {
                    learner::save_key(&identity.key);
                }
                self.server.set(Some(server));
            }
            ServerMessage::Runs { runs, older, before } => {
                match before {
                    None => self.records.set(runs),
                    Some(_) => self.records.update(|records| list::merge_older(records, runs)),
                }
                self.older.set(older);
            }
            ServerMessage::RunUpdate { run } => {
                let (me, older) = (self.learner_untracked(), self.older.get_untracked());
                self.records.update(|records| list::apply_update(records, run, me.as_ref(), older));
            }
            ServerMessage::Launched { run } => {
                if let Some(name) = ticket.and_then(|t| self.naming.try_update_value(|n| n.remove(&t)).flatten()) {
                    self.names.update(|names| names::remember(names, run.clone(), name));
                    storage::keep_json(NAMES_KEY, &self.names.get_untracked());
                }
                self.chart(&run, true);
                answer(Answer::Launched(run));
            }
            ServerMessage::SlurmScript { script } => answer(Answer::Script(script)),
            ServerMessage::History { run, upto_seq, series } => {
                if let Some(stream) = self.stream(&run) {
                    stream.replace_history(upto_seq, series);
                }
            }
            ServerMessage::Points { run, points } => {
                if let Some(stream) = self.stream(&run) {
                    stream.add_points(points);
                }
            }
            ServerMessage::LogLines { run, lines } => {
                if let Some(stream) = self.stream(&run) {
                    stream.add_log(lines);
                }
            }
            ServerMessage::Error(report) if ticket.is_some() => answer(Answer::Refused(report)),
            ServerMessage::Error(report) => self.error(report),
            ServerMessage::Presenting { presentation } => self.presentation.set(presentation),
            ServerMessage::Presenter { connected } => self.presenter_connected.set(connected),
            ServerMessage::Audience(audience) => self.audience.set(audience),
            ServerMessage::ClassLink { link, unbound } => {
                self.class_link.set(link);
                self.class_unbound.set(unbound);
            }
            ServerMessage::Roster { followers, withheld } => {
                self.roster.set(followers);
                self.roster_withheld.set(withheld);
            }
            ServerMessage::Invitation { name, link } => self.invitations.update(|made| {
                made.retain(|(earlier, _)| *earlier != name);
                made.push((name, link));
            }),
            ServerMessage::Class(state) => self.class.set(state),
            // A page is never a follower server: a class listener asks no page for runs.
            ServerMessage::Heartbeat { time, slurm_at } => self.slurm_at.set(slurm_at.map(|at| (time, at))),
            ServerMessage::Pong { .. } | ServerMessage::ShareRun { .. } => {}
        }
    }

    /// The page got a token after it opened (its link pasted into the tab): a socket the
    /// server refused connects again with it.
    pub fn token_arrived(&self) {
        self.notice.set(None);
        self.socket.with_value(|socket| {
            if let Some(socket) = socket {
                socket.try_again();
            }
        });
    }

    /// An error that answers no waiting request: about a run, or for the page as a whole.
    fn error(&self, report: ErrorReport) {
        if report.code == ErrorCode::Unauthorized {
            // The same token would be refused again: stop, and say what to open instead.
            self.socket.with_value(|socket| {
                if let Some(socket) = socket {
                    socket.give_up();
                }
            });
            self.notice.set(Some(format!(
                "The server did not accept this page's access token, so nothing live can load: {}.",
                urls::UNAUTHORIZED_HINT
            )));
            return;
        }
        if let (ErrorCode::UnknownRun, Some(run)) = (report.code, &report.run) {
            // A charted run that is gone (its directory was removed): stop asking for it.
            self.streams.update_value(|s| {
                s.remove(run);
            });
            if self.charted.with_untracked(|c| c.contains(run)) {
                self.set_charted(run, false);
            }
        }
        self.notice.set(Some(report.message));
    }
}

fn load_charted() -> Vec<RunId> {
    let ids: Vec<String> = storage::load_json(CHARTED_KEY).unwrap_or_default();
    ids.iter().filter_map(|id| RunId::parse(id).ok()).collect()
}

fn save_charted(ids: &[RunId]) {
    storage::keep_json(CHARTED_KEY, &ids);
}

#[cfg(test)]
mod tests {
    use scalebook_shared::Problems;
    use scalebook_shared::protocol::RequestId;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    fn reply(id: Option<&str>, message: ServerMessage) -> ServerReply {
        ServerReply::answer(id.map(|id| RequestId::parse(id).unwrap()), message)
    }

    /// What the server sends for two launches in flight and a burst that trips its rate
    /// limit (the same exchange `serve/security.rs` runs against a real server): every answer
    /// lands on its own request, and the flood's errors on none.
    #[wasm_bindgen_test]
    fn two_launches_and_a_rate_limited_burst_each_answer_their_own_request() {
        let runs = Runs::unconnected();
        let (first, first_id) = runs.requests.try_update_value(Requests::open).unwrap();
        let (second, second_id) = runs.requests.try_update_value(Requests::open).unwrap();
        let limited = || ServerMessage::Error(ErrorReport::new(ErrorCode::RateLimited, "too many messages"));
        let mut problems = Problems::default();
        problems.push("num_iters", "expected a whole number");
        let refusal = ErrorReport::new(ErrorCode::InvalidLaunch, "the launch was refused").with_problems(problems);
        let run = RunId::parse("20261122-100000-1").unwrap();
        for answer in [
            reply(None, limited()),
            reply(Some("ping-7"), limited()),
            reply(Some(second_id.as_str()), ServerMessage::Error(refusal.clone())),
            reply(Some("ping-8"), limited()),
            reply(Some(first_id.as_str()), ServerMessage::Launched { run: run.clone() }),
            reply(Some("ping-9"), ServerMessage::Pong { nonce: 9 }),
        ] {
            runs.handle(answer);
        }
        assert_eq!(runs.answer(first), Some(Answer::Launched(run)));
        assert_eq!(runs.answer(second), Some(Answer::Refused(refusal)));
        // The flood is the page's notice, never a launch's refusal.
        assert_eq!(runs.notice.get_untracked().as_deref(), Some("too many messages"));
        assert_eq!(runs.answers.with_untracked(HashMap::len), 2);
    }
}
