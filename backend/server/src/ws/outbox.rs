//! A connection's outgoing queue, bounded in bytes as well as in messages. A reader too slow
//! for what it subscribed to is disconnected once its backlog passes the byte bound, before the
//! backlog grows the server's memory; its page reconnects and resumes from its cursors, so it
//! loses nothing. A run's stream instead waits for room ([`Outbox::send_paced`]): it can always
//! read again what it has not sent, so it goes at the reader's pace.

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
    /// The connection took a message off the queue.
    drained: Notify,
}

/// The queue was closed, or is over its byte bound (the connection is being dropped).
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// Bytes a paced sender keeps queued at most: enough to keep the connection busy (a few
/// messages), little enough that a hundred viewers catching up hold little memory between them.
fn paced_bytes(max_bytes: usize) -> usize {
    (max_bytes / 2).min(512 << 10)
}

/// A queue of at most `messages` messages and `max_bytes` bytes.
pub fn outbox(messages: usize, max_bytes: usize) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(messages);
    let shared = Arc::new(Shared { queued_bytes: AtomicUsize::new(0), max_bytes, overflow: Notify::new(), drained: Notify::new() });
    (Outbox { tx, shared: shared.clone() }, Inbox { rx, shared })
}

impl Outbox {
    /// Queues `text`, waiting while the queue is full of messages; past the byte bound the
    /// connection is told to drop, and nothing more is queued.
    pub async fn send(&self, text: Utf8Bytes) -> Result<(), Closed> {
        // The slot first, then the bytes counted and the message queued with no wait between:
        // a sender cancelled while it waits (an unsubscribed stream) leaves no bytes counted.
        let slot = self.tx.reserve().await.map_err(|_| Closed)?;
        let len = text.len();
        let before = self.shared.queued_bytes.fetch_add(len, Ordering::SeqCst);
        if before + len > self.shared.max_bytes {
            self.shared.queued_bytes.fetch_sub(len, Ordering::SeqCst);
            self.shared.overflow.notify_one();
            return Err(Closed);
        }
        slot.send(text);
        Ok(())
    }

    /// Queues `text` once the queue has room for it, however long that takes: for a sender
    /// that holds nothing meanwhile (a backlog read from a file a page at a time), so a slow
    /// reader gets everything at its own pace and is never dropped for being behind.
    pub async fn send_paced(&self, text: Utf8Bytes) -> Result<(), Closed> {
        let len = text.len();
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            let queued = self.shared.queued_bytes.load(Ordering::SeqCst);
            // An empty queue takes any message, so one larger than the bound still goes.
            if queued == 0 || queued + len <= paced_bytes(self.shared.max_bytes) {
                let slot = self.tx.reserve().await.map_err(|_| Closed)?;
                self.shared.queued_bytes.fetch_add(len, Ordering::SeqCst);
                slot.send(text);
                return Ok(());
            }
            if self.tx.is_closed() {
                return Err(Closed);
            }
            drained.await;
        }
    }

    /// Resolves once a sender found the queue over its byte bound.
    pub async fn overflowed(&self) {
        self.shared.overflow.notified().await;
    }
}

impl Drop for Inbox {
    /// The connection is gone: a paced sender waiting for room learns it now, not never.
    fn drop(&mut self) {
        self.rx.close();
        self.shared.drained.notify_waiters();
    }
}

impl Inbox {
    pub async fn recv(&mut self) -> Option<Utf8Bytes> {
        let text = self.rx.recv().await?;
        self.shared.queued_bytes.fetch_sub(text.len(), Ordering::SeqCst);
        self.shared.drained.notify_waiters();
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt as _;

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

    #[tokio::test]
    async fn a_sender_cancelled_while_the_queue_is_full_leaves_no_bytes_counted() {
        let (out, mut inbox) = outbox(1, 100);
        out.send("12345".into()).await.unwrap();
        // The queue holds one message: these wait for a slot, and are given up.
        for waiting in [out.send("678".into()).boxed(), out.send_paced("9".into()).boxed()] {
            assert!(tokio::time::timeout(std::time::Duration::from_millis(20), waiting).await.is_err());
        }
        assert_eq!(inbox.recv().await.unwrap().as_str(), "12345");
        assert_eq!(out.shared.queued_bytes.load(Ordering::SeqCst), 0, "bytes of messages never queued are counted");
    }

    #[tokio::test]
    async fn a_paced_sender_waits_for_room_and_never_overflows() {
        let (out, mut inbox) = outbox(100, 10);
        let sender = {
            let out = out.clone();
            tokio::spawn(async move {
                for text in ["1234", "5678", "abcd", "efgh"] {
                    out.send_paced(text.into()).await.unwrap();
                }
            })
        };
        let mut got = Vec::new();
        while got.len() < 4 {
            let text = inbox.recv().await.unwrap();
            // Half the bound at most is queued behind what was taken.
            assert!(out.shared.queued_bytes.load(Ordering::SeqCst) <= 5);
            got.push(text.as_str().to_owned());
        }
        sender.await.unwrap();
        assert_eq!(got, ["1234", "5678", "abcd", "efgh"]);
        // A sender waiting for room when the connection goes is told so.
        out.send_paced("12345".into()).await.unwrap();
        let waiting = tokio::spawn(async move { out.send_paced("67890".into()).await });
        tokio::task::yield_now().await;
        drop(inbox);
        let told = tokio::time::timeout(std::time::Duration::from_secs(30), waiting).await.expect("the sender never learnt");
        assert_eq!(told.unwrap(), Err(Closed));
    }
}
