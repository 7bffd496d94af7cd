//! Runs: creating them from validated launches, starting them (local runs in order within the
//! limit of local ranks, Slurm runs at once as batch jobs), watching them end, cancelling
//! them, and finding them all again when the server restarts.
//!
//! Every change is written to the run's `run.json` before anyone is told about it, so what a
//! browser saw is always what a restarted server will find ([`records`]); the run directory
//! is read and written on blocking threads, never on the async workers.

mod class;
mod local;
pub mod logdir;
mod queue;
mod records;
mod slurm;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::machine::MachineModel;
use scalebook_shared::protocol::{ExecutorSpec, Learner, RunHandle, RunId, RunRecord, RunState};
use tokio::sync::broadcast;

use crate::Error;
use crate::clock::now;
use crate::executor::TrainSpec;
use crate::executor::local::LocalExecutor;
use crate::executor::slurm::SlurmExecutor;
use crate::learners::{self, LearnerLaunch};
use crate::logdir::is_logdir_run;
use crate::plan::{LaunchPlan, Target};
use crate::predict::Predictor;
use crate::profiles;
use crate::store::{self, RunStore};
use crate::stream::{Hub, Subscription};
use scalebook_shared::rundir::{self, ExitRecord};

pub use self::class::is_class_run;
use self::records::RecordWriter;

/// How much of the end of `job.log` the state mapping reads.
const LOG_TAIL_BYTES: u64 = 16 << 10;

/// What a run's files say about how it ended: the exit status its supervisor or batch script
/// recorded (`exit.json`), the end of its job log, and whether it left a checkpoint to go on
/// from (what its record tells the pages, which offer Resume only then).
#[derive(Debug, Default)]
struct LastWords {
    exit: Option<ExitRecord>,
    log_tail: String,
    checkpoint: bool,
}

impl LastWords {
    /// Reads them on a blocking thread; missing or unreadable files say nothing.
    async fn read(dir: PathBuf) -> LastWords {
        let read = move || {
            let exit = std::fs::read_to_string(dir.join(rundir::EXIT))
                .ok()
                .and_then(|text| serde_json::from_str(&text).map_err(|e| tracing::warn!("{}: {e}", dir.join(rundir::EXIT).display())).ok());
            let log_tail = store::read_tail(&dir.join(rundir::JOB_LOG), LOG_TAIL_BYTES).unwrap_or_default();
            let checkpoint = rundir::RunDir::new(&dir).checkpoint_position().is_file();
            LastWords { exit, log_tail, checkpoint }
        };
        tokio::task::spawn_blocking(read).await.unwrap_or_default()
    }
}

/// Where runs execute, and the local limit.
pub struct Executors {
    pub local: LocalExecutor,
    /// Local rank processes that may run at once: a run of N ranks takes N, and a run larger
    /// than the limit runs alone.
    pub max_local_ranks: usize,
    pub slurm: SlurmExecutor,
    /// How each run's prediction is made at launch.
    pub predictor: Predictor,
}

pub struct RunManager {
    store: RunStore,
    executors: Executors,
    hub: Arc<Hub>,
    records: Mutex<BTreeMap<RunId, RunRecord>>,
    writer: RecordWriter,
    /// `run_update` messages, for every connection (sent by the writer).
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
        let updates = broadcast::channel(256).0;
        let manager = Arc::new(RunManager {
            writer: RecordWriter::start(store.clone(), updates.clone())?,
            store,
            executors,
            hub: Arc::default(),
            records: Mutex::new(records.iter().map(|r| (r.id.clone(), r.clone())).collect()),
            updates,
        });
        // Runs read from a logdir are taken up by the logdir follower, if this server has one.
        // Runs of a class are the follower's, while it follows.
        for record in records.iter().filter(|r| !r.state().is_final() && !is_logdir_run(r) && !is_class_run(r)) {
            match record.executor {
                ExecutorSpec::Local => manager.resume_local(record),
                ExecutorSpec::Slurm(_) => manager.resume_slurm(record),
            }
        }
        // Profiles written while this server was away are summarised now, so pages find them ready.
        manager.summarise_profiles(records.iter().filter(|r| r.state().is_final() && !is_class_run(r)).map(|r| r.id.clone()).collect());
        manager.schedule();
        tokio::spawn(manager.clone().watch_slurm());
        Ok(manager)
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    /// When Slurm last answered this server's poll (`None`: never, or no Slurm run yet).
    pub fn slurm_answered_at(&self) -> Option<f64> {
        self.executors.slurm.poller.answered_at()
    }

    pub fn max_local_ranks(&self) -> usize {
        self.executors.max_local_ranks
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<RunId, RunRecord>> {
        self.records.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every run, oldest first, as written: what a client is shown is what a restarted
    /// server will find.
    pub async fn list(&self) -> Vec<RunRecord> {
        let records = self.lock().values().cloned().collect();
        // Every change in the snapshot was queued for writing under the lock: wait for those.
        self.writer.flush().await;
        records
    }

    /// Run `id`'s record, as written (see [`list`](Self::list)).
    pub async fn record(&self, id: &RunId) -> Option<RunRecord> {
        let record = self.get(id);
        self.writer.flush().await;
        record
    }

    /// The record as it stands, perhaps a change ahead of the disk.
    fn get(&self, id: &RunId) -> Option<RunRecord> {
        self.lock().get(id).cloned()
    }

    /// Run `id` ended: its profile, if it wrote one, is summarised now in the background (and
    /// its traces' first excerpts made), so the first page to ask gets them at once rather than
    /// after its traces are read.
    fn summarise_profile(&self, id: &RunId) {
        self.summarise_profiles(vec![id.clone()]);
    }

    /// Summarises the profiles of runs `ids` that have one, one after another, in the
    /// background (a run without a profile, or whose summary is kept, costs a directory read).
    fn summarise_profiles(&self, ids: Vec<RunId>) {
        let store = self.store.clone();
        tokio::spawn(async move {
            for id in ids {
                if let Err(e) = profiles::prepare(&store.run_dir(&id)).await {
                    tracing::warn!("run {id}: its profile is not summarised: {e}");
                }
            }
        });
    }

    /// Every run as clients are told it (see [`for_clients`]).
    pub async fn shown(&self) -> Vec<RunRecord> {
        self.list().await.into_iter().map(for_clients).collect()
    }

    /// Every later change to any run, as encoded `run_update` messages (see [`for_clients`]).
    pub fn updates(&self) -> broadcast::Receiver<Utf8Bytes> {
        self.updates.subscribe()
    }

    /// Subscribes a viewer to a run's points and log lines.
    pub async fn subscribe(&self, id: &RunId, after_points: Option<u64>, after_log: Option<u64>) -> Result<Subscription, Error> {
        if self.get(id).is_none() {
            return Err(Error::UnknownRun { id: id.clone() });
        }
        Ok(self.hub.subscribe(id, &self.store.run_dir(id), after_points, after_log).await?)
    }

    /// Waits until every change made so far is written to its run's record.
    pub async fn flush(&self) {
        self.writer.flush().await;
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
        self.executors.slurm.script(&title, job, spec, &self.store.run_dir(id))
    }

    /// Creates the run directory and record of a validated launch, queued. A local run starts
    /// as soon as there is room; a Slurm run's script is saved and submitted at once. A
    /// learner's launch is counted against their quota before anything is written, and again
    /// under the lock as the run joins the others (which decides: a learner's other page may
    /// have launched meanwhile).
    pub async fn launch(self: &Arc<Self>, plan: LaunchPlan) -> Result<RunRecord, Error> {
        if let Some(refusal) = plan.learner.as_ref().and_then(|launch| self.quota_refusal(&self.lock(), launch)) {
            return Err(Error::QuotaExceeded(refusal));
        }
        let this = self.clone();
        let created = tokio::task::spawn_blocking(move || -> Result<_, Error> { Ok((this.create_run(&plan)?, plan)) });
        let (record, plan) = created.await.map_err(std::io::Error::other)??;
        let id = record.id.clone();
        {
            // Queued under the lock, so no later change of the run can reach the disk first.
            let mut records = self.lock();
            if let Some(refusal) = plan.learner.as_ref().and_then(|launch| self.quota_refusal(&records, launch)) {
                drop(records);
                let dir = self.store.run_dir(&id);
                tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir));
                return Err(Error::QuotaExceeded(refusal));
            }
            records.insert(id.clone(), record.clone());
            self.save(&record);
        }
        match plan.target {
            Target::Local => self.schedule(),
            Target::Slurm { .. } => {
                self.hub.follow(&id, &self.store.run_dir(&id));
                tokio::spawn(self.clone().submit(id.clone()));
            }
        }
        if let Some(launch) = &plan.learner {
            self.prune(&launch.learner).await;
        }
        Ok(self.get(&id).unwrap_or(record))
    }

    /// Keeps at most [`learners::MAX_STORED_RUNS`] ended runs of `learner`, removing the
    /// oldest: a learner launching all afternoon fills neither the disk nor every page's list.
    async fn prune(&self, learner: &Learner) {
        let old = learners::beyond_kept(self.lock().values(), learner);
        for id in old {
            self.forget(&id, "a learner's oldest ended run, beyond those kept").await;
        }
    }

    fn quota_refusal(&self, records: &BTreeMap<RunId, RunRecord>, launch: &LearnerLaunch) -> Option<String> {
        learners::quota_refusal(records.values(), &launch.learner, launch.per_learner)
    }

    /// The directory of a new run and the files it starts with: its config, its batch script
    /// (Slurm runs), its record. Either all of them are written, or nothing is left behind for
    /// the next server to trip over.
    fn create_run(&self, plan: &LaunchPlan) -> Result<RunRecord, Error> {
        let created_at = now();
        let id = self.store.create_run_dir(created_at)?;
        let dir = self.store.run_dir(&id);
        let record = RunRecord {
            overrides: plan.overrides.clone(),
            effective: plan.effective.to_json(),
            seed: plan.seed,
            learner: plan.learner.as_ref().map(|launch| launch.learner.clone()),
            device: plan.device,
            time_limit_s: plan.time_limit.map(|limit| limit.as_secs()),
            ..RunRecord::new(id.clone(), plan.config.clone(), plan.layout.clone(), plan.executor.clone(), created_at, RunState::Queued)
        };
        let written = (|| -> Result<(), Error> {
            std::fs::write(dir.join(rundir::CONFIG), plan.effective.to_yaml(&plan.config))?;
            self.write_prediction(&dir, plan, created_at);
            if let Target::Slurm { .. } = plan.target {
                std::fs::write(dir.join(rundir::SCRIPT), self.script(&id, plan)?)?;
            }
            Ok(self.store.write_record(&record)?)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        Ok(record)
    }

    /// This machine's measurement, as local runs are predicted from it (blocks while it is
    /// measured the first time).
    pub fn machine(&self) -> Result<MachineModel, String> {
        self.executors.predictor.machine()
    }

    /// The run's prediction, before anything starts. A run that cannot be predicted still runs
    /// (the reason is logged, and the page shows no prediction for it).
    fn write_prediction(&self, dir: &std::path::Path, plan: &LaunchPlan, created_at: f64) {
        let written = self
            .executors
            .predictor
            .predict(plan, created_at as u64)
            .and_then(|p| serde_json::to_vec_pretty(&p).map_err(|e| e.to_string()))
            .and_then(|json| std::fs::write(dir.join(rundir::PREDICTION), json).map_err(|e| e.to_string()));
        if let Err(reason) = written {
            tracing::warn!("no prediction for the run in {}: {reason}", dir.display());
        }
    }

    /// Cancels a run: one that has not started (or not been submitted yet) at once; a running
    /// local one by signalling its process group, a Slurm job with `scancel` (its end is then
    /// recorded as `cancelled` by whoever sees it end). Decided under the lock, so a run that
    /// starts meanwhile is stopped rather than marked cancelled while it trains.
    pub async fn cancel(self: &Arc<Self>, id: &RunId) -> Result<(), Error> {
        let record = self.get(id).ok_or_else(|| Error::UnknownRun { id: id.clone() })?;
        let state = record.state();
        if is_logdir_run(&record) && !state.is_final() {
            return Err(Error::FollowedRun { id: id.clone() });
        }
        match record.handle {
            Some(RunHandle::Class { .. }) => return Err(Error::InstructorsRun { id: id.clone() }),
            Some(RunHandle::Shared { .. }) => return Err(Error::SharedRun { id: id.clone() }),
            _ => {}
        }
        if state.is_final() {
            return Err(Error::NotCancellable { id: id.clone(), state });
        }
        let mut refused = None;
        let record = self
            .modify(id, |r| match (r.state(), &r.handle) {
                (state, _) if state.is_final() => refused = Some(state),
                (RunState::Queued, None) => r.transition(RunState::Cancelled, now(), Some("cancelled before it started".into())),
                _ => r.cancel_requested = true,
            })
            .ok_or_else(|| Error::UnknownRun { id: id.clone() })?;
        if let Some(state) = refused {
            return Err(Error::NotCancellable { id: id.clone(), state });
        }
        match record.handle {
            Some(handle) => self.stop(id, handle),
            // A Slurm run being submitted is followed already; its job, if sbatch still makes
            // one, is cancelled as soon as its id is known.
            None if record.state() == RunState::Cancelled => {
                self.hub.finish(id).await;
                // A learner's launch-and-cancel leaves nothing: no directory, no entry in
                // every page's run list.
                if record.learner.is_some() {
                    self.forget(id, "cancelled before it started").await;
                }
                self.schedule();
            }
            // Started but not yet running a process: it is stopped as soon as it has one.
            None => {}
        }
        Ok(())
    }

    /// Removes run `id` (ended) and its directory, once its last change is written and sent.
    async fn forget(&self, id: &RunId, why: &str) {
        self.writer.flush().await;
        self.lock().remove(id);
        let dir = self.store.run_dir(id);
        match tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await {
            Ok(Ok(())) => tracing::info!("run {id}: removed ({why})"),
            Ok(Err(e)) => tracing::warn!("run {id}: cannot remove its directory: {e}"),
            Err(e) => tracing::warn!("run {id}: cannot remove its directory: {e}"),
        }
    }

    /// Goes on with a run that ended before its last step, from its last checkpoint: the same
    /// run back in the queue, its saved script submitted again (a Slurm run: the script resumes
    /// when it finds a checkpoint) or its ranks started here again with `--resume`. The earlier
    /// attempt's exit status goes first, so nothing reads it as this attempt's; its log, points
    /// and checkpoints stay. A learner's resume (`quota`) counts against their quota as a
    /// launch does.
    pub async fn resume(self: &Arc<Self>, id: &RunId, quota: Option<&LearnerLaunch>) -> Result<(), Error> {
        let dir = self.store.run_dir(id);
        let has_checkpoint = rundir::RunDir::new(&dir).checkpoint_position().is_file();
        let record = {
            let mut records = self.lock();
            let record = records.get(id).ok_or_else(|| Error::UnknownRun { id: id.clone() })?;
            let why = match (&record.handle, record.state()) {
                (Some(RunHandle::Logdir { .. } | RunHandle::Class { .. } | RunHandle::Shared { .. }), _) => Some("it trains elsewhere"),
                (_, RunState::Completed) => Some("it completed"),
                (_, state) if !state.is_final() => Some("it has not ended"),
                _ if !has_checkpoint => Some("it saved no checkpoint to go on from (one is saved after every epoch)"),
                _ => None,
            };
            if let Some(why) = why {
                return Err(Error::NotResumable { id: id.clone(), why: why.to_owned() });
            }
            if let Some(refusal) = quota.and_then(|launch| self.quota_refusal(&records, launch)) {
                return Err(Error::QuotaExceeded(refusal));
            }
            let record = records.get_mut(id).ok_or_else(|| Error::UnknownRun { id: id.clone() })?;
            record.cancel_requested = false;
            record.handle = None;
            record.transition(RunState::Queued, now(), Some("resuming from its last checkpoint".into()));
            self.save(record);
            record.clone()
        };
        // Before anything starts the new attempt (outside the lock: no file work under it).
        let _ = std::fs::remove_file(dir.join(rundir::EXIT));
        match record.executor {
            ExecutorSpec::Local => self.schedule(),
            ExecutorSpec::Slurm(_) => {
                self.hub.follow(id, &dir);
                tokio::spawn(self.clone().submit(id.clone()));
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
                RunHandle::Slurm { job_id, slurm_cluster } => {
                    this.executors.slurm.cancel(*job_id, slurm_cluster.as_deref()).await.map_err(|e| e.to_string())
                }
                RunHandle::Logdir { .. } => Err("it trains elsewhere; its logdir is only read here".to_owned()),
                RunHandle::Class { .. } => Err("it is the instructor's; it trains on their side".to_owned()),
                RunHandle::Shared { .. } => Err("it is a learner's; it trains on their side".to_owned()),
            };
            if let Err(e) = stopped {
                tracing::warn!("cannot stop run {id} ({handle:?}): {e}");
            }
        });
    }

    /// Changes a run's record, has it written, and every connection told. It is queued
    /// under the lock, so concurrent changes reach the disk in the order they were made.
    fn modify(&self, id: &RunId, change: impl FnOnce(&mut RunRecord)) -> Option<RunRecord> {
        let mut records = self.lock();
        let record = records.get_mut(id)?;
        change(record);
        self.save(record);
        Some(record.clone())
    }

    /// Queues `record`'s write; the connections hear of it once it is on disk.
    fn save(&self, record: &RunRecord) {
        self.writer.save(record.clone());
    }
}

/// `record` as a page, a follower or the REST API is told it: without what only this server's
/// own processes need (a local run's process group and its start time), which no client has any
/// use for.
pub fn for_clients(mut record: RunRecord) -> RunRecord {
    if matches!(record.handle, Some(RunHandle::Local { .. })) {
        record.handle = None;
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_last_words_say_whether_a_checkpoint_is_there_to_go_on_from() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!LastWords::read(dir.path().to_owned()).await.checkpoint, "a run that saved none");
        let position = rundir::RunDir::new(dir.path()).checkpoint_position();
        std::fs::create_dir_all(position.parent().unwrap()).unwrap();
        std::fs::write(&position, "{}").unwrap();
        assert!(LastWords::read(dir.path().to_owned()).await.checkpoint);
    }
}
