//! Slurm runs: submitting the saved script, one polling cycle for every job at a time, and
//! turning what Slurm says into the run's state.
//!
//! A run's files are followed from the moment it is submitted, not from when Slurm is seen
//! to start it: polls are 30 s apart, and a learner must see the first points as soon as the
//! job writes them. Finished runs leave the polled set for good: their record is the cache of
//! their final state, and Slurm is never asked about them again.

use std::sync::Arc;

use scalebook_shared::protocol::{RunHandle, RunId, RunRecord, RunState};

use super::{LastWords, RunManager};
use crate::clock::now;
use crate::executor::outcome;
use crate::executor::slurm::poll::{JobRef, Observation};
use crate::executor::slurm::states::{self, Verdict};
use scalebook_shared::rundir;

impl RunManager {
    /// Polls a Slurm run an earlier server submitted again. One that was never given a job id
    /// (that server stopped while sbatch ran) may or may not be in the queue: it is `lost`,
    /// with the script's path for the user to look it up, never submitted twice.
    pub(super) fn resume_slurm(self: &Arc<Self>, record: &RunRecord) {
        let dir = self.store.run_dir(&record.id);
        if record.handle.is_some() {
            self.hub.follow(&record.id, &dir);
            return;
        }
        let reason = format!("the server stopped while submitting this run; check the queue for {}", dir.join(rundir::SCRIPT).display());
        self.modify(&record.id, |r| r.transition(RunState::Lost, now(), Some(reason)));
    }

    /// Submits run `id`'s saved script; sbatch's refusal fails the run with sbatch's reason.
    pub(super) async fn submit(self: Arc<Self>, id: RunId) {
        let script = self.store.run_dir(&id).join(rundir::SCRIPT);
        match self.executors.slurm.submit(&script).await {
            Ok(submitted) => {
                let handle = submitted.handle();
                let record = self.modify(&id, |r| r.handle = Some(handle.clone()));
                // Cancelled while sbatch ran: the job must not run.
                if record.is_some_and(|r| r.state().is_final()) {
                    self.stop(&id, handle);
                }
            }
            Err(refused) => {
                self.hub.finish(&id).await;
                self.modify(&id, |r| {
                    if !r.state().is_final() {
                        r.transition(RunState::Failed, now(), Some(refused.to_string()));
                    }
                });
            }
        }
    }

    /// The polling loop: every cycle, one batched look at every live Slurm run.
    pub(super) async fn watch_slurm(self: Arc<Self>) {
        loop {
            self.executors.slurm.next_cycle().await;
            let watched: Vec<(RunId, JobRef)> = self.lock().values().filter_map(|r| self.job_of(r)).collect();
            if watched.is_empty() {
                continue;
            }
            let jobs: Vec<JobRef> = watched.iter().map(|(_, job)| job.clone()).collect();
            let observations = self.executors.slurm.poller.observe(&jobs).await;
            for ((id, job), observation) in watched.into_iter().zip(observations) {
                if let Some(observation) = observation {
                    self.apply(&id, job.job_id, observation).await;
                }
            }
        }
    }

    /// The job to poll for a live Slurm run that has one.
    fn job_of(&self, record: &RunRecord) -> Option<(RunId, JobRef)> {
        match &record.handle {
            Some(RunHandle::Slurm { job_id, slurm_cluster }) if !record.state().is_final() => {
                let script = self.store.run_dir(&record.id).join(rundir::SCRIPT);
                Some((record.id.clone(), JobRef { job_id: *job_id, slurm_cluster: slurm_cluster.clone(), script }))
            }
            _ => None,
        }
    }

    /// Records what a cycle learnt about run `id`'s job.
    async fn apply(&self, id: &RunId, job_id: u64, observation: Observation) {
        let Some(record) = self.get(id) else { return };
        let words = LastWords::read(self.store.run_dir(id)).await;
        let checkpoint = words.checkpoint;
        let (verdict, seen) = match observation {
            Observation::Seen(info) => (states::judge(&info, record.cancel_requested, &words.log_tail), Some(info)),
            // Slurm has forgotten the job (no accounting, and it ended long enough ago): the
            // status the script wrote after srun says how it ended.
            Observation::Gone => match (words.exit, record.cancel_requested) {
                (None, false) => {
                    let why = format!("Slurm no longer knows job {job_id}, and it left no exit status");
                    (Verdict::Ended(RunState::Lost, Some(why)), None)
                }
                (exit, cancel_requested) => {
                    let (state, reason) = outcome::decide(exit.as_ref(), cancel_requested, &words.log_tail);
                    (Verdict::Ended(state, reason), None)
                }
            },
        };
        // What Slurm said besides the state; the nodes a job had are kept once it ends.
        let ended = matches!(verdict, Verdict::Ended(..));
        let status = match (seen, &record.slurm) {
            (Some(info), old) => {
                let mut status = info.status(ended);
                status.nodes = status.nodes.or_else(|| old.as_ref().and_then(|o| o.nodes.clone()));
                Some(Box::new(status))
            }
            (None, old) => old.clone(),
        };
        match verdict {
            Verdict::Live(state, reason) if state != record.state() => {
                self.modify(id, |r| {
                    r.transition(state, now(), reason);
                    r.slurm = status;
                });
            }
            Verdict::Live(_, reason) if reason.as_deref() != record.reason() || status != record.slurm => {
                // Still waiting, for a new reason (Priority, then Resources) or at a new place:
                // worth showing, not worth a history entry.
                self.modify(id, |r| {
                    if let Some(last) = r.history.last_mut() {
                        last.reason = reason;
                    }
                    r.slurm = status;
                });
            }
            Verdict::Live(..) => {}
            Verdict::Ended(state, reason) => {
                // The last points first: viewers learn the final state after every point.
                self.hub.finish(id).await;
                self.modify(id, |r| {
                    if !r.state().is_final() {
                        r.transition(state, now(), reason);
                        r.slurm = status;
                        r.checkpoint = checkpoint;
                    }
                });
                self.summarise_profile(id);
            }
        }
    }
}
