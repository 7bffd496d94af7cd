//! The requests this page waits on (launches, Slurm previews), matched to their answers by the
//! id each request carries and each direct answer echoes. Answers may come in any order, and
//! between them come errors about other requests (a rate limit, a bad message): only the id
//! says which request an answer belongs to.

use std::collections::BTreeSet;

use scalebook_shared::protocol::{ErrorReport, RequestId, RunId};

/// The server's answer to a launch or a Slurm preview.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Launched(RunId),
    /// The batch script a Slurm launch would submit.
    Script(String),
    Refused(ErrorReport),
}

/// Tickets of the requests still waiting; a ticket's id on the wire is its number.
#[derive(Debug, Default)]
pub struct Requests {
    next: u64,
    waiting: BTreeSet<u64>,
}

impl Requests {
    /// A new ticket, and the id to send with its request.
    pub fn open(&mut self) -> (u64, RequestId) {
        self.next += 1;
        self.waiting.insert(self.next);
        let id = RequestId::parse(&format!("r{}", self.next)).unwrap_or_else(|_| unreachable!("a short ASCII id"));
        (self.next, id)
    }

    /// The ticket an answer with `id` settles, if that request is still waiting.
    pub fn settle(&mut self, id: &RequestId) -> Option<u64> {
        let ticket = id.as_str().strip_prefix('r')?.parse().ok()?;
        self.waiting.remove(&ticket).then_some(ticket)
    }

    /// A request that could not be sent: it waits for nothing.
    pub fn forget(&mut self, ticket: u64) {
        self.waiting.remove(&ticket);
    }

    /// Every ticket still waiting, now given up (the connection that carried them dropped).
    pub fn abandon_all(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.waiting).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_settle_their_own_request_in_any_order() {
        let mut requests = Requests::default();
        let (launch, launch_id) = requests.open();
        let (preview, preview_id) = requests.open();
        // Errors about messages this page does not track (a ping of a burst, say) settle nothing.
        assert_eq!(requests.settle(&RequestId::parse("ping-3").unwrap()), None);
        assert_eq!(requests.settle(&RequestId::parse("r99").unwrap()), None);
        // The preview's answer first, then the launch's: each lands on its own ticket.
        assert_eq!(requests.settle(&preview_id), Some(preview));
        assert_eq!(requests.settle(&launch_id), Some(launch));
        // An answer comes once; a second with the same id is not another request's.
        assert_eq!(requests.settle(&launch_id), None);
    }

    #[test]
    fn a_dropped_connection_gives_up_what_still_waits() {
        let mut requests = Requests::default();
        let (first, first_id) = requests.open();
        let (second, _) = requests.open();
        let (unsent, _) = requests.open();
        requests.forget(unsent);
        assert_eq!(requests.settle(&first_id), Some(first));
        assert_eq!(requests.abandon_all(), vec![second]);
        assert!(requests.abandon_all().is_empty());
    }
}
