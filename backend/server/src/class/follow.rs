//! A learner's server following a class: one WebSocket to the instructor's class listener
//! (TLS, its certificate pinned to the class link's fingerprint, the follower token in the
//! upgrade's `Authorization` header), relaying to this server's own pages what the instructor
//! presents and copying the instructor's runs here ([`Mirror`]), so that every page of this
//! server lists, charts and resumes them as it does its own runs. The learner's own runs stay
//! theirs: launched here, never sent upstream, unless the learner shares them: then the roster
//! shows their summaries, and the points of those the instructor charts go up ([`sharing`]).
//!
//! A lost connection is retried with backoff and resumes every run from the lines its copy
//! holds, so no point is lost or repeated. So is a class port that answers with a certificate
//! that is not the link's: someone else holds the port while the instructor's Scalebook is
//! down, and the pinned certificate keeps them out until the instructor's is back, so the room
//! comes back by itself (the learner's page shows what the last attempt met). A refusal that
//! retrying cannot mend (a token no longer accepted, a removal) stops the following and says
//! what to do.

mod mirror;
mod sharing;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use scalebook_shared::metrics::tags;
use scalebook_shared::protocol::{
    ClassLink, ClassState, ClientMessage, ErrorReport, Introduction, MAX_FOLLOWER_NAME_LEN, MAX_SUMMARISED_RUNS, PROTOCOL_VERSION,
    RunSummary, ServerMessage, ServerReply, follower_name_ok,
};
use scalebook_shared::rundir;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};

use self::mirror::Mirror;
use self::sharing::Sharing;
use super::tls::{self, Unreached};
use super::{CLOSE_DISMISSED, backoff};
use crate::Error;
use crate::classroom::Classroom;
use crate::runs::{RunManager, is_class_run};
use crate::store;

/// How often the learner's run summaries are looked at (and sent, when they changed).
const SUMMARY_PERIOD: Duration = Duration::from_secs(3);
/// How often the follower pings: the class listener drops connections silent both ways.
const PING_PERIOD: Duration = Duration::from_secs(20);
/// How much of the end of a run's metrics file its summary reads.
const SUMMARY_TAIL_BYTES: u64 = 16 << 10;
/// The file in the runs directory that keeps the class link a page joined with (private to
/// this server's user: the link holds the follower token), so a restart follows it again.
/// Not a run id (it starts with a dot), so the run store never takes it for one.
pub const KEPT_LINK: &str = ".class-link";

type Socket = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tls::Wire>>;

/// Who this server is to the class.
#[derive(Debug, Clone)]
pub struct Me {
    /// The name on the instructor's roster.
    pub name: String,
    /// Whether the instructor's roster shows this learner's own runs.
    pub share_runs: bool,
}

impl Me {
    /// `given` (`--class-name`), else the Unix user, made into a name the roster takes.
    pub fn new(given: Option<&str>, share_runs: bool) -> Me {
        let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_default();
        let raw = given.map(str::to_owned).unwrap_or(user);
        let cleaned: String = raw
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-') { c } else { '-' })
            .skip_while(|c| !c.is_ascii_alphanumeric())
            .take(MAX_FOLLOWER_NAME_LEN)
            .collect();
        let name = if follower_name_ok(&cleaned) { cleaned } else { "learner".to_owned() };
        Me { name, share_runs }
    }
}

/// The class this server follows (at most one at a time).
pub struct Following {
    runs: Arc<RunManager>,
    classroom: Arc<Classroom>,
    me: Me,
    state: watch::Sender<ClassState>,
    /// The link of the class followed now, and the task following it.
    following: Mutex<Option<(ClassLink, JoinHandle<()>)>>,
}

/// How a connection to the class ended.
enum Ended {
    /// Worth trying again (after `joined`, from the first backoff).
    Lost { why: String, joined: bool },
    /// Not worth trying again: the reason, for the learner.
    Refused(String),
}

fn lost(why: impl Into<String>) -> Ended {
    Ended::Lost { why: why.into(), joined: false }
}

impl Following {
    pub fn new(runs: Arc<RunManager>, classroom: Arc<Classroom>, me: Me) -> Arc<Following> {
        Arc::new(Following { runs, classroom, me, state: watch::Sender::new(ClassState::Alone), following: Mutex::default() })
    }

    /// This server's runs, the class's copies among them.
    pub fn runs(&self) -> &Arc<RunManager> {
        &self.runs
    }

    /// Where this server stands with its class, now and at every change.
    pub fn states(&self) -> watch::Receiver<ClassState> {
        self.state.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(ClassLink, JoinHandle<()>)>> {
        self.following.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The link of the class this server follows, if it follows one.
    pub fn link(&self) -> Option<ClassLink> {
        self.lock().as_ref().map(|(link, _)| link.clone())
    }

    /// Follows the class of `link` (instead of any other), as the page asked: the link is kept,
    /// so this server follows it again after a restart (until it leaves).
    pub fn join_and_keep(self: &Arc<Self>, link: ClassLink) {
        if let Err(e) = tls::write_private(&self.kept(), link.to_string().as_bytes()) {
            tracing::warn!("the class link is not kept for the next start: {e}");
        }
        self.join(link);
    }

    /// The class link a page joined with before this server last stopped, if it did not leave.
    pub fn kept_link(&self) -> Option<ClassLink> {
        let text = std::fs::read_to_string(self.kept()).ok()?;
        ClassLink::parse(&text).map_err(|problems| tracing::warn!("the kept class link is not one ({problems}): ignored")).ok()
    }

    fn kept(&self) -> std::path::PathBuf {
        self.runs.store().dir().join(KEPT_LINK)
    }

    /// Follows the class of `link` (instead of any other).
    pub fn join(self: &Arc<Self>, link: ClassLink) {
        tracing::info!(address = %link.address(), "joining a class");
        let task = tokio::spawn(self.clone().follow(link.clone()));
        if let Some((_, previous)) = self.lock().replace((link, task)) {
            previous.abort();
        }
    }

    /// Stops following: the instructor's presentation no longer stands here, nor after a
    /// restart.
    pub async fn leave(&self) {
        if let Err(e) = std::fs::remove_file(self.kept())
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("the kept class link could not be removed: {e}");
        }
        let taken = self.lock().take();
        if let Some((_, task)) = taken {
            task.abort();
        }
        self.state.send_replace(ClassState::Alone);
        self.classroom.present(None, None);
        self.runs.class_left().await;
    }

    async fn follow(self: Arc<Self>, link: ClassLink) {
        let address = link.address();
        let mut mirror = Mirror::new(self.runs.clone(), address.clone());
        let (mut attempt, mut warning) = (0u32, None);
        loop {
            self.state.send_replace(ClassState::Connecting { address: address.clone(), attempt, warning: warning.take() });
            let ended = self.session(&link, &mut mirror).await;
            self.runs.class_left().await;
            match ended {
                Ended::Refused(reason) => {
                    tracing::warn!(%address, "the class refused this server: {reason}");
                    self.classroom.present(None, None);
                    self.state.send_replace(ClassState::Refused { address, reason });
                    return;
                }
                Ended::Lost { why, joined } => {
                    attempt = if joined { 1 } else { attempt.saturating_add(1) };
                    tracing::info!(%address, attempt, "the class is out of reach: {why}");
                    tokio::time::sleep(backoff(attempt)).await;
                    warning = Some(why);
                }
            }
        }
    }

    /// One connection to the class listener, until it ends.
    async fn session(&self, link: &ClassLink, mirror: &mut Mirror) -> Ended {
        let mut socket = match connect(link).await {
            Ok(socket) => socket,
            Err(ended) => return ended,
        };
        self.state.send_replace(ClassState::Joined { address: link.address() });
        mirror.reconnected();
        let end = |why: String| Ended::Lost { why, joined: true };
        let mut audiences = self.classroom.audiences();
        let mut following = None;
        let mut introduced = None;
        let mut summaries = tokio::time::interval(SUMMARY_PERIOD);
        let mut pings = tokio::time::interval_at(tokio::time::Instant::now() + PING_PERIOD, PING_PERIOD);
        let mut sharing = Sharing::new(self.runs.clone(), self.me.share_runs);
        for message in
            [ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None }, ClientMessage::ListRuns { before: None }]
        {
            if let Err(e) = send(&mut socket, &message).await {
                return end(e.to_string());
            }
        }
        loop {
            let outgoing = tokio::select! {
                frame = socket.next() => match frame {
                    Some(Ok(Message::Text(text))) => match self.receive(text.as_str(), mirror, &mut sharing).await {
                        Ok(replies) => replies,
                        Err(e) => return end(e.to_string()),
                    },
                    Some(Ok(Message::Close(frame))) => return closed(frame),
                    Some(Ok(_)) => vec![],
                    Some(Err(e)) => return end(e.to_string()),
                    None => return end("the class listener closed the connection".into()),
                },
                changed = audiences.changed() => {
                    if changed.is_err() {
                        return end("this server is stopping".into());
                    }
                    let now = audiences.borrow_and_update().following > 0;
                    match following.replace(now) {
                        Some(before) if before == now => vec![],
                        _ => vec![ClientMessage::Follow { following: now }],
                    }
                }
                _ = summaries.tick() => {
                    let introduction = self.introduction().await;
                    match introduced.as_ref() == Some(&introduction) {
                        true => vec![],
                        false => vec![ClientMessage::Introduce(introduced.insert(introduction).clone())],
                    }
                }
                _ = pings.tick() => vec![ClientMessage::Ping { nonce: 0 }],
                shared = sharing.next() => vec![shared],
            };
            for message in outgoing {
                if let Err(e) = send(&mut socket, &message).await {
                    return end(e.to_string());
                }
            }
        }
    }

    /// Handles one message from the class listener; returns what to send back.
    async fn receive(&self, text: &str, mirror: &mut Mirror, sharing: &mut Sharing) -> Result<Vec<ClientMessage>, Error> {
        let reply: ServerReply = serde_json::from_str(text)
            .map_err(|e| Error::ClassLink(format!("the class listener sent what this server cannot read: {e}")))?;
        Ok(match reply.message {
            ServerMessage::Runs { runs, .. } => {
                let mut subscribe = Vec::new();
                for run in runs {
                    subscribe.extend(mirror.adopt(run).await?);
                }
                subscribe
            }
            ServerMessage::RunUpdate { run } => mirror.adopt(run).await?.into_iter().collect(),
            ServerMessage::Points { run, points } => {
                mirror.points(&run, points).await?;
                vec![]
            }
            ServerMessage::LogLines { run, lines } => {
                mirror.log(&run, lines).await?;
                vec![]
            }
            ServerMessage::History { run, .. } => mirror.restart(&run).await?.into_iter().collect(),
            ServerMessage::Presenting { presentation } => {
                // (This server has no class listener of its own to pass it on to.)
                let presentation = presentation.map(|p| mirror.localise(p));
                self.classroom.present(presentation.clone(), presentation);
                vec![]
            }
            ServerMessage::Presenter { connected } => {
                self.classroom.presenter_connected(connected);
                vec![]
            }
            ServerMessage::ShareRun { run, after } => {
                if let Err(refused) = sharing.ask(run, after).await {
                    tracing::warn!("{refused}");
                }
                vec![]
            }
            ServerMessage::Error(report) => {
                tracing::warn!(code = ?report.code, "the class listener refused a message: {}", report.message);
                vec![]
            }
            _ => vec![],
        })
    }

    /// Who this server is, with its learner's runs when they are shared.
    async fn introduction(&self) -> Introduction {
        if !self.me.share_runs {
            return Introduction { name: self.me.name.clone(), runs: None };
        }
        let mut own: Vec<_> = self.runs.list().await.into_iter().filter(|r| !is_class_run(r)).collect();
        let recent = own.split_off(own.len().saturating_sub(MAX_SUMMARISED_RUNS));
        let dirs: Vec<_> = recent.iter().map(|r| self.runs.store().run_dir(&r.id).join(rundir::METRICS)).collect();
        let latest = tokio::task::spawn_blocking(move || dirs.iter().map(|path| latest_figures(path)).collect::<Vec<_>>()).await;
        let latest = latest.unwrap_or_default();
        let runs = recent
            .into_iter()
            .zip(latest.into_iter().chain(std::iter::repeat((None, None))))
            .map(|(record, (loss, samples_per_sec))| RunSummary {
                layout: record.layout.sizes(),
                config: record.config.chars().take(64).collect(),
                state: record.state(),
                id: record.id,
                loss,
                samples_per_sec,
            })
            .collect();
        Introduction { name: self.me.name.clone(), runs: Some(runs) }
    }
}

/// The latest training loss and samples per second in a metrics file (per step where the
/// run writes them, else per epoch).
fn latest_figures(metrics: &std::path::Path) -> (Option<f64>, Option<f64>) {
    let tail = store::read_tail(metrics, SUMMARY_TAIL_BYTES).unwrap_or_default();
    let points: Vec<scalebook_shared::metrics::MetricPoint> = tail.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let latest =
        |wanted: [&str; 2]| points.iter().rev().find(|p| wanted.contains(&p.tag.as_str())).map(|p| p.value).filter(|v| v.is_finite());
    (latest([tags::step::LOSS_TRAIN, tags::LOSS_TRAIN]), latest([tags::step::SAMPLES_PER_SEC, tags::SAMPLES_PER_SEC]))
}

async fn send(socket: &mut Socket, message: &ClientMessage) -> Result<(), Error> {
    let text = crate::wire::encode(message);
    socket.send(Message::text(text.as_str())).await.map_err(|e| Error::ClassLink(format!("cannot write to the class listener: {e}")))
}

/// How a close frame from the class listener ends the following.
fn closed(frame: Option<CloseFrame>) -> Ended {
    match frame {
        Some(frame) if u16::from(frame.code) == CLOSE_DISMISSED => Ended::Refused(frame.reason.to_string()),
        Some(frame) => lost(format!("the class listener closed the connection ({}: {})", u16::from(frame.code), frame.reason)),
        None => lost("the class listener closed the connection"),
    }
}

/// Reaches the class listener of `link` and opens its WebSocket, with the follower token in a
/// header (never in the URL).
async fn connect(link: &ClassLink) -> Result<Socket, Ended> {
    let tls = tls::reach(link).await.map_err(|unreached| match unreached {
        Unreached::Refused(reason) => Ended::Refused(reason),
        Unreached::Away(why) => lost(why),
    })?;
    let mut request = format!("wss://{}/api/ws", link.authority()).into_client_request().map_err(|e| Ended::Refused(e.to_string()))?;
    request.headers_mut().insert("authorization", tls::bearer(link).map_err(|e| Ended::Refused(e.to_string()))?);
    match tokio_tungstenite::client_async(request, tls).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) if response.status() == 401 => Err(Ended::Refused(
            "the class listener no longer accepts this class link (the instructor made a new one?): ask your instructor for the current link"
                .into(),
        )),
        // Who this follower is will not change by trying again (the room's link from another
        // host): the listener says what to do.
        Err(tungstenite::Error::Http(response)) if response.status() == 403 => {
            let report = response.body().as_deref().and_then(|body| serde_json::from_slice::<ErrorReport>(body).ok());
            Err(Ended::Refused(report.map_or_else(|| "the class listener refused this server".to_owned(), |r| r.message)))
        }
        Err(e) => Err(lost(format!("the class listener did not open a WebSocket: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_on_the_roster_are_made_plain() {
        assert_eq!(Me::new(Some("Ada Lovelace"), false).name, "Ada Lovelace");
        assert_eq!(Me::new(Some("  <b>x</b>"), false).name, "b-x--b-");
        assert_eq!(Me::new(Some("!!!"), false).name, "learner");
        assert_eq!(Me::new(Some(&"n".repeat(100)), false).name.len(), MAX_FOLLOWER_NAME_LEN);
    }
}
