//! One run's live stream: its points and log lines as read from the run directory, the recent
//! ones kept in memory for replay, a thinned history for new viewers, and a broadcast channel
//! every viewer listens on.
//!
//! Memory is bounded by what is in flight, never by the run's length: the history is folded
//! as points arrive ([`Thinned`]), only the last [`POINTS_IN_MEMORY`] points are kept, and a
//! viewer further behind reads its backlog from the file a page at a time ([`Backlog`]), at the
//! pace its connection takes them. Messages are serialised once and shared by every viewer.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::metrics::{MetricPoint, Thinned};
use scalebook_shared::protocol::{LogLine, RunId, SeqPoint, ServerMessage};
use scalebook_shared::rundir;
use tokio::sync::broadcast;

use super::tail::{LineFollower, Pages};
use crate::wire::encode;

/// Points kept in memory per run; a viewer further behind reads them from `metrics.jsonl`.
const POINTS_IN_MEMORY: usize = 4_096;
/// Log lines kept in memory per run; a viewer that resumes from further back gets these (the
/// whole log is a file the API serves).
const LOG_LINES_IN_MEMORY: usize = 2_000;
/// Log lines a new viewer starts with.
const LOG_LINES_FOR_NEW_VIEWERS: usize = 200;
/// Buckets per tag in a history (about one per pixel of a wide chart).
const HISTORY_BUCKETS: usize = 500;
/// Points per `points` message, live or from a backlog.
const POINTS_PER_MESSAGE: usize = 2_000;
/// Broadcast messages a slow viewer may fall behind before it is resynchronised.
const CHANNEL_CAPACITY: usize = 256;

/// One broadcast message and the stream position right after it, so a viewer that fell
/// behind knows where to resume.
#[derive(Debug, Clone)]
pub struct Frame {
    pub cursor: Cursor,
    pub text: Utf8Bytes,
}

/// How far a viewer has got: the last point and log line numbers it was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub points: u64,
    pub log: u64,
}

/// What a viewer gets on subscribing: the points it missed that are no longer in memory (read
/// from the file a page at a time), then the rest of what it missed, then the live channel.
pub struct Subscription {
    pub backlog: Option<Backlog>,
    pub replay: Vec<Utf8Bytes>,
    pub cursor: Cursor,
    pub live: broadcast::Receiver<Frame>,
}

/// Points a viewer missed, read from the run's metrics file by the viewer's own task, outside
/// the stream's lock.
pub struct Backlog {
    run: RunId,
    pages: Pages,
}

impl Backlog {
    /// The next `points` message and the rest of the backlog, read on a blocking thread (the
    /// file may be on a slow shared filesystem); `None` once the backlog is all sent.
    pub async fn read_next(mut self) -> io::Result<Option<(Utf8Bytes, Backlog)>> {
        // As many pages read at once as there are cores, however many viewers are behind: the
        // async workers (everyone else's messages) keep their share of the machine.
        let _turn = page_readers().acquire().await.map_err(io::Error::other)?;
        tokio::task::spawn_blocking(move || Ok(self.next_message()?.map(|text| (text, self)))).await.map_err(io::Error::other)?
    }

    /// The next `points` message, `None` once the backlog is sent.
    fn next_message(&mut self) -> io::Result<Option<Utf8Bytes>> {
        loop {
            let page = self.pages.next_page(POINTS_PER_MESSAGE)?;
            if page.is_empty() {
                return Ok(None);
            }
            let points = parse_points(page);
            if !points.is_empty() {
                return Ok(Some(encode(&ServerMessage::Points { run: self.run.clone(), points })));
            }
        }
    }
}

/// The turns to read a page of a backlog: one per core.
fn page_readers() -> &'static tokio::sync::Semaphore {
    static READERS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    READERS.get_or_init(|| tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(1, usize::from)))
}

/// One run's live feed: it follows the run's metrics and log files, keeps what a late viewer
/// missed, and sends every new frame to all of its viewers at once.
pub struct RunFeed {
    id: RunId,
    state: Mutex<StreamState>,
    tx: broadcast::Sender<Frame>,
}

struct StreamState {
    metrics: LineFollower,
    log: LineFollower,
    /// The last points read.
    recent: VecDeque<SeqPoint>,
    /// `recent` holds every point since the file's first line.
    complete: bool,
    history: Thinned,
    lines: VecDeque<LogLine>,
}

impl RunFeed {
    pub fn new(id: RunId, run_dir: &Path) -> RunFeed {
        let state = StreamState {
            metrics: LineFollower::new(&run_dir.join(rundir::METRICS)),
            log: LineFollower::new(&run_dir.join(rundir::JOB_LOG)),
            recent: VecDeque::new(),
            complete: true,
            history: Thinned::new(HISTORY_BUCKETS),
            lines: VecDeque::new(),
        };
        RunFeed { id, state: Mutex::new(state), tx: broadcast::channel(CHANNEL_CAPACITY).0 }
    }

    pub fn viewers(&self) -> usize {
        self.tx.receiver_count()
    }

    fn lock(&self) -> MutexGuard<'_, StreamState> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads everything the trainer appended, a bounded read at a time, and broadcasts it.
    /// The lock is taken per read, so a large file never holds a subscriber up for long.
    pub fn poll(&self) -> io::Result<()> {
        while self.poll_once()? {}
        Ok(())
    }

    /// One bounded read; `true` when more is waiting. Under the lock, so a viewer subscribing
    /// at the same time gets each line exactly once: in its replay or live.
    fn poll_once(&self) -> io::Result<bool> {
        let mut st = self.lock();
        let before = st.cursor();
        let metrics = st.metrics.poll()?;
        let log = st.log.poll()?;
        if log.reset {
            st.lines.clear();
        }
        let new_lines: Vec<LogLine> = log.lines.into_iter().map(|(seq, text)| LogLine { seq, text }).collect();
        st.lines.extend(new_lines.iter().cloned());
        let excess = st.lines.len().saturating_sub(LOG_LINES_IN_MEMORY);
        st.lines.drain(..excess);

        let (reset, more) = (metrics.reset, metrics.more || log.more);
        let new_points = parse_points(metrics.lines);
        if reset {
            st.recent.clear();
            st.complete = true;
            st.history = Thinned::new(HISTORY_BUCKETS);
        }
        for point in &new_points {
            st.history.push(&point.point);
        }
        st.recent.extend(new_points.iter().cloned());
        let excess = st.recent.len().saturating_sub(POINTS_IN_MEMORY);
        if excess > 0 {
            st.recent.drain(..excess);
            st.complete = false;
        }

        if self.viewers() == 0 {
            // Nobody to encode for: a finished run read for its first viewer costs no JSON.
            return Ok(more);
        }
        // Each frame's cursor covers what was sent up to it: points first, then log lines.
        let after = st.cursor();
        let send = |cursor: Cursor, message: &ServerMessage| {
            // A viewer leaving meanwhile is not an error.
            let _ = self.tx.send(Frame { cursor, text: encode(message) });
        };
        if reset {
            // The trainer rewrote its metrics (a resume): every viewer starts the series over.
            send(Cursor { points: after.points, log: before.log }, &st.history(&self.id));
        } else {
            for chunk in new_points.chunks(POINTS_PER_MESSAGE) {
                let cursor = Cursor { points: chunk.last().map_or(after.points, |p| p.seq), log: before.log };
                send(cursor, &ServerMessage::Points { run: self.id.clone(), points: chunk.to_vec() });
            }
        }
        if !new_lines.is_empty() {
            send(after, &ServerMessage::LogLines { run: self.id.clone(), lines: new_lines });
        }
        Ok(more)
    }

    /// Subscribes a viewer. `after` is the viewer's last point and log line numbers, when it
    /// is resuming; without them it gets the history and the last log lines first.
    pub fn subscribe(&self, after_points: Option<u64>, after_log: Option<u64>) -> io::Result<Subscription> {
        let st = self.lock();
        let live = self.tx.subscribe();
        let cursor = st.cursor();
        let (mut backlog, mut replay) = (None, Vec::new());
        match after_points {
            // A viewer ahead of the file saw points the trainer has since rewritten.
            Some(after) if after <= cursor.points => {
                if st.in_memory(after) {
                    let missed: Vec<SeqPoint> = st.recent.iter().filter(|p| p.seq > after).cloned().collect();
                    for chunk in missed.chunks(POINTS_PER_MESSAGE) {
                        replay.push(encode(&ServerMessage::Points { run: self.id.clone(), points: chunk.to_vec() }));
                    }
                } else {
                    match st.metrics.pages_after(after)? {
                        Some(pages) => backlog = Some(Backlog { run: self.id.clone(), pages }),
                        // Replaced since the last read: the next poll restarts every viewer.
                        None => replay.push(encode(&st.history(&self.id))),
                    }
                }
            }
            _ => replay.push(encode(&st.history(&self.id))),
        }
        let skip_to = after_log.unwrap_or(cursor.log.saturating_sub(LOG_LINES_FOR_NEW_VIEWERS as u64));
        let lines: Vec<LogLine> = st.lines.iter().filter(|l| l.seq > skip_to).cloned().collect();
        if !lines.is_empty() {
            replay.push(encode(&ServerMessage::LogLines { run: self.id.clone(), lines }));
        }
        Ok(Subscription { backlog, replay, cursor, live })
    }
}

impl StreamState {
    fn cursor(&self) -> Cursor {
        Cursor { points: self.metrics.line_count(), log: self.log.line_count() }
    }

    /// Whether every point after line `after` is in memory.
    fn in_memory(&self, after: u64) -> bool {
        self.complete || self.recent.front().is_some_and(|p| p.seq <= after + 1)
    }

    fn history(&self, id: &RunId) -> ServerMessage {
        ServerMessage::History { run: id.clone(), upto_seq: self.metrics.line_count(), series: self.history.series() }
    }
}

/// The metric points among followed lines; a line that is not a point (damaged by a crash
/// mid-write) keeps its number but carries nothing.
fn parse_points(lines: Vec<(u64, String)>) -> Vec<SeqPoint> {
    lines
        .into_iter()
        .filter_map(|(seq, line)| serde_json::from_str::<MetricPoint>(&line).ok().map(|point| SeqPoint { seq, point }))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use scalebook_shared::protocol::Series;

    use super::*;

    /// A run directory that lives as long as the value.
    struct TempRun(std::path::PathBuf, #[allow(dead_code, reason = "removes the directory when dropped")] tempfile::TempDir);

    impl TempRun {
        fn new() -> TempRun {
            let dir = tempfile::tempdir().unwrap();
            TempRun(dir.path().to_owned(), dir)
        }

        fn append(&self, file: &str, text: &str) {
            std::fs::OpenOptions::new().create(true).append(true).open(self.0.join(file)).unwrap().write_all(text.as_bytes()).unwrap();
        }

        fn points(&self, steps: std::ops::Range<u64>) {
            for step in steps {
                let p = MetricPoint { step, epoch: 1, wall: step as f64, tag: "Loss/train".into(), value: 1.0 / (step + 1) as f64 };
                self.append(rundir::METRICS, &format!("{}\n", serde_json::to_string(&p).unwrap()));
            }
        }
    }

    fn decode(text: &Utf8Bytes) -> ServerMessage {
        serde_json::from_str(text.as_str()).unwrap()
    }

    fn seqs(message: &ServerMessage) -> Vec<u64> {
        match message {
            ServerMessage::Points { points, .. } => points.iter().map(|p| p.seq).collect(),
            ServerMessage::LogLines { lines, .. } => lines.iter().map(|l| l.seq).collect(),
            other => panic!("not points or lines: {other:?}"),
        }
    }

    fn history(message: &ServerMessage) -> (u64, &[Series]) {
        match message {
            ServerMessage::History { upto_seq, series, .. } => (*upto_seq, series),
            other => panic!("not a history: {other:?}"),
        }
    }

    #[test]
    fn a_new_viewer_gets_the_history_then_live_points() {
        let run = TempRun::new();
        run.points(0..3);
        run.append(rundir::JOB_LOG, "starting\n");
        let stream = RunFeed::new(RunId::parse("r1").unwrap(), &run.0);
        stream.poll().unwrap();
        let mut sub = stream.subscribe(None, None).unwrap();
        assert_eq!(sub.cursor, Cursor { points: 3, log: 1 });
        let first = decode(&sub.replay[0]);
        let (upto, series) = history(&first);
        assert_eq!(upto, 3);
        assert_eq!(series[0].buckets.iter().map(|b| b.last_step).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(seqs(&decode(&sub.replay[1])), [1]);

        run.points(3..5);
        run.append(rundir::JOB_LOG, "step\n");
        stream.poll().unwrap();
        let frame = sub.live.try_recv().unwrap();
        assert_eq!(seqs(&decode(&frame.text)), [4, 5]);
        assert_eq!(frame.cursor, Cursor { points: 5, log: 1 });
        assert_eq!(seqs(&decode(&sub.live.try_recv().unwrap().text)), [2]);
        assert!(sub.live.try_recv().is_err());
    }

    #[test]
    fn a_returning_viewer_gets_exactly_what_it_missed() {
        let run = TempRun::new();
        run.points(0..10);
        // A line damaged by a crash keeps its number but carries no point.
        run.append(rundir::METRICS, "{\"step\": 10, \"tru\n");
        run.points(11..13);
        let stream = RunFeed::new(RunId::parse("r1").unwrap(), &run.0);
        stream.poll().unwrap();
        let sub = stream.subscribe(Some(7), Some(0)).unwrap();
        let replayed: Vec<u64> = sub.replay.iter().flat_map(|t| seqs(&decode(t))).collect();
        assert_eq!(replayed, [8, 9, 10, 12, 13]);
        assert!(stream.subscribe(Some(13), Some(0)).unwrap().replay.is_empty());
        // A viewer ahead of the file (it was rewritten meanwhile) starts over from a history.
        let ahead = stream.subscribe(Some(99), Some(0)).unwrap();
        assert_eq!(history(&decode(&ahead.replay[0])).0, 13);
    }

    #[test]
    fn a_long_finished_run_gives_a_whole_thinned_history_and_pages_a_far_backlog() {
        let run = TempRun::new();
        // More lines than one bounded read and than the points kept in memory.
        let total = 30_000;
        run.points(0..total);
        let stream = RunFeed::new(RunId::parse("r1").unwrap(), &run.0);
        stream.poll().unwrap();
        let sub = stream.subscribe(None, None).unwrap();
        let first = decode(&sub.replay[0]);
        let (upto, series) = history(&first);
        assert_eq!(upto, total);
        let buckets = &series[0].buckets;
        assert!(buckets.len() <= HISTORY_BUCKETS);
        assert_eq!(buckets.iter().map(|b| u64::from(b.count)).sum::<u64>(), total);
        assert_eq!(buckets.last().unwrap().last_step, total - 1);

        let mut behind = stream.subscribe(Some(10), Some(0)).unwrap();
        assert!(behind.replay.is_empty());
        let mut backlog = behind.backlog.take().expect("a backlog from the file");
        let mut seqs_read = Vec::new();
        while let Some(text) = backlog.next_message().unwrap() {
            let message = decode(&text);
            assert!(seqs(&message).len() <= POINTS_PER_MESSAGE);
            seqs_read.extend(seqs(&message));
        }
        assert_eq!(seqs_read, (11..=total).collect::<Vec<_>>());
        // Near the end, the memory answers.
        let near = stream.subscribe(Some(total - 5), Some(0)).unwrap();
        assert!(near.backlog.is_none());
        assert_eq!(seqs(&decode(&near.replay[0])), (total - 4..=total).collect::<Vec<_>>());
    }

    #[test]
    fn a_rewritten_metrics_file_restarts_every_viewers_series() {
        let run = TempRun::new();
        run.points(0..6);
        let stream = RunFeed::new(RunId::parse("r1").unwrap(), &run.0);
        stream.poll().unwrap();
        let mut sub = stream.subscribe(Some(6), Some(0)).unwrap();
        // The trainer resuming from its step-3 checkpoint keeps points 0..=3 and goes on.
        let kept: String =
            std::fs::read_to_string(run.0.join(rundir::METRICS)).unwrap().lines().take(4).map(|l| format!("{l}\n")).collect();
        std::fs::write(run.0.join("tmp"), kept).unwrap();
        std::fs::rename(run.0.join("tmp"), run.0.join(rundir::METRICS)).unwrap();
        run.points(4..5);
        stream.poll().unwrap();
        let frame = sub.live.try_recv().unwrap();
        let message = decode(&frame.text);
        let (upto, series) = history(&message);
        assert_eq!(upto, 5);
        assert_eq!(series[0].buckets.iter().map(|b| b.last_step).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(frame.cursor.points, 5);
    }
}
