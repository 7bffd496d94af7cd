//! The one writer of run records: a thread of its own that writes each changed record to its
//! `run.json`, in the order the changes were made, and only then tells every connection. The
//! async workers never wait on the disk (a slow shared filesystem stalls this thread, not the
//! server), and no browser hears of a change before it is on disk, so what a browser saw is
//! what a restarted server finds.

use std::io;
use std::sync::mpsc;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{RunRecord, ServerMessage};
use tokio::sync::{broadcast, oneshot};

use crate::store::RunStore;
use crate::wire::encode;

enum Job {
    Write(Box<RunRecord>),
    /// Answered once every job queued before it is done.
    Flush(oneshot::Sender<()>),
}

pub(super) struct RecordWriter {
    queue: mpsc::Sender<Job>,
}

impl RecordWriter {
    /// Starts the writer thread; it ends when the writer is dropped, after the queued writes.
    pub(super) fn start(store: RunStore, updates: broadcast::Sender<Utf8Bytes>) -> io::Result<RecordWriter> {
        let (queue, jobs) = mpsc::channel();
        std::thread::Builder::new().name("run-records".into()).spawn(move || {
            for job in jobs {
                match job {
                    Job::Write(record) => {
                        if let Err(e) = store.write_record(&record) {
                            tracing::warn!("cannot record run {}: {e}", record.id);
                        }
                        let _ = updates.send(encode(&ServerMessage::RunUpdate { run: super::for_clients(*record) }));
                    }
                    Job::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        })?;
        Ok(RecordWriter { queue })
    }

    /// Queues a write of `record`; every connection gets it as a `run_update` once written.
    pub(super) fn save(&self, record: RunRecord) {
        let _ = self.queue.send(Job::Write(Box::new(record)));
    }

    /// Waits until every record queued so far is written.
    pub(super) async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Job::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::{RunId, RunState};
    use serde_json::json;

    use super::*;

    fn record(id: &RunId, step: usize) -> RunRecord {
        let history: Vec<_> = (0..=step).map(|i| json!({ "state": "queued", "at": i as f64 })).collect();
        let record = json!({
            "id": id, "config": "cpu_tiny", "overrides": [], "effective": {},
            "layout": { "sizes": { "tp": 1, "cp": 1, "dp": 1, "pp": 1 }, "order": "tp-cp-dp-pp" },
            "executor": { "kind": "local" }, "history": history, "created_at": 0.0,
        });
        serde_json::from_value(record).unwrap()
    }

    #[tokio::test]
    async fn every_change_is_on_disk_before_anyone_hears_of_it_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::open(dir.path()).unwrap();
        let id = store.create_run_dir(0.0).unwrap();
        let (updates, mut heard) = broadcast::channel(64);
        let writer = RecordWriter::start(store.clone(), updates).unwrap();
        for step in 0..20 {
            writer.save(record(&id, step));
        }
        let on_disk = || -> RunRecord {
            serde_json::from_str(&std::fs::read_to_string(store.run_dir(&id).join(scalebook_shared::rundir::RECORD)).unwrap()).unwrap()
        };
        for step in 0..20 {
            let text = heard.recv().await.unwrap();
            let ServerMessage::RunUpdate { run } = serde_json::from_str(text.as_str()).unwrap() else { panic!("{text}") };
            assert_eq!(run.history.len(), step + 1, "updates out of order");
            // Written before it was sent: the file holds this change or a later one.
            assert!(on_disk().history.len() > step);
        }
        writer.save(record(&id, 30));
        writer.flush().await;
        assert_eq!(on_disk().history.len(), 31);
        assert_eq!(on_disk().state(), RunState::Queued);
    }
}
