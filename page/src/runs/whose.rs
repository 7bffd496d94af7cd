//! Whose each run is, seen from a page (its learner's own, another learner's, the
//! instructor's), and the order the run lists show them in. The page keeps its learner's key
//! and the records in its storage and signals; the classification is here, tested natively.

use scalebook_shared::protocol::{Learner, RunHandle, RunRecord};

/// Whether `record` is a run of the class this server follows, mirrored here: such a run is
/// the instructor's whoever launched it, and this page may not act on it.
pub fn from_class(record: &RunRecord) -> bool {
    matches!(record.handle, Some(RunHandle::Class { .. }))
}

/// Whose a run is, seen from this page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// Launched by this page's learner, or from this server's own page by its owner.
    Yours,
    /// Launched by another learner (on the shared server, or on their own and shared with
    /// this server's class).
    Learner,
    /// Launched by the instructor: seen from the shared server's viewer link, or a run of the
    /// class this server follows.
    Instructor,
}

impl Whose {
    /// Whose `record` is, for a page whose learner is `me` (a viewer's page), or for the page
    /// of the server's `owner` (the instructor on theirs, a learner on their own Scalebook).
    pub fn of(record: &RunRecord, me: Option<&Learner>, owner: bool) -> Whose {
        if from_class(record) {
            return Whose::Instructor;
        }
        if matches!(record.handle, Some(RunHandle::Shared { .. })) {
            return Whose::Learner;
        }
        match &record.learner {
            None if owner => Whose::Yours,
            None => Whose::Instructor,
            Some(learner) if Some(learner) == me => Whose::Yours,
            Some(_) => Whose::Learner,
        }
    }

    /// The word the run lists show, so a learner tells their runs from the rest at a glance.
    pub fn label(self) -> &'static str {
        match self {
            Whose::Yours => "yours",
            Whose::Learner => "learner",
            Whose::Instructor => "instructor's",
        }
    }
}

/// `records` (oldest first, as the server lists them) as a run list shows them: the page's
/// own first (see [`Whose::of`]), then everyone else's, newest first within each.
pub fn own_first(mut records: Vec<RunRecord>, me: Option<&Learner>, owner: bool) -> Vec<RunRecord> {
    records.reverse();
    // A stable sort: each group keeps the newest-first order.
    records.sort_by_key(|record| Whose::of(record, me, owner) != Whose::Yours);
    records
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::{RunId, RunState};

    use super::*;

    /// A running local run `id` of `cpu_tiny` launched by `learner` (`None`: the instructor).
    fn record(id: &str, learner: Option<&Learner>) -> RunRecord {
        RunRecord::sample(id, 0.0, learner.cloned(), RunState::Running)
    }

    #[test]
    fn a_learners_own_runs_come_first_and_every_run_says_whose_it_is() {
        let (me, other) = (Learner::parse("aaaaaaaaaaaa").unwrap(), Learner::parse("bbbbbbbbbbbb").unwrap());
        let records = vec![record("r1", Some(&me)), record("r2", None), record("r3", Some(&other)), record("r4", Some(&me))];
        let listed: Vec<String> = own_first(records.clone(), Some(&me), false).iter().map(|r| r.id.to_string()).collect();
        assert_eq!(listed, ["r4", "r1", "r3", "r2"]);
        let whose: Vec<&str> = records.iter().map(|r| Whose::of(r, Some(&me), false).label()).collect();
        assert_eq!(whose, ["yours", "instructor's", "learner", "yours"]);
        // The owner's page (the instructor's, or a learner's own Scalebook): its own runs first.
        let listed: Vec<String> = own_first(records.clone(), None, true).iter().map(|r| r.id.to_string()).collect();
        assert_eq!(listed, ["r2", "r4", "r3", "r1"]);
        let whose: Vec<&str> = records.iter().map(|r| Whose::of(r, None, true).label()).collect();
        assert_eq!(whose, ["learner", "yours", "learner", "learner"]);
    }

    #[test]
    fn a_run_of_the_class_this_server_follows_is_the_instructors() {
        let me = Learner::parse("aaaaaaaaaaaa").unwrap();
        let mut mirrored = record("r9", Some(&me));
        mirrored.handle = Some(RunHandle::Class { address: "login01:8443".into(), upstream: RunId::parse("r1").unwrap() });
        assert!(from_class(&mirrored));
        assert_eq!(Whose::of(&mirrored, Some(&me), false), Whose::Instructor);
        assert_eq!(Whose::of(&mirrored, None, true), Whose::Instructor);
        assert!(!from_class(&record("r1", None)));
    }

    #[test]
    fn a_run_a_learner_shared_with_the_class_is_a_learners_on_the_instructors_page() {
        let mut shared = record("l-ada-r1", None);
        shared.handle = Some(RunHandle::Shared { follower: "ada".into(), upstream: RunId::parse("r1").unwrap() });
        assert_eq!(Whose::of(&shared, None, true), Whose::Learner);
    }
}
