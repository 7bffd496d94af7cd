//! Runs of a class that train on another server: on a learner's, the instructor's runs, whose
//! files the follower copies here as they arrive from the class listener
//! (`crate::class::follow`); on the instructor's, the learners' runs the instructor charts,
//! copied as their followers send them (`crate::class::shared`). Each has a run directory and
//! record like any other, so the pages list, chart and resume them as they do this server's
//! own; nothing of them runs here, and only their owner can stop them.

use scalebook_shared::protocol::{RunHandle, RunId, RunRecord};

use super::RunManager;

/// Whether a run is a copy of a class's run that trains elsewhere: the instructor's (on a
/// follower) or a learner's (on the instructor's server).
pub fn is_class_run(record: &RunRecord) -> bool {
    matches!(record.handle, Some(RunHandle::Class { .. } | RunHandle::Shared { .. }))
}

impl RunManager {
    /// Records `record` (a class run whose directory was made for it) as it stands upstream,
    /// telling the connections only when it changed. A live run's files are streamed; one that
    /// ended has its files read one last time first, so its viewers get every point copied
    /// before they hear it ended, and its stream stops polling.
    pub async fn class_run(&self, record: RunRecord) {
        let id = record.id.clone();
        match record.state().is_final() {
            true => self.hub.finish(&id).await,
            false => self.hub.follow(&id, &self.store.run_dir(&id)),
        }
        let mut records = self.lock();
        if records.get(&id) != Some(&record) {
            records.insert(id.clone(), record.clone());
            self.save(&record);
        }
    }

    /// Lines were copied into class run `id` after it ended (the backlog of a run that ended
    /// before this server joined): its viewers get them now.
    pub async fn class_run_grew(&self, id: &RunId) {
        self.hub.finish(id).await;
    }

    /// The class is no longer followed: the streams of its runs read their files one last
    /// time and stop polling (a run still running upstream keeps its state until the class is
    /// followed again).
    pub async fn class_left(&self) {
        let followed = |r: &&RunRecord| matches!(r.handle, Some(RunHandle::Class { .. }));
        let ids: Vec<RunId> = self.lock().values().filter(followed).map(|r| r.id.clone()).collect();
        for id in ids {
            self.hub.finish(&id).await;
        }
    }
}
