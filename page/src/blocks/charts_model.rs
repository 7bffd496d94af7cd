//! The charts block's decisions, apart from its signals: which curves it draws (the charted
//! runs, the dropped event files, the baseline) in which colours, which of them the legend
//! leaves shown, which tags may still get a chart, and what a dropped file adds.

use std::collections::HashSet;

use scalebook_shared::metrics::tags;
use scalebook_shared::protocol::Series;

use super::chart_drawing::{Overlay, Source};

/// Run colours, in charting order: Okabe and Ito's colour-blind-safe set, strongest first, then
/// five of Paul Tol's muted set, so a dozen runs (a sweep and its reruns) never share one.
const RUN_COLOURS: [&str; 12] =
    ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#882255", "#117733", "#332288", "#999933", "#AA4499"];
const BASELINE_COLOUR: &str = "#6B6B6B";
const BASELINE_KEY: &str = "baseline";
const BASELINE_LABEL: &str = "tutorial baseline (base, 1 A100, 22 h)";
/// Charts added for a dropped file none of whose tags the block shows: its first tags.
const TAGS_ADDED_FOR_A_FILE: usize = 4;

/// A curve the block draws in the next run colour: a charted run or a dropped file.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The run id or the file's [`Overlay::key`]: what the legend hides it by.
    pub key: String,
    pub label: String,
    /// Where its relative time starts (the earliest wall time among its series).
    pub start_wall: f64,
    pub series: Vec<Series>,
}

impl Curve {
    /// A charted run, labelled as [`crate::runs::names::label`] names it.
    pub fn run(id: String, label: String, start_wall: f64, series: Vec<Series>) -> Curve {
        Curve { key: id, label, start_wall, series }
    }

    /// A dropped event file, named by the file.
    pub fn overlay(overlay: Overlay, start_wall: f64) -> Curve {
        Curve { key: overlay.key(), label: overlay.name.clone(), start_wall, series: overlay.series }
    }

    fn source(self, colour: usize) -> Source {
        Source {
            key: self.key,
            label: self.label,
            colour: RUN_COLOURS[colour % RUN_COLOURS.len()],
            dashed: false,
            start_wall: self.start_wall,
            has_wall_time: true,
            series: self.series,
        }
    }
}

/// Every curve the block may draw: the charted runs (`None` for one whose points are not here
/// yet: it draws nothing but keeps its colour, so the others' colours do not shift when it
/// arrives), the dropped files in the colours after the drawn runs', and the baseline (dashed
/// grey, with no wall clock) when it is shown.
pub fn sources(runs: Vec<Option<Curve>>, dropped: Vec<Curve>, baseline: Option<Vec<Series>>) -> Vec<Source> {
    let mut out: Vec<Source> = runs.into_iter().enumerate().filter_map(|(i, run)| Some(run?.source(i))).collect();
    let first_colour = out.len();
    out.extend(dropped.into_iter().enumerate().map(|(i, curve)| curve.source(first_colour + i)));
    if let Some(series) = baseline {
        out.push(Source {
            key: BASELINE_KEY.into(),
            label: BASELINE_LABEL.into(),
            colour: BASELINE_COLOUR,
            dashed: true,
            start_wall: 0.0,
            has_wall_time: false,
            series,
        });
    }
    out
}

/// The sources the legend leaves shown.
pub fn visible(sources: &[Source], hidden: &HashSet<String>) -> Vec<Source> {
    sources.iter().filter(|s| !hidden.contains(&s.key)).cloned().collect()
}

/// The tags some source has and no chart shows yet, sorted: what "add a chart" offers. A run's
/// `Run/Steps` is a fact about it (the progress bar shows it), not a curve.
pub fn available_tags(sources: &[Source], shown: &[String]) -> Vec<String> {
    let mut all: Vec<String> = sources.iter().flat_map(|s| s.series.iter().map(|x| x.tag.clone())).collect();
    all.sort();
    all.dedup();
    all.retain(|t| !shown.contains(t) && t != tags::run::STEPS);
    all
}

/// The charts a dropped file adds: its first tags when the block shows none of them, else
/// none (it is drawn on the charts it shares).
pub fn add_tags_for(shown: &mut Vec<String>, overlay: &Overlay) {
    if !overlay.series.iter().any(|s| shown.contains(&s.tag)) {
        shown.extend(overlay.series.iter().take(TAGS_ADDED_FOR_A_FILE).map(|s| s.tag.clone()));
    }
}

/// Adds a dropped file's curves; a file dropped again replaces its earlier copy.
pub fn add_overlay(all: &mut Vec<Overlay>, overlay: Overlay) {
    all.retain(|o| o.name != overlay.name);
    all.push(overlay);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(tags: &[&str]) -> Vec<Series> {
        tags.iter().map(|t| Series { tag: (*t).into(), buckets: Vec::new() }).collect()
    }

    fn overlay(name: &str, tags: &[&str]) -> Overlay {
        Overlay { name: name.into(), series: series(tags) }
    }

    #[test]
    fn runs_keep_their_colours_files_follow_and_the_baseline_is_grey_and_dashed() {
        let runs = vec![
            Some(Curve::run("r1".into(), "r1 (cpu_tiny)".into(), 10.0, series(&["Loss/train"]))),
            None,
            Some(Curve::run("r3".into(), "r3".into(), 20.0, series(&["Loss/valid"]))),
        ];
        let dropped = vec![Curve::overlay(overlay("events.a", &["Loss/valid"]), 5.0)];
        let all = sources(runs, dropped, Some(series(&["Loss/valid"])));
        let shape: Vec<(&str, &str, &str, bool, bool)> =
            all.iter().map(|s| (s.key.as_str(), s.label.as_str(), s.colour, s.dashed, s.has_wall_time)).collect();
        assert_eq!(
            shape,
            [
                ("r1", "r1 (cpu_tiny)", RUN_COLOURS[0], false, true),
                ("r3", "r3", RUN_COLOURS[2], false, true),
                ("file:events.a", "events.a", RUN_COLOURS[2], false, true),
                ("baseline", "tutorial baseline (base, 1 A100, 22 h)", "#6B6B6B", true, false),
            ]
        );
        assert_eq!((all[0].start_wall, all[2].start_wall, all[3].start_wall), (10.0, 5.0, 0.0));
        let many: Vec<Option<Curve>> = (0..14).map(|i| Some(Curve::run(format!("r{i}"), String::new(), 0.0, Vec::new()))).collect();
        let colours: Vec<&str> = sources(many, Vec::new(), None).iter().map(|s| s.colour).collect();
        assert_eq!(colours[..12].iter().collect::<HashSet<_>>().len(), 12, "a dozen runs, a dozen colours");
        assert_eq!(colours[13], RUN_COLOURS[1], "then they wrap around");
    }

    #[test]
    fn hidden_curves_leave_the_charts_and_only_unshown_tags_are_offered() {
        let runs = vec![Some(Curve::run("r1".into(), "r1".into(), 0.0, series(&["b", "a"])))];
        let all = sources(runs, vec![Curve::overlay(overlay("f", &["c", "a"]), 0.0)], None);
        let hidden = HashSet::from(["r1".to_owned()]);
        assert_eq!(visible(&all, &hidden).iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["file:f"]);
        assert_eq!(visible(&all, &HashSet::new()).len(), 2);
        assert_eq!(available_tags(&all, &["b".to_owned()]), ["a", "c"]);
        let planned = sources(vec![Some(Curve::run("r2".into(), "r2".into(), 0.0, series(&["a", tags::run::STEPS])))], Vec::new(), None);
        assert_eq!(available_tags(&planned, &[]), ["a"], "a run's length is no curve");
    }

    #[test]
    fn a_dropped_file_gets_charts_only_when_none_shows_its_tags_and_replaces_its_copy() {
        let mut shown = vec!["Loss/valid".to_owned()];
        add_tags_for(&mut shown, &overlay("f", &["Loss/valid", "Loss/train"]));
        assert_eq!(shown, ["Loss/valid"]);
        add_tags_for(&mut shown, &overlay("g", &["a", "b", "c", "d", "e"]));
        assert_eq!(shown, ["Loss/valid", "a", "b", "c", "d"]);

        let mut all = vec![overlay("f", &["a"]), overlay("g", &["b"])];
        add_overlay(&mut all, overlay("f", &["c"]));
        let names: Vec<(&str, &str)> = all.iter().map(|o| (o.name.as_str(), o.series[0].tag.as_str())).collect();
        assert_eq!(names, [("g", "b"), ("f", "c")]);
    }
}
