//! The run list as a page holds it: the server sends it a page at a time (see
//! `scalebook_shared::protocol::run_list`), and every run's changes as they happen. Here the
//! pages and the changes are put together in the server's order (the order of the ids).

use scalebook_shared::protocol::run_list::{oldest_paged, paged};
use scalebook_shared::protocol::{Learner, RunRecord};

/// The run list after an answer to `list_runs` with `before` (an older page): its runs join
/// those held, in the order of their ids.
pub fn merge_older(records: &mut Vec<RunRecord>, page: Vec<RunRecord>) {
    for run in page {
        match records.iter_mut().find(|r| r.id == run.id) {
            Some(known) => *known = run,
            None => records.push(run),
        }
    }
    records.sort_by(|a, b| a.id.cmp(&b.id));
}

/// The run list after a change to `run` (a `run_update`), for a page whose learner is `mine`
/// and which was told of `older` runs it does not hold. A run it holds is replaced; a new one is
/// added, unless it belongs to the pages not yet asked for (an old run of another learner's
/// that changed): it comes with its page, so "older" still starts where the list ends.
pub fn apply_update(records: &mut Vec<RunRecord>, run: RunRecord, mine: Option<&Learner>, older: u64) {
    if let Some(known) = records.iter_mut().find(|r| r.id == run.id) {
        *known = run;
        return;
    }
    let unasked = older > 0 && paged(&run, mine) && oldest_paged(records.iter(), mine).is_some_and(|oldest| run.id < *oldest);
    if !unasked {
        let at = records.partition_point(|r| r.id < run.id);
        records.insert(at, run);
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::RunState;

    use super::*;

    fn record(id: &str, learner: Option<&Learner>, state: RunState) -> RunRecord {
        RunRecord::sample(id, 0.0, learner.cloned(), state)
    }

    fn ids(records: &[RunRecord]) -> Vec<&str> {
        records.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn older_pages_and_changes_keep_the_servers_order_and_leave_unasked_runs_to_their_page() {
        let (me, other) = (Learner::parse("aaaaaaaaaaaa").unwrap(), Learner::parse("bbbbbbbbbbbb").unwrap());
        let running = RunState::Running;
        let mut records = vec![record("r00", None, running), record("r01", Some(&me), running), record("r07", Some(&other), running)];
        merge_older(&mut records, vec![record("r04", Some(&other), running), record("r06", Some(&other), running)]);
        assert_eq!(ids(&records), ["r00", "r01", "r04", "r06", "r07"]);

        // A run of another learner's older than any held, while older ones are not yet asked
        // for: left to its page. With none left to ask for, or the page's own, it is taken.
        apply_update(&mut records, record("r02", Some(&other), RunState::Completed), Some(&me), 2);
        assert_eq!(ids(&records), ["r00", "r01", "r04", "r06", "r07"]);
        apply_update(&mut records, record("r03", Some(&me), running), Some(&me), 2);
        apply_update(&mut records, record("r02", Some(&other), RunState::Completed), Some(&me), 0);
        apply_update(&mut records, record("r09", Some(&other), running), Some(&me), 2);
        assert_eq!(ids(&records), ["r00", "r01", "r02", "r03", "r04", "r06", "r07", "r09"]);
        apply_update(&mut records, record("r07", Some(&other), RunState::Completed), Some(&me), 2);
        assert_eq!(records[6].state(), RunState::Completed);
        assert_eq!(records.len(), 8);
    }
}
