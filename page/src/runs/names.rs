//! What this page remembers of the runs it launched: the chapter each was launched from, and
//! the sweep variant it ran, if a sweep launched it. A chapter's charts show the runs launched
//! from that chapter (and any run charted by hand), and name a sweep's runs by their variant,
//! so a learner who has been through five chapters does not find every run of all five on
//! every chart, each called by a time stamp.

use std::collections::BTreeMap;

use scalebook_shared::protocol::RunId;
use serde::{Deserialize, Serialize};

/// The most runs remembered (the newest): far more than a class day launches from one page.
pub const REMEMBERED: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunName {
    /// The chapter (its slug) the run was launched from; `None`: charted by hand, shown by every
    /// chapter's charts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chapter: Option<String>,
    /// The sweep variant's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Run ids to what the page remembers of them, oldest first by id (ids sort by creation).
pub type RunNames = BTreeMap<RunId, RunName>;

/// Remembers `name` for `run`, forgetting the oldest beyond [`REMEMBERED`].
pub fn remember(names: &mut RunNames, run: RunId, name: RunName) {
    names.insert(run, name);
    while names.len() > REMEMBERED {
        names.pop_first();
    }
}

/// The charted runs a chart of chapter `chapter` shows: those launched from it, and those with
/// no chapter (charted by hand, or not launched from this page).
pub fn in_chapter(charted: &[RunId], names: &RunNames, chapter: Option<&str>) -> Vec<RunId> {
    charted
        .iter()
        .filter(|id| match (names.get(*id).and_then(|n| n.chapter.as_deref()), chapter) {
            (Some(launched_from), Some(here)) => launched_from == here,
            _ => true,
        })
        .cloned()
        .collect()
}

/// [`in_chapter`], each run with its name (a sweep's variant): what a chart shows, and what a
/// presenting page sends so that a following page shows the same runs named the same way.
pub fn named_in_chapter(charted: &[RunId], names: &RunNames, chapter: Option<&str>) -> Vec<(RunId, Option<String>)> {
    in_chapter(charted, names, chapter)
        .into_iter()
        .map(|id| {
            let name = names.get(&id).and_then(|n| n.name.clone());
            (id, name)
        })
        .collect()
}

/// The legend's words for a run: its variant's `name` when a sweep ran it, else its id; with
/// the config it ran.
pub fn label(id: &RunId, name: Option<&str>, config: Option<&str>) -> String {
    let first = name.map_or_else(|| id.to_string(), str::to_owned);
    match config {
        Some(config) => format!("{first} ({config})"),
        None => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> RunId {
        RunId::parse(text).unwrap()
    }

    fn launched(chapter: &str, name: Option<&str>) -> RunName {
        RunName { chapter: Some(chapter.into()), name: name.map(str::to_owned) }
    }

    #[test]
    fn a_chapter_charts_its_own_runs_and_the_ones_charted_by_hand() {
        let mut names = RunNames::new();
        remember(&mut names, id("r1"), launched("large-batch", Some("Linear rule")));
        remember(&mut names, id("r2"), launched("data-parallel", None));
        remember(&mut names, id("r3"), RunName::default());
        let charted = [id("r1"), id("r2"), id("r3"), id("r4")];
        assert_eq!(in_chapter(&charted, &names, Some("large-batch")), [id("r1"), id("r3"), id("r4")]);
        assert_eq!(in_chapter(&charted, &names, Some("data-parallel")), [id("r2"), id("r3"), id("r4")]);
        assert_eq!(in_chapter(&charted, &names, None).len(), 4, "outside a chapter, every run");
        let named = named_in_chapter(&charted, &names, Some("large-batch"));
        assert_eq!(named[0], (id("r1"), Some("Linear rule".to_owned())));
        assert_eq!(label(&named[0].0, named[0].1.as_deref(), Some("cpu_short")), "Linear rule (cpu_short)");
        assert_eq!(label(&id("r2"), None, Some("cpu_short")), "r2 (cpu_short)");
        assert_eq!(label(&id("r4"), None, None), "r4");
    }

    #[test]
    fn only_the_newest_runs_are_remembered() {
        let mut names = RunNames::new();
        for i in 0..REMEMBERED + 3 {
            remember(&mut names, id(&format!("r{i:04}")), RunName::default());
        }
        assert_eq!(names.len(), REMEMBERED);
        assert!(!names.contains_key(&id("r0002")) && names.contains_key(&id("r0003")));
    }
}
