//! Runs: creating them from validated launches, starting them in order within the limit of
//! concurrent local runs, watching them end, cancelling them, and finding them all again when
//! the server restarts.
//!
//! Every change is written to the run's `run.json` before anyone is told about it, so what a
//! browser saw is always what a restarted server will find.

pub mod outcome;
pub mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{RunHandle, RunId, RunRecord, RunState, ServerMessage, StateChange};
use tokio::sync::broadcast;

use self::store::{EXIT_FILE, JOB_LOG, RunStore};
use crate::Error;
use crate::clock::now;
use crate::executor::ExitRecord;
use crate::executor::local::LocalExecutor;
use crate::executor::process;
use crate::launch::LaunchPlan;
use crate::stream::{Hub, Subscription, run_stream::encode};

/// How often a run started by an earlier server is checked for having ended (it is not our
/// child, so there is no exit to wait for).
const ADOPTED_POLL: Duration = Duration::from_millis(500);
/// How much of the end of `job.log` the state mapping reads.
const LOG_TAIL_BYTES: u64 = 16 << 10;

pub struct RunManager {
    store: RunStore,
    local: LocalExecutor,
    max_local: usize,
    hub: Arc<Hub>,
    records: Mutex<BTreeMap<RunId, RunRecord>>,
    /// `run_update` messages, for every connection.
    updates: broadcast::Sender<Utf8Bytes>,
}

impl RunManager {
    /// Loads every run from `store` and picks each one up where it stands: running ones are
    /// followed again (or given their final state if they ended meanwhile), queued ones start
    /// as slots free up. Must be called inside the Tokio runtime.
    pub fn open(store: RunStore, local: LocalExecutor, max_local: usize) -> Result<Arc<RunManager>, Error> {
        let records = store.load_all()?;
        let manager = Arc::new(RunManager {
            store,
            local,
            max_local: max_local.max(1),
            hub: Arc::default(),
            records: Mutex::new(records.iter().map(|r| (r.id.clone(), r.clone())).collect()),
            updates: broadcast::channel(256).0,
        });
        for record in records.iter().filter(|r| r.state() == RunState::Running) {
            match &record.handle {
                Some(RunHandle::Local { pgid, start_ticks }) if process::leader_alive(*pgid, *start_ticks) => {
                    manager.hub.follow(&record.id, &manager.store.run_dir(&record.id));
                    tokio::spawn(manager.clone().watch_adopted(record.id.clone(), *pgid, *start_ticks));
                }
                // Ended while no server watched. Its group id is not touched: after a reboot
                // it may name someone else's processes.
                _ => {
                    tokio::spawn(manager.clone().end(record.id.clone(), None, None));
                }
            }
        }
        manager.schedule();
        Ok(manager)
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    pub fn max_local(&self) -> usize {
        self.max_local
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<RunId, RunRecord>> {
        self.records.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every run, oldest first.
    pub fn list(&self) -> Vec<RunRecord> {
        self.lock().values().cloned().collect()
    }

    pub fn get(&self, id: &RunId) -> Option<RunRecord> {
        self.lock().get(id).cloned()
    }

    /// Every later change to any run, as encoded `run_update` messages.
    pub fn updates(&self) -> broadcast::Receiver<Utf8Bytes> {
        self.updates.subscribe()
    }

    /// Subscribes a viewer to a run's points and log lines.
    pub fn subscribe(&self, id: &RunId, after_points: Option<u64>, after_log: Option<u64>) -> Result<Subscription, Error> {
        if self.get(id).is_none() {
            return Err(Error::UnknownRun { id: id.clone() });
        }
        Ok(self.hub.subscribe(id, &self.store.run_dir(id), after_points, after_log)?)
    }

    /// Creates the run directory and record of a validated launch, queued; it starts as soon
    /// as a slot is free.
    pub fn launch(self: &Arc<Self>, plan: LaunchPlan) -> Result<RunRecord, Error> {
        let created_at = now();
        let id = self.store.create_run_dir(created_at)?;
        let dir = self.store.run_dir(&id);
        let record = RunRecord {
            id: id.clone(),
            config: plan.config.clone(),
            overrides: plan.overrides,
            effective: plan.effective.to_json(),
            layout: plan.layout,
            executor: plan.executor,
            seed: plan.seed,
            history: vec![StateChange { state: RunState::Queued, at: created_at, reason: None }],
            created_at,
            started_at: None,
            ended_at: None,
            handle: None,
            cancel_requested: false,
        };
        let written = std::fs::write(dir.join(store::CONFIG_FILE), plan.effective.to_yaml(&plan.config))
            .and_then(|()| self.store.write_record(&record));
        if let Err(e) = written {
            // Leave no half-made run behind for the next server to trip over.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e.into());
        }
        self.lock().insert(id.clone(), record.clone());
        self.publish(&record);
        self.schedule();
        Ok(self.get(&id).unwrap_or(record))
    }

    /// Cancels a run: a queued one at once; a running one by signalling its process group
    /// (its end is then recorded as `cancelled` by whoever sees it end).
    pub fn cancel(self: &Arc<Self>, id: &RunId) -> Result<(), Error> {
        let state = self.get(id).ok_or_else(|| Error::UnknownRun { id: id.clone() })?.state();
        match state {
            RunState::Queued => {
                self.modify(id, |r| r.transition(RunState::Cancelled, now(), Some("cancelled before it started".into())));
            }
            RunState::Running => {
                let record = self.modify(id, |r| r.cancel_requested = true);
                if let Some(handle) = record.and_then(|r| r.handle) {
                    self.terminate(id, handle);
                }
            }
            state => return Err(Error::NotCancellable { id: id.clone(), state }),
        }
        Ok(())
    }

    fn terminate(&self, id: &RunId, handle: RunHandle) {
        let id = id.clone();
        tokio::spawn(async move {
            let RunHandle::Local { pgid, start_ticks } = handle;
            if let Err(e) = LocalExecutor::terminate(pgid, start_ticks).await {
                eprintln!("warning: cannot stop run {id} (process group {pgid}): {e}");
            }
        });
    }

    /// Starts queued runs, oldest first, while fewer than `max_local` run.
    fn schedule(self: &Arc<Self>) {
        let to_start: Vec<RunId> = {
            let mut records = self.lock();
            let running = records.values().filter(|r| r.state() == RunState::Running).count();
            let free = self.max_local.saturating_sub(running);
            let queued: Vec<RunId> = records.values().filter(|r| r.state() == RunState::Queued).map(|r| r.id.clone()).take(free).collect();
            for id in &queued {
                if let Some(record) = records.get_mut(id) {
                    // Recorded as running before the process exists: a server killed in
                    // between leaves a run that is found `lost`, never one started twice.
                    record.transition(RunState::Running, now(), None);
                    self.save(record);
                }
            }
            queued
        };
        for id in to_start {
            if let Some(record) = self.get(&id) {
                self.publish(&record);
            }
            self.start(&id);
        }
    }

    fn start(self: &Arc<Self>, id: &RunId) {
        let Some(record) = self.get(id) else { return };
        let dir = self.store.run_dir(id);
        match self.local.start(&record, &dir) {
            Ok(started) => {
                let handle = RunHandle::Local { pgid: started.pgid, start_ticks: started.start_ticks };
                let record = self.modify(id, |r| r.handle = Some(handle.clone()));
                self.hub.follow(id, &dir);
                if record.is_some_and(|r| r.cancel_requested) {
                    self.terminate(id, handle);
                }
                let (this, id, mut child) = (self.clone(), id.clone(), started.child);
                tokio::spawn(async move {
                    let status = child.wait().await;
                    this.end(id, Some(started.pgid), status.ok().map(ExitRecord::from_status)).await;
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
        let dir = self.store.run_dir(&id);
        let exit = read_exit(&dir.join(EXIT_FILE)).or(fallback);
        let tail = store::read_tail(&dir.join(JOB_LOG), LOG_TAIL_BYTES).unwrap_or_default();
        self.hub.finish(&id);
        self.modify(&id, |r| {
            if !r.state().is_final() {
                let (state, reason) = outcome::decide(exit.as_ref(), r.cancel_requested, &tail);
                r.transition(state, now(), reason);
            }
        });
        self.schedule();
    }

    /// Changes a run's record, writes it, and tells every connection. The file is written
    /// under the lock, so concurrent changes reach the disk in the order they were made.
    fn modify(&self, id: &RunId, change: impl FnOnce(&mut RunRecord)) -> Option<RunRecord> {
        let record = {
            let mut records = self.lock();
            let record = records.get_mut(id)?;
            change(record);
            self.save(record);
            record.clone()
        };
        self.publish(&record);
        Some(record)
    }

    fn save(&self, record: &RunRecord) {
        if let Err(e) = self.store.write_record(record) {
            eprintln!("warning: cannot record run {}: {e}", record.id);
        }
    }

    fn publish(&self, record: &RunRecord) {
        let _ = self.updates.send(encode(&ServerMessage::RunUpdate { run: record.clone() }));
    }
}

fn read_exit(path: &std::path::Path) -> Option<ExitRecord> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).map_err(|e| eprintln!("warning: {}: {e}", path.display())).ok()
}
