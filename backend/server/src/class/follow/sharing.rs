//! The learner's own runs the instructor charts: when the class listener asks for one
//! (`share_run`), and the learner shares their runs (`--share-runs`), this server sends its
//! points from the line asked for on, and every point after as the run writes it
//! (`shared_points`), at most [`MESSAGES_PER_SEC`] messages a second so the class listener's
//! rate limit never drops one. Nothing else of the run (its log, its files) leaves this server.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use scalebook_shared::protocol::{ClientMessage, MAX_SHARED_POINTS, RunId, SeqPoint, ServerMessage};
use tokio::sync::{broadcast, mpsc};
use tokio::task::AbortHandle;
use tokio::time::{Interval, MissedTickBehavior};

use crate::Error;
use crate::runs::{RunManager, is_class_run};

/// How many `shared_points` messages go up a second, at most: half the class listener's rate.
const MESSAGES_PER_SEC: u64 = 10;
/// Messages waiting to go up: a run's senders wait (and read their run's files later) when
/// the connection is this far behind.
const QUEUE: usize = 16;

/// The runs this server sends up on one connection to the class listener.
pub struct Sharing {
    runs: Arc<RunManager>,
    /// Whether the learner shares their runs at all.
    allowed: bool,
    tx: mpsc::Sender<ClientMessage>,
    rx: mpsc::Receiver<ClientMessage>,
    pace: Interval,
    senders: HashMap<RunId, AbortHandle>,
}

impl Sharing {
    pub fn new(runs: Arc<RunManager>, allowed: bool) -> Sharing {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut pace = tokio::time::interval(Duration::from_millis(1000 / MESSAGES_PER_SEC));
        pace.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Sharing { runs, allowed, tx, rx, pace, senders: HashMap::new() }
    }

    /// The class listener asks for run `run` from after line `after`: its sender starts (again,
    /// from there, if it was sending). Refused, with the reason, for a run that is not the
    /// learner's own or when they do not share.
    pub async fn ask(&mut self, run: RunId, after: u64) -> Result<(), Error> {
        let refused = |rule: String| Err(Error::ClassRule { field: "run", rule });
        if !self.allowed {
            return refused(format!("the class asked for run {run}, but this learner does not share their runs (--share-runs)"));
        }
        match self.runs.record(&run).await {
            Some(record) if !is_class_run(&record) => {}
            _ => return refused(format!("the class asked for run {run}, which is not one of this learner's runs")),
        }
        let task = tokio::spawn(send_points(self.runs.clone(), run.clone(), after, self.tx.clone()));
        if let Some(previous) = self.senders.insert(run, task.abort_handle()) {
            previous.abort();
        }
        Ok(())
    }

    /// The next message to send up, when its turn in the pace comes.
    pub async fn next(&mut self) -> ClientMessage {
        self.pace.tick().await;
        match self.rx.recv().await {
            Some(message) => message,
            // This holds a sender itself, so the channel never closes while it lives.
            None => std::future::pending().await,
        }
    }
}

impl Drop for Sharing {
    fn drop(&mut self) {
        for sender in self.senders.values() {
            sender.abort();
        }
    }
}

/// Sends run `run`'s points after line `after`, then each new one, in messages of at most
/// [`MAX_SHARED_POINTS`]. A run that rewrote its metrics is sent again from its first line;
/// a sender that fell behind its run's stream reads on from where it got to.
async fn send_points(runs: Arc<RunManager>, run: RunId, mut after: u64, tx: mpsc::Sender<ClientMessage>) {
    let send = |after: u64, points: Vec<SeqPoint>| tx.send(ClientMessage::SharedPoints { run: run.clone(), after, points });
    'subscribe: loop {
        // The log stays here: ask for none of it.
        let Ok(subscription) = runs.subscribe(&run, Some(after), Some(u64::MAX)).await else { return };
        let (mut backlog, mut live) = (subscription.backlog, subscription.live);
        let mut texts = VecDeque::from(subscription.replay);
        loop {
            // What the copy missed from the file first, then from memory, then live.
            let text = if let Some(rest) = backlog.take() {
                match rest.read_next().await {
                    Ok(Some((text, rest))) => {
                        backlog = Some(rest);
                        text
                    }
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!("run {run}: cannot read its metrics to share them: {e}");
                        return;
                    }
                }
            } else if let Some(text) = texts.pop_front() {
                text
            } else {
                match live.recv().await {
                    Ok(frame) => frame.text,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue 'subscribe,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            };
            match serde_json::from_str::<ServerMessage>(text.as_str()) {
                Ok(ServerMessage::Points { points, .. }) => {
                    let points: Vec<SeqPoint> = points.into_iter().filter(|p| p.seq > after).collect();
                    for chunk in points.chunks(MAX_SHARED_POINTS) {
                        let last = chunk.last().map_or(after, |p| p.seq);
                        if send(after, chunk.to_vec()).await.is_err() {
                            return;
                        }
                        after = last;
                    }
                }
                Ok(ServerMessage::History { .. }) => {
                    // The run rewrote its metrics (or holds fewer lines than the copy):
                    // the copy starts over, from the first line.
                    if send(0, vec![]).await.is_err() {
                        return;
                    }
                    after = 0;
                    continue 'subscribe;
                }
                _ => {}
            }
        }
    }
}
