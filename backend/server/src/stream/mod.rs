//! Live streaming of runs to browsers: one follower per run, however many viewers.
//!
//! A stream exists while its run is active or someone watches it. Each has one task that reads
//! the run's files as soon as the kernel says they changed (inotify, [`changes`]: a point
//! reaches the browsers within milliseconds of the trainer's write), and in any case every
//! [`POLL_INTERVAL`] while the run is active: the shared filesystems Slurm jobs write to tell
//! inotify nothing. It retires the stream once the run has ended and the last viewer has left.

mod changes;
pub mod feed;
pub mod tail;

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use scalebook_shared::protocol::RunId;

pub use feed::{Backlog, Cursor, Frame, RunFeed, Subscription};

/// How often an active run's files are read when no change was reported.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Default)]
pub struct Hub {
    streams: Mutex<HashMap<RunId, Arc<Entry>>>,
}

struct Entry {
    feed: RunFeed,
    /// The run may still write: keep polling.
    active: AtomicBool,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HashMap<RunId, Arc<Entry>>> {
        self.streams.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts following run `id` (it started, or a restarted server found it running).
    pub fn follow(self: &Arc<Self>, id: &RunId, run_dir: &Path) {
        let mut streams = self.lock();
        self.entry(&mut streams, id, run_dir).active.store(true, Ordering::SeqCst);
    }

    /// The run ended: reads its files one last time, so viewers get every point before they
    /// learn the final state, then stops polling.
    pub async fn finish(&self, id: &RunId) {
        let entry = self.lock().get(id).cloned();
        if let Some(entry) = entry {
            entry.active.store(false, Ordering::SeqCst);
            read(entry, id).await;
        }
    }

    /// Subscribes a viewer to run `id` (whose files are in `run_dir`), once the stream has
    /// read the files up to now.
    pub async fn subscribe(
        self: &Arc<Self>,
        id: &RunId,
        run_dir: &Path,
        after_points: Option<u64>,
        after_log: Option<u64>,
    ) -> io::Result<Subscription> {
        // Holding the entry keeps the stream from being retired before the viewer is in
        // (see `follow`); the files are read on a blocking thread, not under the hub's lock.
        let entry = {
            let mut streams = self.lock();
            self.entry(&mut streams, id, run_dir)
        };
        let id = id.clone();
        let subscribed = tokio::task::spawn_blocking(move || {
            if let Err(e) = entry.feed.poll() {
                tracing::warn!("run {id}: cannot read its files: {e}");
            }
            entry.feed.subscribe(after_points, after_log)
        });
        subscribed.await.map_err(io::Error::other)?
    }

    /// The stream of run `id`, created if there is none (its task reads the files at once).
    fn entry(self: &Arc<Self>, streams: &mut HashMap<RunId, Arc<Entry>>, id: &RunId, run_dir: &Path) -> Arc<Entry> {
        if let Some(entry) = streams.get(id) {
            return entry.clone();
        }
        let entry = Arc::new(Entry { feed: RunFeed::new(id.clone(), run_dir), active: AtomicBool::new(false) });
        streams.insert(id.clone(), entry.clone());
        tokio::spawn(follow(Arc::downgrade(self), id.clone(), entry.clone(), run_dir.to_owned()));
        entry
    }
}

/// Reads a stream's files up to now, on a blocking thread: a slow filesystem (a cluster's
/// shared one) must not hold up the async workers.
async fn read(entry: Arc<Entry>, id: &RunId) {
    match tokio::task::spawn_blocking(move || entry.feed.poll()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("run {id}: cannot read its files: {e}"),
        Err(e) => tracing::warn!("run {id}: the reader stopped: {e}"),
    }
}

/// The one task per stream: polls while the run is active, and removes the stream once the
/// run has ended and nobody watches it any more.
async fn follow(hub: std::sync::Weak<Hub>, id: RunId, entry: Arc<Entry>, run_dir: std::path::PathBuf) {
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut changes = changes::Changes::watch(&run_dir);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = changes.next() => {}
        }
        let Some(hub) = hub.upgrade() else { return };
        if entry.active.load(Ordering::SeqCst) {
            read(entry.clone(), &id).await;
            continue;
        }
        // Checked under the hub's lock: a viewer subscribing now either holds this entry
        // (it has more owners than the hub and this task) and keeps it alive, or will create
        // a fresh one.
        let mut streams = hub.lock();
        let held = Arc::strong_count(&entry) > 2;
        if entry.feed.viewers() == 0 && !held && !entry.active.load(Ordering::SeqCst) {
            streams.remove(&id);
            return;
        }
    }
}
