//! The run list a page is sent, a page at a time. A class of a hundred learners keeps a couple
//! of thousand runs, and every page asks for the list on each connection: the runs a page
//! acts on (the instructor's, and its own learner's) always come whole, and the other learners'
//! runs come [`RUN_PAGE`] at a time, newest first, as the page asks for older ones.

use super::{Learner, RunId, RunRecord};

/// How many other learners' runs one `runs` message carries at most.
pub const RUN_PAGE: usize = 50;

/// Whether `record` comes a page at a time to a page whose learner is `mine` (`None`: the
/// instructor's page, or a page with no learner identity): another learner's run.
pub fn paged(record: &RunRecord, mine: Option<&Learner>) -> bool {
    record.learner.as_ref().is_some_and(|learner| Some(learner) != mine)
}

/// The answer to `list_runs` from `records` (in the order of their ids): without `before`,
/// every run that is not [`paged`] and the newest `size` of those that are; with it, the
/// newest `size` paged runs whose ids sort before it. Also how many paged runs older than
/// those were left out.
pub fn page(records: Vec<RunRecord>, mine: Option<&Learner>, before: Option<&RunId>, size: usize) -> (Vec<RunRecord>, u64) {
    let candidates = records.iter().filter(|r| paged(r, mine) && before.is_none_or(|b| &r.id < b)).count();
    let older = candidates.saturating_sub(size);
    let mut skipped = 0;
    let runs = records
        .into_iter()
        .filter(|r| {
            if !paged(r, mine) {
                return before.is_none();
            }
            if before.is_some_and(|b| &r.id >= b) {
                return false;
            }
            skipped += 1;
            skipped > older
        })
        .collect();
    (runs, older as u64)
}

/// The id to ask `list_runs` for older runs `before`: the oldest paged run this page holds.
pub fn oldest_paged<'a>(records: impl IntoIterator<Item = &'a RunRecord>, mine: Option<&Learner>) -> Option<&'a RunId> {
    records.into_iter().filter(|r| paged(r, mine)).map(|r| &r.id).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RunState;

    fn record(id: &str, learner: Option<&Learner>) -> RunRecord {
        RunRecord::sample(id, 0.0, learner.cloned(), RunState::Completed)
    }

    fn ids(runs: &[RunRecord]) -> Vec<&str> {
        runs.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn the_instructors_runs_and_the_pages_own_come_whole_and_the_rest_a_page_at_a_time() {
        let (me, other) = (Learner::parse("aaaaaaaaaaaa").unwrap(), Learner::parse("bbbbbbbbbbbb").unwrap());
        // r00..r09: instructor r00 and r05, mine r01, the rest another learner's.
        let records: Vec<RunRecord> = (0..10)
            .map(|i| {
                let whose = match i {
                    0 | 5 => None,
                    1 => Some(&me),
                    _ => Some(&other),
                };
                record(&format!("r{i:02}"), whose)
            })
            .collect();

        let (first, older) = page(records.clone(), Some(&me), None, 3);
        assert_eq!((ids(&first), older), (vec!["r00", "r01", "r05", "r07", "r08", "r09"], 4));
        let before = oldest_paged(&first, Some(&me)).unwrap();
        assert_eq!(before.as_str(), "r07");
        let (second, older) = page(records.clone(), Some(&me), Some(before), 3);
        assert_eq!((ids(&second), older), (vec!["r03", "r04", "r06"], 1));
        let (last, older) = page(records.clone(), Some(&me), Some(&RunId::parse("r03").unwrap()), 3);
        assert_eq!((ids(&last), older), (vec!["r02"], 0));
        // An id no run has still pages by order (the run it named may have been removed).
        let (gone, older) = page(records.clone(), Some(&me), Some(&RunId::parse("r065").unwrap()), 3);
        assert_eq!((ids(&gone), older), (vec!["r03", "r04", "r06"], 1));

        // The instructor's page: every learner's run is paged, its own (learner-less) are whole.
        let (first, older) = page(records, None, None, 3);
        assert_eq!((ids(&first), older), (vec!["r00", "r05", "r07", "r08", "r09"], 5));
    }
}
