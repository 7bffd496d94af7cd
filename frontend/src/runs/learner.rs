//! This page as a learner: the key it keeps across visits (so the runs it launched stay its
//! own after a reload). Whose each run is, as the run lists show it, is decided by
//! `scalebook_page::runs::whose` (tested natively) and used from here.

use crate::storage;
use scalebook_shared::protocol::LearnerKey;
#[cfg(test)]
use scalebook_shared::protocol::{Learner, RunRecord};

pub use scalebook_page::runs::whose::{Whose, own_first};

const KEY_STORAGE: &str = "scalebook-learner-key";

/// The key an earlier visit was given, if this browser kept one.
pub fn load_key() -> Option<LearnerKey> {
    LearnerKey::parse(&storage::load(KEY_STORAGE)?).ok()
}

/// Keeps the key the server gave, to present in the next visit's `hello`.
pub fn save_key(key: &LearnerKey) {
    storage::keep(KEY_STORAGE, key.as_str());
}

/// A running local run `id` of `cpu_tiny` launched by `learner` (`None`: the instructor),
/// for the tests of the pages that list runs.
#[cfg(test)]
pub fn record(id: &str, learner: Option<&Learner>) -> RunRecord {
    RunRecord::sample(id, 0.0, learner.cloned(), scalebook_shared::protocol::RunState::Running)
}
