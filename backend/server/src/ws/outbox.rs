//! A connection's outgoing queue, bounded in bytes as well as in messages. A reader too slow
//! for what it subscribed to is disconnected once its backlog passes the byte bound, before the
//! backlog grows the server's memory; its page reconnects and resumes from its cursors, so it
//! loses nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::ws::Utf8Bytes;
use tokio::sync::{Notify, mpsc};

/// The sending side, one clone per task that writes to the connection.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Utf8Bytes>,
    shared: Arc<Shared>,
}

/// The connection's side.
pub struct Inbox {
    rx: mpsc::Receiver<Utf8Bytes>,
    shared: Arc<Shared>,
}

struct Shared {
    queued_bytes: AtomicUsize,
    max_bytes: usize,
    overflow: Notify,
}

/// The queue was closed, or is over its byte bound (the connection is being dropped).
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// A queue of at most `messages` messages and `max_bytes` bytes.
pub fn outbox(messages: usize, max_bytes: usize) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(messages);
    let shared = Arc::new(Shared { queued_bytes: AtomicUsize::new(0), max_bytes, overflow: Notify::new() });
    (Outbox { tx, shared: shared.clone() }, Inbox { rx, shared })
}

impl Outbox {
    /// Queues `text`, waiting while the queue is full of messages; past the byte bound the
    /// connection is told to drop, and nothing more is queued.
    pub async fn send(&self, text: Utf8Bytes) -> Result<(), Closed> {
        let len = text.len();
        let before = self.shared.queued_bytes.fetch_add(len, Ordering::SeqCst);
        if before + len > self.shared.max_bytes {
            self.shared.queued_bytes.fetch_sub(len, Ordering::SeqCst);
            self.shared.overflow.notify_one();
            return Err(Closed);
        }
        self.tx.send(text).await.map_err(|_| Closed)
    }

    /// Resolves once a sender found the queue over its byte bound.
    pub async fn overflowed(&self) {
        self.shared.overflow.notified().await;
    }
}

impl Inbox {
    pub async fn recv(&mut self) -> Option<Utf8Bytes> {
        let text = self.rx.recv().await?;
        self.shared.queued_bytes.fetch_sub(text.len(), Ordering::SeqCst);
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_backlog_past_the_byte_bound_overflows_and_draining_makes_room() {
        let (out, mut inbox) = outbox(100, 10);
        out.send("12345".into()).await.unwrap();
        out.send("6789".into()).await.unwrap();
        assert_eq!(out.send("ab".into()).await, Err(Closed), "11 bytes queued of 10");
        // The connection learns of it even though it was not waiting at that moment.
        tokio::time::timeout(std::time::Duration::from_secs(10), out.overflowed()).await.unwrap();
        assert_eq!(inbox.recv().await.unwrap().as_str(), "12345");
        out.send("ab".into()).await.unwrap();
        assert_eq!(inbox.recv().await.unwrap().as_str(), "6789");
        assert_eq!(inbox.recv().await.unwrap().as_str(), "ab");
    }
}
