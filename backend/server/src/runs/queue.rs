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
//!
//! [`plan`] takes the runs in that order while their ranks fit, and says why each of the
//! others waits, which its state line shows.

use std::cmp::Ordering;
use std::collections::HashMap;

use scalebook_shared::protocol::{Learner, RunRecord, RunState};

/// What a schedule does now: the queued runs that start, and why each other queued run waits.
#[derive(Debug, Default, PartialEq)]
pub struct Plan<'a> {
    pub start: Vec<&'a RunRecord>,
    pub waiting: Vec<(&'a RunRecord, String)>,
}

/// The slots a local run takes: one per rank process.
fn ranks(record: &RunRecord) -> usize {
    record.layout.world() as usize
}

/// The queued runs among `local` that start now, in [`start_order`], while their ranks fit in
/// `max_ranks` (a run larger than that starts once nothing else runs); and why each of the
/// others waits. No run overtakes one ahead of it that waits for room, so large runs are never
/// starved by small ones.
pub fn plan<'a>(local: &[&'a RunRecord], max_ranks: usize) -> Plan<'a> {
    let mut used: usize = local.iter().filter(|r| r.state() == RunState::Running).map(|r| ranks(r)).sum();
    let mut plan = Plan::default();
    for record in start_order(local) {
        let blocked = !plan.waiting.is_empty() || (used > 0 && used + ranks(record) > max_ranks);
        if blocked {
            let reason = waiting_reason(plan.waiting.len(), ranks(record), used, max_ranks);
            plan.waiting.push((record, reason));
        } else {
            used += ranks(record);
            plan.start.push(record);
        }
    }
    plan
}

/// Why a run of `ranks` ranks waits with `used` of `max_ranks` ranks in use, `ahead` runs
/// waiting before it.
fn waiting_reason(ahead: usize, ranks: usize, used: usize, max_ranks: usize) -> String {
    let runs = |n: usize| if n == 1 { "1 queued run".to_owned() } else { format!("{n} queued runs") };
    let rank_s = |n: usize| if n == 1 { "1 rank".to_owned() } else { format!("{n} ranks") };
    match ahead {
        0 if ranks > max_ranks => format!(
            "waiting for the {} in use to free up: its {} are more than the {max_ranks} this machine runs at once, so it runs alone",
            rank_s(used),
            rank_s(ranks)
        ),
        0 => format!("waiting for {} to free up ({used} of {max_ranks} in use)", rank_s(used + ranks - max_ranks)),
        ahead => format!("waiting behind {} ({used} of {max_ranks} ranks in use)", runs(ahead)),
    }
}

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

    /// A run of `world` data-parallel ranks, as [`run`] makes it.
    fn wide(id: &str, created: f64, by: Option<char>, trained: Option<(f64, Option<f64>)>, world: u32) -> RunRecord {
        let layout =
            scalebook_shared::layout::Layout::new(scalebook_shared::layout::Sizes { dp: world, ..Default::default() }, "tp-cp-dp").unwrap();
        RunRecord { layout, ..run(id, created, by, trained) }
    }

    /// What [`plan`] does with `runs` on a machine of `max` ranks: the runs it starts, and each
    /// waiting run with why.
    fn planned(runs: &[RunRecord], max: usize) -> (Vec<&str>, Vec<(&str, String)>) {
        let all: Vec<&RunRecord> = runs.iter().collect();
        let plan = plan(&all, max);
        (plan.start.iter().map(|r| r.id.as_str()).collect(), plan.waiting.iter().map(|(r, why)| (r.id.as_str(), why.clone())).collect())
    }

    #[test]
    fn each_waiting_run_says_what_it_waits_for() {
        // Two ranks, one taken: a one-rank run starts, the two-rank run after it waits for
        // a rank, and the learner's run behind it waits its turn.
        let runs = [
            wide("i1", 1.0, None, Some((1.0, None)), 1),
            run("i2", 2.0, None, None),
            wide("i3", 3.0, None, None, 2),
            run("a1", 4.0, Some('a'), None),
        ];
        let (start, waiting) = planned(&runs, 2);
        assert_eq!(start, ["i2"]);
        assert_eq!(
            waiting,
            [
                ("i3", "waiting for 2 ranks to free up (2 of 2 in use)".to_owned()),
                ("a1", "waiting behind 1 queued run (2 of 2 ranks in use)".to_owned())
            ]
        );
        // A run larger than the machine waits until it can run alone.
        let runs = [wide("i1", 1.0, None, Some((1.0, None)), 1), wide("i2", 2.0, None, None, 4)];
        let (start, waiting) = planned(&runs, 2);
        assert!(start.is_empty());
        assert_eq!(
            waiting,
            [(
                "i2",
                "waiting for the 1 rank in use to free up: its 4 ranks are more than the 2 this machine runs at once, so it runs alone"
                    .to_owned()
            )]
        );
        // Once nothing runs, it starts; nobody waits.
        let runs = [wide("i2", 2.0, None, None, 4)];
        assert_eq!(planned(&runs, 2), (vec!["i2"], vec![]));
    }

    #[test]
    fn only_queued_runs_are_ordered() {
        let runs = [run("i1", 1.0, None, Some((1.0, None))), run("a1", 2.0, Some('a'), Some((2.0, Some(3.0))))];
        assert!(order(&runs).is_empty());
    }
}
