//! Local runs: starting queued ones in their order while there is room, waiting for each to end,
//! and picking up the ones an earlier server started.

use std::sync::Arc;
use std::time::Duration;

use scalebook_shared::protocol::{ExecutorSpec, RunHandle, RunId, RunRecord, RunState};

use super::{LastWords, RunManager, is_class_run, queue};
use crate::clock::now;
use crate::executor::local::LocalExecutor;
use crate::executor::outcome;
use crate::executor::process;
use crate::logdir::is_logdir_run;
use scalebook_shared::machine::is_busy;
use scalebook_shared::rundir::ExitRecord;

/// How often a run started by an earlier server is checked for having ended (it is not our
/// child, so there is no exit to wait for).
const ADOPTED_POLL: Duration = Duration::from_millis(500);

/// Whether a run trains on this machine (a run read from a logdir, or copied from the class
/// this server follows, is recorded as the instructor launched it, but runs elsewhere: it
/// takes no slot, and is never started here).
fn is_local(record: &RunRecord) -> bool {
    record.executor == ExecutorSpec::Local && !is_logdir_run(record) && !is_class_run(record)
}

impl RunManager {
    /// Follows a local run an earlier server left running, or records how it ended.
    pub(super) fn resume_local(self: &Arc<Self>, record: &RunRecord) {
        if record.state() != RunState::Running {
            return;
        }
        match &record.handle {
            Some(RunHandle::Local { pgid, start_ticks }) if process::leader_alive(*pgid, *start_ticks) => {
                self.hub.follow(&record.id, &self.store.run_dir(&record.id));
                tokio::spawn(self.clone().watch_adopted(record.id.clone(), *pgid, *start_ticks));
            }
            // Ended while no server watched. Its group id is not touched: after a reboot it
            // may name someone else's processes.
            _ => {
                tokio::spawn(self.clone().end(record.id.clone(), None, None));
            }
        }
    }

    /// Starts queued local runs as [`queue::plan`] says (the instructor's oldest first, then
    /// the learners' by turns, while their ranks fit in the limit), and gives each run left
    /// waiting the reason it waits, so its state line says what it waits for.
    pub(super) fn schedule(self: &Arc<Self>) {
        let to_start: Vec<RunId> = {
            let mut records = self.lock();
            let local: Vec<&RunRecord> = records.values().filter(|r| is_local(r)).collect();
            let plan = queue::plan(&local, self.executors.max_local_ranks);
            let queued: Vec<RunId> = plan.start.iter().map(|r| r.id.clone()).collect();
            let waiting: Vec<(RunId, String)> =
                plan.waiting.into_iter().filter(|(r, why)| r.reason() != Some(why.as_str())).map(|(r, why)| (r.id.clone(), why)).collect();
            for id in &queued {
                if let Some(record) = records.get_mut(id) {
                    // Recorded as running before the process exists: a server killed in
                    // between leaves a run that is found `lost`, never one started twice.
                    record.transition(RunState::Running, now(), None);
                    self.save(record);
                }
            }
            // Still queued, for a new reason: worth showing, not worth a history entry.
            for (id, why) in waiting {
                if let Some(record) = records.get_mut(&id) {
                    if let Some(last) = record.history.last_mut() {
                        last.reason = Some(why);
                    }
                    self.save(record);
                }
            }
            queued
        };
        for id in to_start {
            self.start(&id);
        }
    }

    fn start(self: &Arc<Self>, id: &RunId) {
        let Some(record) = self.get(id) else { return };
        let dir = self.store.run_dir(id);
        match self.executors.local.start(&record, &dir) {
            Ok(started) => {
                let handle = RunHandle::Local { pgid: started.pgid, start_ticks: started.start_ticks };
                let record = self.modify(id, |r| r.handle = Some(handle.clone()));
                self.hub.follow(id, &dir);
                if record.is_some_and(|r| r.cancel_requested) {
                    self.stop(id, handle);
                }
                let (this, id, mut child) = (self.clone(), id.clone(), started.child);
                tokio::spawn(async move {
                    let status = child.wait().await;
                    this.end(id, Some(started.pgid), status.ok().map(crate::executor::exit_record)).await;
                });
            }
            Err(e) => {
                self.modify(id, |r| r.transition(RunState::Failed, now(), Some(format!("cannot start the run: {e}"))));
                self.schedule();
            }
        }
    }

    /// Waits for a run this server did not start to end.
    async fn watch_adopted(self: Arc<Self>, id: RunId, pgid: u32, start_ticks: u64) {
        while process::leader_alive(pgid, start_ticks) {
            tokio::time::sleep(ADOPTED_POLL).await;
        }
        self.end(id, Some(pgid), None).await;
    }

    /// Records how a run ended once its supervisor has exited: whatever is left of its
    /// process group is killed first, then the state is decided from `exit.json` when the
    /// supervisor wrote it, else from `fallback` (the supervisor's own status, when it was
    /// our child and got killed).
    async fn end(self: Arc<Self>, id: RunId, pgid: Option<u32>, fallback: Option<ExitRecord>) {
        if let Some(pgid) = pgid {
            LocalExecutor::clear_group(pgid).await;
        }
        let words = LastWords::read(self.store.run_dir(&id)).await;
        let exit = words.exit.or(fallback);
        self.hub.finish(&id).await;
        self.modify(&id, |r| {
            if !r.state().is_final() {
                let (state, reason) = outcome::decide(exit.as_ref(), r.cancel_requested, &words.log_tail);
                r.transition(state, now(), reason);
                r.checkpoint = words.checkpoint;
            }
        });
        self.summarise_profile(&id);
        if self.get(&id).is_some_and(|r| r.state() == RunState::Completed) {
            // It reads the run's whole metrics file: on a blocking thread, not an async worker.
            let (runs, dir) = (self.clone(), self.store.run_dir(&id));
            let _ = tokio::task::spawn_blocking(move || {
                let idle_now = crate::machine::load_now().is_some_and(|load| !is_busy(load.one_minute, load.cores));
                runs.executors.predictor.review(&dir, idle_now);
            })
            .await;
        }
        self.schedule();
    }
}
