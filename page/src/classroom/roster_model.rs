//! The instructor's roster as one table: a row per run a follower shares (a follower sharing
//! none has one row of its own), sortable by any column in either direction. The sort is
//! stable, so rows that tie keep the roster's order (who joined first) both ways, and an
//! empty cell (no run, no loss yet) sorts last both ways: the numbers are what the
//! instructor looks for.

use std::cmp::Ordering;
use std::collections::HashSet;

use scalebook_shared::charts::format_number;
use scalebook_shared::protocol::{
    Follower, FollowerId, FollowerIdentity, MAX_ROSTER_RUN_BYTES, RunId, RunState, RunSummary, shared_copy_id,
};

/// A column of the roster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Name,
    Following,
    Since,
    Config,
    Layout,
    State,
    Loss,
    Speed,
}

impl Column {
    pub const ALL: [Column; 8] =
        [Column::Name, Column::Following, Column::Since, Column::Config, Column::Layout, Column::State, Column::Loss, Column::Speed];

    /// The column's header.
    pub fn title(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Following => "following",
            Column::Since => "joined",
            Column::Config => "config",
            Column::Layout => "layout",
            Column::State => "state",
            Column::Loss => "loss",
            Column::Speed => "samples/s",
        }
    }

    /// What `row` sorts by in this column (`None`: an empty cell).
    fn key(self, row: &Row) -> Option<Key> {
        let run = row.run.as_ref();
        match self {
            Column::Name => Some(Key::Text(row.name.to_lowercase())),
            // Those following first.
            Column::Following => Some(Key::Number(if row.following { 0.0 } else { 1.0 })),
            Column::Since => Some(Key::Number(row.since)),
            Column::Config => run.map(|r| Key::Text(r.config.to_lowercase())),
            Column::Layout => run.map(|r| Key::Text(r.layout_text())),
            // In the order a run lives: queued, running, then how it ended.
            Column::State => {
                run.map(|r| Key::Number(RunState::ALL.iter().position(|s| *s == r.state).unwrap_or(RunState::ALL.len()) as f64))
            }
            Column::Loss => run.and_then(|r| r.loss).map(Key::Number),
            Column::Speed => run.and_then(|r| r.samples_per_sec).map(Key::Number),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Key {
    Number(f64),
    Text(String),
}

impl Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::Number(a), Key::Number(b)) => a.total_cmp(b),
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
            // One column holds one kind; numbers before text all the same.
            (Key::Number(_), Key::Text(_)) => Ordering::Less,
            (Key::Text(_), Key::Number(_)) => Ordering::Greater,
        }
    }
}

/// How the roster is sorted: by which column, which way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub column: Column,
    pub descending: bool,
}

impl Default for Sort {
    /// As the roster comes: who joined first, first.
    fn default() -> Sort {
        Sort { column: Column::Since, descending: false }
    }
}

impl Sort {
    /// The sort after a click on `column`'s header: the other way round when it already sorts
    /// by that column, else by that column from the lowest.
    pub fn clicked(self, column: Column) -> Sort {
        Sort { column, descending: self.column == column && !self.descending }
    }

    /// `aria-sort` of `column`'s header.
    pub fn aria(self, column: Column) -> &'static str {
        match (self.column == column, self.descending) {
            (false, _) => "none",
            (true, false) => "ascending",
            (true, true) => "descending",
        }
    }

    fn order(self, a: &Row, b: &Row) -> Ordering {
        match (self.column.key(a), self.column.key(b)) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(a), Some(b)) if self.descending => b.cmp(&a),
            (Some(a), Some(b)) => a.cmp(&b),
        }
    }
}

/// Where a follower stands with the presentation, as the roster's "following" column says it.
/// Only a follower that left a presentation under way has broken away: before one starts (or
/// after it ends) nobody has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// A page of it follows the presentation on now.
    Following,
    /// No page of it follows the presentation on now.
    BrokeAway,
    /// Nobody presents; a page of it will follow when someone does.
    WillFollow,
    /// Nobody presents, and no page of it would follow.
    NotFollowing,
}

impl Standing {
    /// The column's words (also its `data-standing`, which styles a break-away).
    pub fn label(self) -> &'static str {
        match self {
            Standing::Following => "following",
            Standing::BrokeAway => "broke away",
            Standing::WillFollow => "will follow",
            Standing::NotFollowing => "not following",
        }
    }
}

/// One row of the roster: a follower, and one of its runs if it shares any.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub follower: FollowerId,
    /// Who the follower is, as the class listener established it.
    pub identity: FollowerIdentity,
    /// The name it introduced itself by: a label.
    pub name: String,
    pub following: bool,
    /// When it joined, in seconds since the Unix epoch.
    pub since: f64,
    pub run: Option<RunSummary>,
    /// Whether this is the follower's first row in the table's order (it carries the Remove
    /// button: one per follower, however its rows are sorted).
    pub first: bool,
}

impl Row {
    /// What the instructor's server calls its copy of this row's run, once charted (`None`:
    /// no run, or one whose name is too long to copy).
    pub fn copy(&self) -> Option<RunId> {
        self.run.as_ref().and_then(|run| shared_copy_id(&self.identity.key(), &run.id))
    }

    /// Who the follower is, when its name alone would not say: an account other than the
    /// name, or an invitation (`None`: the name is the account's).
    pub fn identity_words(&self) -> Option<String> {
        match &self.identity {
            FollowerIdentity::Account { user } if *user == self.name => None,
            identity => Some(identity.to_string()),
        }
    }

    /// Where its learner stands with the presentation, `presenting` telling whether one is on.
    pub fn standing(&self, presenting: bool) -> Standing {
        match (presenting, self.following) {
            (true, true) => Standing::Following,
            (true, false) => Standing::BrokeAway,
            (false, true) => Standing::WillFollow,
            (false, false) => Standing::NotFollowing,
        }
    }

    pub fn loss(&self) -> String {
        self.run.as_ref().and_then(|r| r.loss).map(format_number).unwrap_or_default()
    }

    pub fn speed(&self) -> String {
        self.run.as_ref().and_then(|r| r.samples_per_sec).map(format_number).unwrap_or_default()
    }
}

/// The roster's rows in `sort`'s order.
pub fn rows(followers: &[Follower], sort: Sort) -> Vec<Row> {
    let mut rows: Vec<Row> = followers
        .iter()
        .flat_map(|f| {
            let row = |run: Option<&RunSummary>| Row {
                follower: f.id,
                identity: f.identity.clone(),
                name: f.name.clone(),
                following: f.following,
                since: f.since,
                run: run.cloned(),
                first: false,
            };
            match f.runs.as_deref() {
                Some(runs) if !runs.is_empty() => runs.iter().map(|r| row(Some(r))).collect(),
                _ => vec![row(None)],
            }
        })
        .collect();
    rows.sort_by(|a, b| sort.order(a, b));
    let mut seen = HashSet::new();
    for row in &mut rows {
        row.first = seen.insert(row.follower);
    }
    rows
}

/// The counts above the roster: how many learners (identities, however many connections
/// each has), how many of them follow now.
pub fn counts(followers: &[Follower]) -> String {
    let people: HashSet<&FollowerIdentity> = followers.iter().map(|f| &f.identity).collect();
    let following: HashSet<&FollowerIdentity> = followers.iter().filter(|f| f.following).map(|f| &f.identity).collect();
    let following = following.len();
    match people.len() {
        0 => "no followers yet: hand out the class link".into(),
        1 => format!("1 follower, {following} following"),
        n => format!("{n} followers, {following} following"),
    }
}

/// What the counts add when the roster came without some followers' runs (`None`: it did not).
pub fn withheld_words(withheld: u32) -> Option<String> {
    (withheld > 0).then(|| {
        let whose = if withheld == 1 { "1 follower".to_owned() } else { format!("{withheld} followers") };
        format!(" (the runs of {whose} who joined last are not listed: a roster carries at most {} kB of runs)", MAX_ROSTER_RUN_BYTES >> 10)
    })
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;

    use super::*;

    fn run(id: &str, config: &str, state: RunState, loss: Option<f64>, speed: Option<f64>) -> RunSummary {
        RunSummary { id: RunId::parse(id).unwrap(), config: config.into(), layout: Sizes::default(), state, loss, samples_per_sec: speed }
    }

    fn account(user: &str) -> FollowerIdentity {
        FollowerIdentity::Account { user: user.into() }
    }

    /// Ada shares two runs, bob none, Cy one (still without a loss); they joined in that order.
    fn roster() -> Vec<Follower> {
        vec![
            Follower {
                id: 1,
                identity: account("ada"),
                name: "Ada".into(),
                following: true,
                since: 100.0,
                runs: Some(vec![
                    run("a1", "cpu_tiny", RunState::Completed, Some(0.4), Some(90.0)),
                    run("a2", "cpu_short", RunState::Running, Some(0.7), Some(30.0)),
                ]),
            },
            Follower { id: 2, identity: account("bob"), name: "bob".into(), following: false, since: 200.0, runs: None },
            Follower {
                id: 3,
                identity: FollowerIdentity::Invited { name: "cy".into() },
                name: "Cy".into(),
                following: true,
                since: 300.0,
                runs: Some(vec![run("c1", "cpu_tiny", RunState::Queued, None, None)]),
            },
        ]
    }

    /// Each row as `name/run`, in order.
    fn order(sort: Sort) -> Vec<String> {
        rows(&roster(), sort)
            .iter()
            .map(|r| format!("{}/{}", r.name, r.run.as_ref().map(|r| r.id.to_string()).unwrap_or_default()))
            .collect()
    }

    fn by(column: Column, descending: bool) -> Sort {
        Sort { column, descending }
    }

    #[test]
    fn a_row_per_shared_run_and_one_for_a_follower_sharing_none() {
        let rows = rows(&roster(), Sort::default());
        assert_eq!(order(Sort::default()), ["Ada/a1", "Ada/a2", "bob/", "Cy/c1"]);
        // One Remove button per follower.
        assert_eq!(rows.iter().map(|r| r.first).collect::<Vec<_>>(), [true, false, true, true]);
        let standing = |row: &Row, presenting| row.standing(presenting).label();
        assert_eq!((standing(&rows[2], true), standing(&rows[0], true)), ("broke away", "following"));
        assert_eq!((rows[0].loss(), rows[0].speed(), rows[3].loss()), ("0.4".into(), "90".into(), String::new()));
    }

    #[test]
    fn nobody_has_broken_away_before_a_presentation_starts() {
        let rows = rows(&roster(), Sort::default());
        // bob's page does not follow, Ada's does: before anyone presents, neither has left one.
        assert_eq!((rows[2].standing(false), rows[0].standing(false)), (Standing::NotFollowing, Standing::WillFollow));
        assert!(rows.iter().all(|row| row.standing(false) != Standing::BrokeAway));
        assert_eq!(rows[2].standing(true), Standing::BrokeAway);
    }

    #[test]
    fn every_column_sorts_both_ways_with_ties_in_roster_order_and_empty_cells_last() {
        assert_eq!(order(by(Column::Name, false)), ["Ada/a1", "Ada/a2", "bob/", "Cy/c1"], "letters before case");
        // Ties (Ada's two rows) keep the roster's order both ways.
        assert_eq!(order(by(Column::Name, true)), ["Cy/c1", "bob/", "Ada/a1", "Ada/a2"]);
        assert_eq!(order(by(Column::Following, false)), ["Ada/a1", "Ada/a2", "Cy/c1", "bob/"]);
        assert_eq!(order(by(Column::Following, true)), ["bob/", "Ada/a1", "Ada/a2", "Cy/c1"]);
        assert_eq!(order(by(Column::Since, true)), ["Cy/c1", "bob/", "Ada/a1", "Ada/a2"]);
        assert_eq!(order(by(Column::Config, false)), ["Ada/a2", "Ada/a1", "Cy/c1", "bob/"]);
        assert_eq!(order(by(Column::Config, true)), ["Ada/a1", "Cy/c1", "Ada/a2", "bob/"]);
        assert_eq!(order(by(Column::State, false)), ["Cy/c1", "Ada/a2", "Ada/a1", "bob/"], "queued, running, completed");
        assert_eq!(order(by(Column::Loss, false)), ["Ada/a1", "Ada/a2", "bob/", "Cy/c1"]);
        // Empty cells stay last the other way too.
        assert_eq!(order(by(Column::Loss, true)), ["Ada/a2", "Ada/a1", "bob/", "Cy/c1"]);
        assert_eq!(order(by(Column::Speed, true)), ["Ada/a1", "Ada/a2", "bob/", "Cy/c1"]);
        assert_eq!(order(by(Column::Layout, true)), ["Ada/a1", "Ada/a2", "Cy/c1", "bob/"]);
        // Whichever row comes first carries the follower's Remove button.
        let sorted = rows(&roster(), by(Column::Loss, true));
        assert_eq!(sorted.iter().map(|r| (r.follower, r.first)).collect::<Vec<_>>(), [(1, true), (1, false), (2, true), (3, true)]);
    }

    #[test]
    fn a_click_sorts_by_a_column_then_turns_it_round() {
        let sort = Sort::default().clicked(Column::Loss);
        assert_eq!(sort, by(Column::Loss, false));
        assert_eq!(sort.clicked(Column::Loss), by(Column::Loss, true));
        assert_eq!(sort.clicked(Column::Loss).clicked(Column::Loss), by(Column::Loss, false));
        assert_eq!(sort.clicked(Column::Loss).clicked(Column::Name), by(Column::Name, false));
        assert_eq!((sort.aria(Column::Loss), sort.aria(Column::Name)), ("ascending", "none"));
        assert_eq!(sort.clicked(Column::Loss).aria(Column::Loss), "descending");
    }

    #[test]
    fn the_counts_read_naturally() {
        let roster = roster();
        assert_eq!(counts(&roster), "3 followers, 2 following");
        assert_eq!(counts(&roster[1..2]), "1 follower, 0 following");
        assert_eq!(counts(&[]), "no followers yet: hand out the class link");
        // A second connection of Ada's, under bob's name: one more row, not one more learner.
        let mut twice = roster.clone();
        twice.push(Follower { id: 4, name: "bob".into(), ..roster[0].clone() });
        assert_eq!(counts(&twice), "3 followers, 2 following");
        assert_eq!(withheld_words(0), None);
        assert_eq!(
            withheld_words(2).unwrap(),
            " (the runs of 2 followers who joined last are not listed: a roster carries at most 512 kB of runs)"
        );
    }

    #[test]
    fn a_row_says_who_it_is_where_the_name_does_not_and_copies_go_by_who() {
        let rows = rows(&roster(), Sort::default());
        let words: Vec<Option<String>> = rows.iter().map(Row::identity_words).collect();
        assert_eq!(words, [Some("account ada".into()), Some("account ada".into()), None, Some("invited as cy".into())]);
        assert_eq!(rows[0].copy().unwrap().as_str(), "l-ada-a1", "the copy is the account's, whatever the name");
        assert_eq!(rows[3].copy().unwrap().as_str(), "l-invited_cy-c1");
    }
}
