//! Runs: creating them from validated launches, starting them (local runs in order within the
//! limit of local ranks, Slurm runs at once as batch jobs), watching them end, cancelling
//! them, and finding them all again when the server restarts.
//!
//! Every change is written to the run's `run.json` before anyone is told about it, so what a
//! browser saw is always what a restarted server will find.

mod local;
mod slurm;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{ExecutorSpec, RunHandle, RunId, RunRecord, RunState, ServerMessage, StateChange};
use tokio::sync::broadcast;

use crate::Error;
use crate::clock::now;
use crate::executor::TrainSpec;
use crate::executor::local::LocalExecutor;
use crate::executor::slurm::SlurmExecutor;
use crate::plan::{LaunchPlan, Target};
use crate::store::RunStore;
use crate::stream::{Hub, Subscription};
use crate::wire::encode;
use scalebook_shared::rundir;

/// How much of the end of `job.log` the state mapping reads.
const LOG_TAIL_BYTES: u64 = 16 << 10;

/// Where runs execute, and the local limit.
pub struct Executors {
    pub local: LocalExecutor,
    /// Local rank processes that may run at once: a run of N ranks takes N, and a run larger
    /// than the limit runs alone.
    pub max_local_ranks: usize,
    pub slurm: SlurmExecutor,
}

pub struct RunManager {
    store: RunStore,
    executors: Executors,
    hub: Arc<Hub>,
    records: Mutex<BTreeMap<RunId, RunRecord>>,
    /// `run_update` messages, for every connection.
    updates: broadcast::Sender<Utf8Bytes>,
}

impl RunManager {
    /// Loads every run from `store` and picks each one up where it stands: running local ones
    /// are followed again (or given their final state if they ended meanwhile), queued ones
    /// start as slots free up, Slurm jobs are polled again. Must be called inside the Tokio
    /// runtime.
    pub fn open(store: RunStore, mut executors: Executors) -> Result<Arc<RunManager>, Error> {
        executors.max_local_ranks = executors.max_local_ranks.max(1);
        let records = store.load_all()?;
        let manager = Arc::new(RunManager {
            store,
            executors,
            hub: Arc::default(),
            records: Mutex::new(records.iter().map(|r| (r.id.clone(), r.clone())).collect()),
            updates: broadcast::channel(256).0,
        });
        for record in records.iter().filter(|r| !r.state().is_final()) {
            match record.executor {
                ExecutorSpec::Local => manager.resume_local(record),
                ExecutorSpec::Slurm(_) => manager.resume_slurm(record),
            }
        }
        manager.schedule();
        tokio::spawn(manager.clone().watch_slurm());
        Ok(manager)
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    pub fn max_local_ranks(&self) -> usize {
        self.executors.max_local_ranks
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

    /// The batch script a Slurm launch would submit, with `RUN_ID` for the id it would get.
    pub fn preview_script(&self, plan: &LaunchPlan) -> Result<String, Error> {
        let placeholder = RunId::parse("RUN_ID").map_err(|e| Error::SlurmScript(e.to_string()))?;
        self.script(&placeholder, plan)
    }

    fn script(&self, id: &RunId, plan: &LaunchPlan) -> Result<String, Error> {
        let Target::Slurm { cluster, job } = &plan.target else {
            return Err(Error::SlurmScript("only a Slurm launch has a batch script".into()));
        };
        let ranks = if job.nodes == 1 {
            format!("{} ranks", job.tasks_per_node)
        } else {
            format!("{} nodes x {} ranks", job.nodes, job.tasks_per_node)
        };
        let data = plan.effective.train_data_path.trim_end_matches("/train");
        let title = format!("Scalebook run {id}: config {} on {cluster}, {ranks}, data in {data}", plan.config);
        let spec = TrainSpec { config: &plan.config, seed: plan.seed };
        self.executors.slurm.script(&title, job, spec, &self.store.run_dir(id)).map_err(Error::SlurmScript)
    }

    /// Creates the run directory and record of a validated launch, queued. A local run starts
    /// as soon as there is room; a Slurm run's script is saved and submitted at once.
    pub fn launch(self: &Arc<Self>, plan: LaunchPlan) -> Result<RunRecord, Error> {
        let created_at = now();
        let id = self.store.create_run_dir(created_at)?;
        let dir = self.store.run_dir(&id);
        let record = RunRecord {
            id: id.clone(),
            config: plan.config.clone(),
            overrides: plan.overrides.clone(),
            effective: plan.effective.to_json(),
            layout: plan.layout.clone(),
            executor: plan.executor.clone(),
            seed: plan.seed,
            history: vec![StateChange { state: RunState::Queued, at: created_at, reason: None }],
            created_at,
            started_at: None,
            ended_at: None,
            handle: None,
            cancel_requested: false,
        };
        if let Err(e) = self.write_new_run(&record, &plan) {
            // Leave no half-made run behind for the next server to trip over.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        self.lock().insert(id.clone(), record.clone());
        self.publish(&record);
        match plan.target {
            Target::Local => self.schedule(),
            Target::Slurm { .. } => {
                self.hub.follow(&id, &dir);
                tokio::spawn(self.clone().submit(id.clone()));
            }
        }
        Ok(self.get(&id).unwrap_or(record))
    }

    /// The files a run starts with: its config, its batch script (Slurm runs), its record.
    fn write_new_run(&self, record: &RunRecord, plan: &LaunchPlan) -> Result<(), Error> {
        let dir = self.store.run_dir(&record.id);
        std::fs::write(dir.join(rundir::CONFIG), plan.effective.to_yaml(&plan.config))?;
        if let Target::Slurm { .. } = plan.target {
            std::fs::write(dir.join(rundir::SCRIPT), self.script(&record.id, plan)?)?;
        }
        Ok(self.store.write_record(record)?)
    }

    /// Cancels a run: one that has not started (or not been submitted yet) at once; a running
    /// local one by signalling its process group, a Slurm job with `scancel` (its end is then
    /// recorded as `cancelled` by whoever sees it end).
    pub fn cancel(self: &Arc<Self>, id: &RunId) -> Result<(), Error> {
        let record = self.get(id).ok_or_else(|| Error::UnknownRun { id: id.clone() })?;
        match (record.state(), &record.handle) {
            (state, _) if state.is_final() => return Err(Error::NotCancellable { id: id.clone(), state }),
            (RunState::Queued, None) => {
                // A Slurm run being submitted is followed already; its job, if sbatch still
                // makes one, is cancelled as soon as its id is known.
                self.hub.finish(id);
                self.modify(id, |r| r.transition(RunState::Cancelled, now(), Some("cancelled before it started".into())));
                self.schedule();
            }
            (_, handle) => {
                self.modify(id, |r| r.cancel_requested = true);
                if let Some(handle) = handle.clone() {
                    self.stop(id, handle);
                }
            }
        }
        Ok(())
    }

    /// Stops a started run: its process group, or its Slurm job.
    fn stop(self: &Arc<Self>, id: &RunId, handle: RunHandle) {
        let (this, id) = (self.clone(), id.clone());
        tokio::spawn(async move {
            let stopped = match &handle {
                RunHandle::Local { pgid, start_ticks } => LocalExecutor::terminate(*pgid, *start_ticks).await.map_err(|e| e.to_string()),
                RunHandle::Slurm { job_id, slurm_cluster } => this.executors.slurm.cancel(*job_id, slurm_cluster.as_deref()).await,
            };
            if let Err(e) = stopped {
                tracing::warn!("cannot stop run {id} ({handle:?}): {e}");
            }
        });
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
            tracing::warn!("cannot record run {}: {e}", record.id);
        }
    }

    fn publish(&self, record: &RunRecord) {
        let _ = self.updates.send(encode(&ServerMessage::RunUpdate { run: record.clone() }));
    }
}
