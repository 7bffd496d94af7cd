//! Runs read from a TensorBoard logdir: nothing of them runs here, so they are never
//! scheduled, stopped or found ended by a process; the logdir follower adds them, follows them
//! and says when one is gone, and a server that no longer watches a run's logdir completes it.

use std::path::{Path, PathBuf};

use scalebook_shared::protocol::{RunId, RunRecord, RunState};

pub mod follow;

use super::RunManager;
use crate::clock::now;
use crate::logdir::{is_logdir_run, source_dir};

impl RunManager {
    /// The run read from the logdir run directory `dir`, if there is one.
    pub fn logdir_run(&self, dir: &Path) -> Option<RunRecord> {
        self.lock().values().find(|r| source_dir(r).as_deref() == Some(dir)).cloned()
    }

    /// Adds a run the follower created (its directory and record are written) and streams it.
    pub fn add_logdir_run(&self, record: RunRecord) {
        let id = record.id.clone();
        {
            let mut records = self.lock();
            records.insert(id.clone(), record.clone());
            self.save(&record);
        }
        self.hub.follow(&id, &self.store.run_dir(&id));
    }

    /// Streams a logdir run the follower found again (after a restart, or imported before):
    /// `running` again while its logdir is followed.
    pub fn follow_logdir_run(&self, id: &RunId) {
        self.modify(id, |r| {
            if r.state() != RunState::Running {
                r.transition(RunState::Running, now(), Some("followed live from its logdir".into()));
            }
        });
        self.hub.follow(id, &self.store.run_dir(id));
    }

    /// A followed run whose directory left its logdir: `lost`, with the points it had.
    pub async fn lose_logdir_run(&self, id: &RunId) {
        self.hub.finish(id).await;
        self.modify(id, |r| r.transition(RunState::Lost, now(), Some("its directory left the logdir".into())));
    }

    /// Completes the logdir runs left `running` by an earlier server whose logdirs this one
    /// does not watch (`watched`, resolved): nobody will add to them.
    pub async fn complete_unwatched_logdir_runs(&self, watched: &[PathBuf]) {
        let unwatched: Vec<RunId> = self
            .lock()
            .values()
            .filter(|r| is_logdir_run(r) && !r.state().is_final())
            .filter(|r| source_dir(r).is_none_or(|dir| !watched.iter().any(|root| dir.starts_with(root))))
            .map(|r| r.id.clone())
            .collect();
        for id in unwatched {
            self.hub.finish(&id).await;
            self.modify(&id, |r| r.transition(RunState::Completed, now(), None));
        }
    }
}
