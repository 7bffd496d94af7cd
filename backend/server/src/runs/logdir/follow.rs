//! `serve --watch-logdir`: follows logdirs live. Every run directory that appears in one
//! becomes a run (`running` while it is followed), and what its event files gain is appended
//! to that run's `metrics.jsonl`, where the server's stream sends it to every browser exactly
//! once, in order. Polling, not inotify: a cluster's shared filesystem (Perlmutter's
//! `$SCRATCH`) tells inotify nothing. Each pass runs on a blocking thread, off the async
//! workers; a restarted server finds its runs again and goes on where their copies stopped.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use scalebook_shared::protocol::RunId;

use crate::Error;
use crate::logdir::copy::{COPY_BUDGET, EventCopy, Progress, read_new};
use crate::logdir::scan::{self, SourceRun};
use crate::logdir::{create_run, is_in_runs_dir};
use crate::runs::RunManager;

/// How often the logdirs are listed and their event files read: a point reaches the browsers
/// about a second after its writer flushed it, and a shared filesystem is not pressed.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

pub struct LogdirFollower {
    manager: Arc<RunManager>,
    /// Resolved.
    logdirs: Vec<PathBuf>,
    /// By the run's directory in its logdir.
    followed: HashMap<PathBuf, Followed>,
    /// The problem last logged per path, so a lasting one is logged once, not every pass.
    reported: HashMap<PathBuf, String>,
}

struct Followed {
    id: RunId,
    copy: EventCopy,
}

impl LogdirFollower {
    /// Follows `logdirs` (each must be a directory) for `manager`'s server, after completing
    /// the runs an earlier server followed in logdirs this one does not watch.
    pub async fn start(manager: Arc<RunManager>, logdirs: &[PathBuf]) -> Result<(), Error> {
        let logdirs = logdirs.iter().map(|dir| scan::resolve(dir)).collect::<Result<Vec<_>, _>>()?;
        manager.complete_unwatched_logdir_runs(&logdirs).await;
        if logdirs.is_empty() {
            return Ok(());
        }
        for dir in &logdirs {
            tracing::info!("following the TensorBoard logdir {}", dir.display());
        }
        let follower = LogdirFollower { manager, logdirs, followed: HashMap::new(), reported: HashMap::new() };
        tokio::spawn(follower.run());
        Ok(())
    }

    async fn run(mut self) {
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let pass = tokio::task::spawn_blocking(move || {
                let gone = self.pass();
                (self, gone)
            });
            let Ok((follower, gone)) = pass.await else {
                tracing::error!("the logdir follower stopped");
                return;
            };
            self = follower;
            for id in gone {
                self.manager.lose_logdir_run(&id).await;
            }
        }
    }

    /// Lists the logdirs and copies what every run's files gained. Returns the runs whose
    /// directories left their logdirs.
    fn pass(&mut self) -> Vec<RunId> {
        let mut runs = Vec::new();
        let mut unlisted = Vec::new();
        for logdir in self.logdirs.clone() {
            match scan::scan(&logdir) {
                Ok(found) => {
                    self.reported.remove(&logdir);
                    runs.extend(found);
                }
                Err(e) => {
                    self.report(&logdir, e);
                    unlisted.push(logdir);
                }
            }
        }
        let mut seen = HashSet::new();
        for source in runs {
            let dir = source.dir();
            // Nested logdirs list a run twice; it is one run.
            if is_in_runs_dir(&source, self.manager.store()) || !seen.insert(dir.clone()) {
                continue;
            }
            match self.copy(&dir, &source) {
                Ok(()) => {
                    self.reported.remove(&dir);
                }
                Err(e) => self.report(&dir, e),
            }
        }
        let gone: Vec<PathBuf> =
            self.followed.keys().filter(|dir| !seen.contains(*dir) && !unlisted.iter().any(|l| dir.starts_with(l))).cloned().collect();
        gone.into_iter()
            .filter_map(|dir| {
                let followed = self.followed.remove(&dir)?;
                tracing::warn!("{} holds no event files any more: run {} is lost", dir.display(), followed.id);
                Some(followed.id)
            })
            .collect()
    }

    fn copy(&mut self, dir: &Path, source: &SourceRun) -> Result<(), Error> {
        let followed = match self.followed.entry(dir.to_owned()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => entry.insert(adopt(&self.manager, source)?),
        };
        // A budget at a time, each one's points written before the next is read.
        loop {
            let copied = followed.copy.copy(source)?;
            if copied.points > 0 {
                tracing::debug!("run {}: {} new points from {}", followed.id, copied.points, dir.display());
            }
            if !copied.more {
                break;
            }
        }
        Ok(())
    }

    fn report(&mut self, path: &Path, error: Error) {
        let message = error.to_string();
        if self.reported.get(path) != Some(&message) {
            tracing::warn!("{message}");
            self.reported.insert(path.to_owned(), message);
        }
    }
}

/// The run of a logdir run directory seen for the first time by this follower: the run an
/// earlier import or server made of it, or a new one.
fn adopt(manager: &RunManager, source: &SourceRun) -> Result<Followed, Error> {
    let dir = source.dir();
    if let Some(record) = manager.logdir_run(&dir) {
        let copy = EventCopy::resume(&manager.store().run_dir(&record.id))?;
        manager.follow_logdir_run(&record.id);
        tracing::info!("following {} again as run {}", dir.display(), record.id);
        return Ok(Followed { id: record.id, copy });
    }
    let new = read_new(source, &Progress::default(), COPY_BUDGET, &mut |_| {})?;
    let (record, copy) = create_run(manager.store(), source, new, true)?;
    let id = record.id.clone();
    tracing::info!("following {} as run {id}", dir.display());
    manager.add_logdir_run(record);
    Ok(Followed { id, copy })
}
