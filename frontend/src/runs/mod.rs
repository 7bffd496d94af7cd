//! Runs as this page knows them: the server's records, and for every run the page watches its
//! metric series and log tail, streamed over the WebSocket. Each stream remembers the last
//! sequence numbers it holds, so after a reconnection it asks for exactly what it missed.
//!
//! The runs charted together ("overlaid") are kept in localStorage, so a reload (or the next
//! day's session) reopens them.

mod stream;

pub use stream::{RunStream, start_wall};

use std::collections::{HashMap, VecDeque};

use leptos::prelude::*;
use scalebook_shared::protocol::{
    ClientMessage, ErrorCode, ErrorReport, LaunchRequest, PROTOCOL_VERSION, RunId, RunRecord, ServerInfo, ServerMessage,
};
use send_wrapper::SendWrapper;

use crate::net::urls;
use crate::net::ws::{ConnectionState, Socket};

const CHARTED_KEY: &str = "scalebook-charted-runs";

/// The server's answer to a launch or a Slurm preview.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Launched(RunId),
    /// The batch script a Slurm launch would submit.
    Script(String),
    Refused(ErrorReport),
}

/// The page's runs; provided as context by the app.
#[derive(Clone, Copy)]
pub struct Runs {
    /// Every run the server has, oldest first.
    pub records: RwSignal<Vec<RunRecord>>,
    /// The runs drawn on the charts, in the order their colours are assigned.
    pub charted: RwSignal<Vec<RunId>>,
    pub connection: RwSignal<ConnectionState>,
    pub server: RwSignal<Option<ServerInfo>>,
    /// The last error the server reported that no block asked for.
    pub notice: RwSignal<Option<String>>,
    answers: RwSignal<HashMap<u64, Answer>>,
    /// Tickets of launches and previews waiting for their answer; the server answers each
    /// in the order they were sent.
    pending: StoredValue<VecDeque<u64>>,
    next_ticket: StoredValue<u64>,
    streams: StoredValue<HashMap<RunId, RunStream>>,
    socket: StoredValue<Option<SendWrapper<Socket>>>,
}

impl Runs {
    /// Creates the store and opens the connection.
    pub fn start() -> Runs {
        let runs = Runs {
            records: RwSignal::new(Vec::new()),
            charted: RwSignal::new(load_charted()),
            connection: RwSignal::new(ConnectionState::Connecting),
            server: RwSignal::new(None),
            notice: RwSignal::new(None),
            answers: RwSignal::new(HashMap::new()),
            pending: StoredValue::new(VecDeque::new()),
            next_ticket: StoredValue::new(1),
            streams: StoredValue::new(HashMap::new()),
            socket: StoredValue::new(None),
        };
        for id in runs.charted.get_untracked() {
            runs.watch(&id);
        }
        let socket = Socket::start(urls::websocket(), runs.connection, move || runs.connected(), move |m| runs.handle(m));
        runs.socket.set_value(Some(SendWrapper::new(socket)));
        runs
    }

    fn send(&self, message: &ClientMessage) -> bool {
        self.socket.with_value(|s| s.as_ref().is_some_and(|s| s.send(message)))
    }

    /// After every (re)connection: introduce ourselves, fetch the run list, and resume every
    /// stream from where it stopped.
    fn connected(&self) {
        self.send(&ClientMessage::Hello { version: PROTOCOL_VERSION });
        self.send(&ClientMessage::ListRuns);
        let resume: Vec<ClientMessage> =
            self.streams.with_value(|streams| streams.iter().map(|(id, stream)| stream.subscribe_message(id)).collect());
        for message in resume {
            self.send(&message);
        }
        // A request whose answer the old socket never delivered will not get one.
        let lost: Vec<u64> = self.pending.try_update_value(std::mem::take).unwrap_or_default().into();
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

    /// Sends a launch; the answer appears under the returned ticket in [`Runs::answer`].
    pub fn launch(&self, request: LaunchRequest) -> Result<u64, String> {
        self.request(&ClientMessage::Launch(request))
    }

    /// Asks for the batch script a Slurm launch would submit (answered like a launch).
    pub fn preview_slurm(&self, request: LaunchRequest) -> Result<u64, String> {
        self.request(&ClientMessage::PreviewSlurm(request))
    }

    fn request(&self, message: &ClientMessage) -> Result<u64, String> {
        let ticket = self.next_ticket.get_value();
        self.next_ticket.set_value(ticket + 1);
        self.pending.update_value(|p| p.push_back(ticket));
        if self.send(message) {
            Ok(ticket)
        } else {
            self.pending.update_value(|p| p.retain(|t| *t != ticket));
            Err("not connected to the server: wait for the indicator to say connected".into())
        }
    }

    pub fn answer(&self, ticket: u64) -> Option<Answer> {
        self.answers.with(|a| a.get(&ticket).cloned())
    }

    pub fn cancel(&self, id: &RunId) -> bool {
        self.send(&ClientMessage::Cancel { run: id.clone() })
    }

    pub fn set_charted(&self, id: &RunId, on: bool) {
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

    fn handle(&self, message: ServerMessage) {
        match message {
            ServerMessage::Welcome { server, .. } => self.server.set(Some(server)),
            ServerMessage::Runs { runs } => self.records.set(runs),
            ServerMessage::RunUpdate { run } => self.records.update(|records| match records.iter_mut().find(|r| r.id == run.id) {
                Some(known) => *known = run,
                None => records.push(run),
            }),
            ServerMessage::Launched { run } => {
                self.set_charted(&run, true);
                self.answer_next(Answer::Launched(run));
            }
            ServerMessage::SlurmScript { script } => {
                self.answer_next(Answer::Script(script));
            }
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
            ServerMessage::Error(report) => self.error(report),
            ServerMessage::Pong { .. } | ServerMessage::Heartbeat { .. } => {}
        }
    }

    /// Gives the oldest waiting request its answer; `false` when none was waiting.
    fn answer_next(&self, answer: Answer) -> bool {
        let Some(ticket) = self.pending.try_update_value(|p| p.pop_front()).flatten() else { return false };
        self.answers.update(|a| {
            a.insert(ticket, answer);
        });
        true
    }

    fn error(&self, report: ErrorReport) {
        // Errors about a run name it; of the others, only `hello` has its own (version
        // mismatch), so the rest answer the oldest launch or preview.
        let about_request = report.run.is_none() && report.code != ErrorCode::VersionMismatch;
        if about_request && self.answer_next(Answer::Refused(report.clone())) {
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

fn local_storage() -> Option<web_sys::Storage> {
    window().local_storage().ok().flatten()
}

fn load_charted() -> Vec<RunId> {
    let text = local_storage().and_then(|s| s.get_item(CHARTED_KEY).ok().flatten()).unwrap_or_default();
    let ids: Vec<String> = serde_json::from_str(&text).unwrap_or_default();
    ids.iter().filter_map(|id| RunId::parse(id).ok()).collect()
}

fn save_charted(ids: &[RunId]) {
    if let (Some(storage), Ok(text)) = (local_storage(), serde_json::to_string(ids)) {
        let _ = storage.set_item(CHARTED_KEY, &text);
    }
}
