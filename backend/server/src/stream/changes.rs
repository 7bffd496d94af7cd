//! What the kernel says of a run directory's files: a wake-up as soon as the trainer writes a
//! line, so a point reaches the browsers without waiting for the next poll. Where inotify is
//! not to be had (a shared filesystem tells it nothing; a machine out of watches), nothing is
//! reported and the poll alone carries on.

use std::os::fd::{AsFd as _, AsRawFd, RawFd};
use std::path::Path;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;

/// The changes of one directory's files, or none to report.
pub struct Changes {
    inotify: Option<AsyncFd<Watch>>,
}

/// An inotify instance as Tokio's reactor takes it (by its raw descriptor).
struct Watch(Inotify);

impl AsRawFd for Watch {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Changes {
    /// Watches the files of `dir` for writes, new files and files renamed into it.
    pub fn watch(dir: &Path) -> Changes {
        let watched = || -> std::io::Result<AsyncFd<Watch>> {
            let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
            inotify.add_watch(dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)?;
            // SAFETY: `Watch` owns the inotify descriptor and closes it only when dropped, that
            // is with the `AsyncFd`; `as_raw_fd` always answers that one descriptor.
            #[allow(unsafe_code, reason = "Tokio's registration of a descriptor it does not own; see the SAFETY note")]
            let registered = unsafe { AsyncFd::register(Watch(inotify)) };
            registered.map_err(std::io::Error::from)
        };
        let inotify = watched().map_err(|e| tracing::debug!("{}: no inotify ({e}): polled only", dir.display())).ok();
        Changes { inotify }
    }

    /// Resolves once something changed since the last call (every event waiting is taken at
    /// once); never, without inotify.
    pub async fn next(&mut self) {
        let Some(fd) = &self.inotify else { return std::future::pending().await };
        loop {
            let Ok(mut ready) = fd.readable().await else { return std::future::pending().await };
            match ready.get_inner().0.read_events() {
                Ok(events) if !events.is_empty() => return,
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
                // A broken watch reports nothing more: the poll goes on alone.
                Err(_) => return std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_appended_line_is_reported_and_quiet_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        std::fs::write(&path, "").unwrap();
        let mut changes = Changes::watch(dir.path());
        assert!(changes.inotify.is_some(), "inotify works on this machine's temporary directory");
        assert!(tokio::time::timeout(Duration::from_millis(50), changes.next()).await.is_err(), "nothing changed yet");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{}\n").unwrap();
        tokio::time::timeout(Duration::from_secs(30), changes.next()).await.expect("the write was reported");
    }
}
