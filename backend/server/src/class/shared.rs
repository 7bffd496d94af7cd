//! Learners' runs on the instructor's server: when the instructor charts a run a follower
//! shares (a roster row), this server keeps a copy of it, `l-WHO-RUN` ([`shared_copy_id`] of
//! the follower's identity), line for line (`crate::class::copy`), and asks that follower for
//! its points: now, and each time a follower of that identity joins again, from where the copy
//! ends. A copy is its learner's alone: only a connection of the same identity (the class
//! listener's finding, not the name a follower gives) can write to it.
//! The copy is a run like any other here, so the instructor's page charts it beside their own.
//!
//! What a follower sends is checked before it is written: only runs the instructor asked for,
//! only points that continue the copy (anything else is dropped and asked for again from where
//! the copy ends), and no more than [`MAX_COPY_LINES`] lines and [`MAX_COPY_BYTES`] bytes, so a
//! learner's server can neither lose nor double a point, nor fill the instructor's disk.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use scalebook_shared::protocol::{
    ExecutorSpec, FollowerIdentity, MAX_SHARED_POINTS, RunHandle, RunId, RunRecord, RunState, RunSummary, SeqPoint, ServerMessage,
    shared_copy_id,
};
use scalebook_shared::rundir;
use tokio::sync::{Mutex, watch};

use crate::Error;
use crate::class::copy;
use crate::clock::now;
use crate::runs::RunManager;

/// The most lines a shared run's copy holds (a long run's points, many times over).
pub const MAX_COPY_LINES: u64 = 1_000_000;
/// The most bytes a shared run's copy holds: lines are bounded in number, not in length (a
/// point's tag is any text), so the bytes are bounded too.
pub const MAX_COPY_BYTES: u64 = 64 << 20;

/// One learner's run copied here.
struct Copy {
    record: RunRecord,
    dir: PathBuf,
    /// Lines the copy's metrics hold.
    points: u64,
    /// Bytes they take.
    bytes: u64,
    /// The line a dropped message had the run asked for again from: the messages already on
    /// their way are dropped without asking again.
    asked_again: Option<u64>,
}

impl Copy {
    fn ask(&self) -> ServerMessage {
        let upstream = match &self.record.handle {
            Some(RunHandle::Shared { upstream, .. }) => upstream.clone(),
            _ => self.record.id.clone(),
        };
        ServerMessage::ShareRun { run: upstream, after: self.points }
    }
}

/// The learners' runs the instructor charts, by follower identity ([`FollowerIdentity::key`])
/// and the learner's run id.
pub struct SharedRuns {
    runs: Arc<RunManager>,
    copies: Mutex<HashMap<(String, RunId), Copy>>,
    /// The followers whose copies kept from before a restart were looked for already (once
    /// each: a follower introduces itself every few seconds).
    looked_for: Mutex<HashSet<String>>,
    /// Changes when a run is charted: every follower's connection looks for what to ask.
    charted: watch::Sender<()>,
}

impl SharedRuns {
    pub fn new(runs: Arc<RunManager>) -> Arc<SharedRuns> {
        Arc::new(SharedRuns { runs, copies: Mutex::default(), looked_for: Mutex::default(), charted: watch::Sender::new(()) })
    }

    /// Changes whenever the instructor charts a learner's run.
    pub fn charts(&self) -> watch::Receiver<()> {
        self.charted.subscribe()
    }

    /// The instructor charts `run`, which `follower` shares (its summary): the copy's id. A
    /// copy kept from before (a restart of this server) goes on where it ends.
    pub async fn chart(&self, follower: &FollowerIdentity, run: &RunSummary) -> Result<RunId, Error> {
        let name = follower.key();
        let local = shared_copy_id(&name, &run.id).ok_or_else(|| {
            refused("run", format!("{name}'s run {} has too long a name to copy here (a run id is at most 64 characters)", run.id))
        })?;
        let mut copies = self.copies.lock().await;
        if !copies.contains_key(&(name.to_owned(), run.id.clone())) {
            let record = match self.runs.record(&local).await {
                Some(kept) => kept,
                None => record(&local, &name, run)?,
            };
            self.adopt(&mut copies, &name, record).await?;
        }
        drop(copies);
        self.update(follower, std::slice::from_ref(run)).await;
        self.charted.send_replace(());
        Ok(local)
    }

    async fn adopt(&self, copies: &mut HashMap<(String, RunId), Copy>, name: &str, record: RunRecord) -> Result<(), Error> {
        let Some(RunHandle::Shared { upstream, .. }) = record.handle.clone() else { return Ok(()) };
        let dir = self.runs.store().run_dir(&record.id);
        let (points, _) = copy::open(dir.clone()).await?;
        let bytes = tokio::fs::metadata(dir.join(rundir::METRICS)).await.map_or(0, |m| m.len());
        self.runs.class_run(record.clone()).await;
        copies.insert((name.to_owned(), upstream), Copy { record, dir, points, bytes, asked_again: None });
        Ok(())
    }

    /// `follower` introduced itself with `runs`: the copies of those runs take their state.
    /// Copies this server kept from before a restart, of runs still going, are charted again.
    pub async fn update(&self, follower: &FollowerIdentity, runs: &[RunSummary]) {
        let name = follower.key();
        let name = name.as_str();
        let mut copies = self.copies.lock().await;
        if self.looked_for.lock().await.insert(name.to_owned()) {
            let kept: Vec<RunRecord> = self
                .runs
                .list()
                .await
                .into_iter()
                .filter(|r| matches!(&r.handle, Some(RunHandle::Shared { follower, upstream }) if follower == name && !copies.contains_key(&(name.to_owned(), upstream.clone()))))
                .filter(|r| !r.state().is_final())
                .collect();
            for record in kept {
                if let Err(e) = self.adopt(&mut copies, name, record).await {
                    tracing::warn!("{e}");
                }
            }
        }
        for summary in runs {
            let Some(copy) = copies.get_mut(&(name.to_owned(), summary.id.clone())) else { continue };
            if copy.record.state() != summary.state && !copy.record.state().is_final() {
                copy.record.transition(summary.state, now(), None);
                self.runs.class_run(copy.record.clone()).await;
            }
        }
    }

    /// What to ask `follower` for that `asked` (this connection's asks so far) does not hold
    /// yet: every copy of its runs, ended ones too (the end of a run may have come before its
    /// last points did).
    pub async fn asks(&self, follower: &FollowerIdentity, asked: &mut HashSet<RunId>) -> Vec<ServerMessage> {
        let name = follower.key();
        let copies = self.copies.lock().await;
        copies.iter().filter(|((who, run), _)| *who == name && asked.insert(run.clone())).map(|(_, copy)| copy.ask()).collect()
    }

    /// Points `follower` sent for its run `run`, after line `after` of it. What does not
    /// continue the copy is dropped; the answer then asks again from where the copy ends.
    pub async fn points(
        &self,
        follower: &FollowerIdentity,
        run: &RunId,
        after: u64,
        points: Vec<SeqPoint>,
    ) -> Result<Option<ServerMessage>, Error> {
        let mut copies = self.copies.lock().await;
        let Some(copy) = copies.get_mut(&(follower.key(), run.clone())) else {
            return Err(refused("run", format!("run {run} was not asked for: the instructor charts only the runs they chose")));
        };
        if after == 0 && copy.points > 0 {
            // The learner's run rewrote its metrics (a resume): the copy starts over.
            copy::restart(&copy.dir).await?;
            (copy.points, copy.bytes) = (0, 0);
        }
        if after != copy.points {
            let first = copy.asked_again.replace(copy.points) != Some(copy.points);
            return Ok(first.then(|| copy.ask()));
        }
        if let Some(problem) = continuation_problem(after, &points) {
            return Err(refused("points", format!("points of run {run} refused: {problem}")));
        }
        let (text, upto) = copy::numbered(copy.points, copy::point_lines(points)?);
        if let Some(problem) = size_problem(copy.bytes, text.len()) {
            return Err(refused("points", format!("points of run {run} refused: {problem}")));
        }
        copy.bytes += text.len() as u64;
        copy::append(copy.dir.join(rundir::METRICS), text).await?;
        copy.points = upto;
        copy.asked_again = None;
        if copy.record.state().is_final() {
            self.runs.class_run_grew(&copy.record.id).await;
        }
        Ok(None)
    }
}

fn refused(field: &'static str, rule: String) -> Error {
    Error::ClassRule { field, rule }
}

/// What is wrong with `points` as the lines after line `after` of a copy, if anything.
fn continuation_problem(after: u64, points: &[SeqPoint]) -> Option<String> {
    if points.len() > MAX_SHARED_POINTS {
        return Some(format!("{} points in one message, at most {MAX_SHARED_POINTS}", points.len()));
    }
    let mut last = after;
    for point in points {
        if point.seq <= last {
            return Some(format!("line {} comes after line {last}: lines go up", point.seq));
        }
        last = point.seq;
    }
    (last > MAX_COPY_LINES).then(|| format!("line {last} is past the {MAX_COPY_LINES} lines a copy holds"))
}

/// What is wrong with adding `adding` bytes to a copy of `held` bytes, if anything.
fn size_problem(held: u64, adding: usize) -> Option<String> {
    (held.saturating_add(adding as u64) > MAX_COPY_BYTES)
        .then(|| format!("the copy would pass the {} MiB a copy holds (it holds {held} bytes)", MAX_COPY_BYTES >> 20))
}

/// The record of a new copy of the follower `name`'s run, as its summary describes it.
fn record(local: &RunId, name: &str, run: &RunSummary) -> Result<RunRecord, Error> {
    let layout = run.layout().ok_or_else(|| refused("run", format!("{name}'s run {} has a layout no run has", run.id)))?;
    let at = now();
    let mut record = RunRecord {
        handle: Some(RunHandle::Shared { follower: name.to_owned(), upstream: run.id.clone() }),
        ..RunRecord::new(local.clone(), run.config.clone(), layout, ExecutorSpec::Local, at, RunState::Queued)
    };
    if run.state != record.state() {
        record.transition(run.state, at, None);
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use scalebook_shared::metrics::MetricPoint;

    use super::*;

    fn point(seq: u64) -> SeqPoint {
        SeqPoint { seq, point: MetricPoint { step: seq, epoch: 1, wall: 0.0, tag: "Loss/train".into(), value: 1.0 } }
    }

    #[test]
    fn only_points_that_go_on_from_the_copy_and_fit_are_taken() {
        assert_eq!(continuation_problem(3, &[point(4), point(6)]), None);
        assert!(continuation_problem(3, &[point(3)]).unwrap().contains("lines go up"));
        assert!(continuation_problem(3, &[point(5), point(4)]).unwrap().contains("lines go up"));
        assert!(continuation_problem(0, &[point(MAX_COPY_LINES + 1)]).unwrap().contains("a copy holds"));
        let many: Vec<SeqPoint> = (1..=MAX_SHARED_POINTS as u64 + 1).map(point).collect();
        assert!(continuation_problem(0, &many).unwrap().contains("in one message"));
    }

    #[test]
    fn a_copy_stops_at_its_byte_bound() {
        assert_eq!(size_problem(0, 100), None);
        assert_eq!(size_problem(MAX_COPY_BYTES - 100, 100), None);
        assert!(size_problem(MAX_COPY_BYTES - 100, 101).unwrap().contains("64 MiB"));
        assert!(size_problem(u64::MAX, 1).is_some(), "no overflow");
    }
}
