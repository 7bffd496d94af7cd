//! The instructor's runs, copied into this server's runs directory as they arrive: each
//! upstream run `ID` becomes the run `i-ID` here, whose `metrics.jsonl` and `job.log` hold the
//! upstream lines at the same line numbers. Line numbers are the protocol's sequence numbers,
//! so the copy's length is where its stream resumes after a lost connection, and each point is
//! written exactly once. A line upstream that carries no point (damaged by a crash mid-write)
//! or a log line no longer held there is kept as an empty line, so the numbers stay aligned.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scalebook_shared::protocol::{ClientMessage, LogLine, MAX_RUN_ID_LEN, Presentation, RunHandle, RunId, RunRecord, SeqPoint};
use scalebook_shared::rundir;

use crate::runs::RunManager;
use crate::stream::tail::LineFollower;

/// What an upstream run's id is prefixed with here.
const PREFIX: &str = "i-";

/// One upstream run's copy.
struct Copy {
    local: RunId,
    dir: PathBuf,
    /// The run has ended upstream: its stream here is not polled, so copied lines are
    /// announced as they are written.
    ended: bool,
    /// Lines the copy's metrics file and job log hold.
    points: u64,
    log: u64,
    /// Subscribed upstream on the current connection.
    subscribed: bool,
}

pub struct Mirror {
    runs: Arc<RunManager>,
    address: String,
    copies: HashMap<RunId, Copy>,
}

/// The local id of upstream run `upstream`, when it has room for the prefix.
fn local_id(upstream: &RunId) -> Option<RunId> {
    (upstream.as_str().len() + PREFIX.len() <= MAX_RUN_ID_LEN).then(|| RunId::parse(&format!("{PREFIX}{upstream}")).ok()).flatten()
}

impl Mirror {
    pub fn new(runs: Arc<RunManager>, address: String) -> Mirror {
        Mirror { runs, address, copies: HashMap::new() }
    }

    /// A new connection: every run is subscribed again, from where its copy ends.
    pub fn reconnected(&mut self) {
        for copy in self.copies.values_mut() {
            copy.subscribed = false;
        }
    }

    /// Records the instructor's run as it stands upstream; the subscription to send when it
    /// is not yet subscribed on this connection.
    pub async fn adopt(&mut self, upstream: RunRecord) -> Result<Option<ClientMessage>, String> {
        let Some(local) = local_id(&upstream.id) else {
            tracing::warn!(run = %upstream.id, "the class's run id is too long to copy here");
            return Ok(None);
        };
        if !self.copies.contains_key(&upstream.id) {
            let dir = self.runs.store().run_dir(&local);
            let opened = dir.clone();
            let (points, log) = tokio::task::spawn_blocking(move || open(&opened))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("cannot copy run {} into {}: {e}", upstream.id, dir.display()))?;
            self.copies.insert(upstream.id.clone(), Copy { local: local.clone(), dir, points, log, ended: false, subscribed: false });
        }
        let id = upstream.id.clone();
        if let Some(copy) = self.copies.get_mut(&id) {
            copy.ended = upstream.state().is_final();
        }
        let record = RunRecord {
            id: local,
            handle: Some(RunHandle::Class { address: self.address.clone(), upstream: upstream.id }),
            learner: None,
            cancel_requested: false,
            ..upstream
        };
        self.runs.class_run(record).await;
        Ok(self.copies.get_mut(&id).and_then(|copy| {
            let first = !std::mem::replace(&mut copy.subscribed, true);
            first.then(|| subscribe(&id, copy))
        }))
    }

    /// Appends the points that come next (padding lines upstream that carry none).
    pub async fn points(&mut self, upstream: &RunId, points: Vec<SeqPoint>) -> Result<(), String> {
        let Some(copy) = self.copies.get_mut(upstream) else { return Ok(()) };
        let mut lines = Vec::with_capacity(points.len());
        for point in points {
            lines.push((point.seq, serde_json::to_string(&point.point).map_err(|e| e.to_string())?));
        }
        let (text, upto) = numbered(copy.points, lines);
        append(copy.dir.join(rundir::METRICS), text).await?;
        copy.points = upto;
        self.announce_if_ended(upstream).await;
        Ok(())
    }

    /// Appends the log lines that come next (the lines upstream no longer holds, as empty
    /// ones).
    pub async fn log(&mut self, upstream: &RunId, lines: Vec<LogLine>) -> Result<(), String> {
        let Some(copy) = self.copies.get_mut(upstream) else { return Ok(()) };
        let (text, upto) = numbered(copy.log, lines.into_iter().map(|line| (line.seq, line.text)));
        append(copy.dir.join(rundir::JOB_LOG), text).await?;
        copy.log = upto;
        self.announce_if_ended(upstream).await;
        Ok(())
    }

    /// Lines copied into a run that has ended reach its viewers at once (nothing polls it).
    async fn announce_if_ended(&self, upstream: &RunId) {
        if let Some(copy) = self.copies.get(upstream).filter(|copy| copy.ended) {
            self.runs.class_run_grew(&copy.local).await;
        }
    }

    /// The instructor's run rewrote its metrics (a resumed run starts its curve again): the
    /// copy starts again too, from the first line.
    pub async fn restart(&mut self, upstream: &RunId) -> Result<Option<ClientMessage>, String> {
        let Some(copy) = self.copies.get_mut(upstream) else { return Ok(None) };
        let path = copy.dir.join(rundir::METRICS);
        tokio::task::spawn_blocking(move || std::fs::write(path, b"")).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
        copy.points = 0;
        Ok(Some(subscribe(upstream, copy)))
    }

    /// The presentation with the instructor's run ids turned into this server's copies.
    pub fn localise(&self, mut presentation: Presentation) -> Presentation {
        for run in &mut presentation.charts.runs {
            if let Some(local) = local_id(run) {
                *run = local;
            }
        }
        presentation
    }
}

/// The text that appends numbered `lines` (in order) to a file of `held` lines, and the lines it
/// will then hold: lines already held are skipped, and a number upstream that carries nothing
/// here (a damaged line, a log line no longer kept) becomes an empty line, so the numbers stay
/// the same on both sides.
fn numbered(held: u64, lines: impl IntoIterator<Item = (u64, String)>) -> (String, u64) {
    let mut text = String::new();
    let mut upto = held;
    for (seq, line) in lines.into_iter().filter(|(seq, _)| *seq > held) {
        text.extend(std::iter::repeat_n("\n", (seq - upto - 1) as usize));
        text.push_str(&line);
        text.push('\n');
        upto = seq;
    }
    (text, upto)
}

fn subscribe(upstream: &RunId, copy: &Copy) -> ClientMessage {
    ClientMessage::Subscribe { run: upstream.clone(), after_seq: Some(copy.points), after_log_seq: Some(copy.log) }
}

/// Makes a copy's directory (or finds it again) and counts the lines its files hold.
fn open(dir: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::create_dir_all(dir)?;
    let count = |name: &str| -> std::io::Result<u64> {
        let mut follower = LineFollower::new(&dir.join(name));
        follower.poll_to_end()?;
        Ok(follower.line_count())
    };
    Ok((count(rundir::METRICS)?, count(rundir::JOB_LOG)?))
}

async fn append(path: PathBuf, text: String) -> Result<(), String> {
    if text.is_empty() {
        return Ok(());
    }
    let write = move || std::fs::OpenOptions::new().create(true).append(true).open(&path)?.write_all(text.as_bytes());
    tokio::task::spawn_blocking(write).await.map_err(|e| e.to_string())?.map_err(|e| format!("cannot write a class run's copy: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_numbers_once_each() {
        let line = |seq: u64| (seq, format!("l{seq}"));
        assert_eq!(numbered(2, [line(1), line(2), line(3), line(6)]), ("l3\n\n\nl6\n".to_owned(), 6));
        assert_eq!(numbered(6, [line(5), line(6)]), (String::new(), 6));
    }

    #[test]
    fn upstream_ids_are_prefixed_when_they_fit() {
        assert_eq!(local_id(&RunId::parse("20250101-120000-1").unwrap()).unwrap().as_str(), "i-20250101-120000-1");
        assert!(local_id(&RunId::parse(&"a".repeat(MAX_RUN_ID_LEN)).unwrap()).is_none());
    }
}
