//! The order queued local runs start in. The instructor's runs come first, oldest first: the
//! demo in front of the room must not wait behind the room. Learners' runs then take turns, so
//! a learner who launches several runs at once gets one turn per round, not the whole machine
//! until they are done.
//!
//! A learner run's turn is the number of its learner's runs that trained at any moment since
//! the backlog began (the creation of the oldest queued learner run), plus that learner's
//! queued runs older than it; runs start by turn, then by age. The order is derived from the
//! run records alone, so a restarted server keeps it. No learner waits forever: every other
//! learner gets at most one more turn than it before its run, and the room's learner runs are
//! bounded ([`crate::learners::MAX_ACTIVE_LEARNER_RUNS`]).

use std::cmp::Ordering;
use std::collections::HashMap;

use scalebook_shared::protocol::{Learner, RunRecord, RunState};

/// The queued runs among `local` (every run of this machine, whatever its state), in the order
/// they may start.
pub fn start_order<'a>(local: &[&'a RunRecord]) -> Vec<&'a RunRecord> {
    let queued = local.iter().copied().filter(|r| r.state() == RunState::Queued);
    let (mut order, mut learners): (Vec<&RunRecord>, Vec<&RunRecord>) = queued.partition(|r| r.learner.is_none());
    order.sort_by(|a, b| by_age(a, b));
    let Some(backlog) = learners.iter().map(|r| r.created_at).min_by(f64::total_cmp) else { return order };
    let mut turns: HashMap<&Learner, usize> = HashMap::new();
    for record in local {
        let trained_since = record.started_at.is_some() && record.ended_at.is_none_or(|end| end >= backlog);
        if let (Some(learner), true) = (&record.learner, trained_since) {
            *turns.entry(learner).or_default() += 1;
        }
    }
    learners.sort_by(|a, b| by_age(a, b));
    let mut numbered: Vec<(usize, &RunRecord)> = learners
        .into_iter()
        .filter_map(|record| {
            let next = turns.entry(record.learner.as_ref()?).or_default();
            *next += 1;
            Some((*next - 1, record))
        })
        .collect();
    numbered.sort_by(|(turn_a, a), (turn_b, b)| turn_a.cmp(turn_b).then_with(|| by_age(a, b)));
    order.extend(numbered.into_iter().map(|(_, record)| record));
    order
}

/// Oldest first; runs created in the same instant by their ids (which are made in order).
fn by_age(a: &RunRecord, b: &RunRecord) -> Ordering {
    a.created_at.total_cmp(&b.created_at).then_with(|| a.id.cmp(&b.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learner(name: char) -> Learner {
        Learner::parse(&name.to_string().repeat(12)).unwrap()
    }

    /// Run `id`, created at `created` by `by` (`None`: the instructor), having trained from
    /// `trained.0` to `trained.1` if at all.
    fn run(id: &str, created: f64, by: Option<char>, trained: Option<(f64, Option<f64>)>) -> RunRecord {
        let state = match trained {
            None => RunState::Queued,
            Some((_, None)) => RunState::Running,
            Some((_, Some(_))) => RunState::Completed,
        };
        let mut record = RunRecord::sample(id, created, by.map(learner), state);
        record.started_at = trained.map(|(start, _)| start);
        record.ended_at = trained.and_then(|(_, end)| end);
        record
    }

    fn order(runs: &[RunRecord]) -> Vec<&str> {
        let all: Vec<&RunRecord> = runs.iter().collect();
        start_order(&all).into_iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn the_instructors_runs_go_first_oldest_first() {
        let runs = [run("l1", 1.0, Some('a'), None), run("i2", 3.0, None, None), run("i1", 2.0, None, None)];
        assert_eq!(order(&runs), ["i1", "i2", "l1"]);
    }

    #[test]
    fn learners_who_launched_at_once_take_turns() {
        // `a` sent both runs first; `b` and `c` one after the other.
        let runs = [
            run("a1", 1.0, Some('a'), None),
            run("a2", 2.0, Some('a'), None),
            run("b1", 3.0, Some('b'), None),
            run("c1", 4.0, Some('c'), None),
            run("b2", 5.0, Some('b'), None),
            run("c2", 6.0, Some('c'), None),
        ];
        assert_eq!(order(&runs), ["a1", "b1", "c1", "a2", "b2", "c2"]);
    }

    #[test]
    fn a_turn_taken_during_the_backlog_counts_until_the_backlog_clears() {
        // a1 started at once, before anyone waited; it ended while a2 and b1 waited: a has had
        // its turn, so b1 goes before a2 although a2 is older.
        let runs = [run("a1", 1.0, Some('a'), Some((1.0, Some(9.0)))), run("a2", 2.0, Some('a'), None), run("b1", 3.0, Some('b'), None)];
        assert_eq!(order(&runs), ["b1", "a2"]);
        // Still running: the same.
        let runs = [run("a1", 1.0, Some('a'), Some((1.0, None))), run("a2", 2.0, Some('a'), None), run("b1", 3.0, Some('b'), None)];
        assert_eq!(order(&runs), ["b1", "a2"]);
        // A run that ended before anything now queued was created is history: oldest first.
        let runs = [run("a1", 1.0, Some('a'), Some((1.0, Some(1.5)))), run("a2", 2.0, Some('a'), None), run("b1", 3.0, Some('b'), None)];
        assert_eq!(order(&runs), ["a2", "b1"]);
    }

    #[test]
    fn only_queued_runs_are_ordered() {
        let runs = [run("i1", 1.0, None, Some((1.0, None))), run("a1", 2.0, Some('a'), Some((2.0, Some(3.0))))];
        assert!(order(&runs).is_empty());
    }
}
