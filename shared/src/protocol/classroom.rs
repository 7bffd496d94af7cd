//! The classroom: what the instructor's page presents to the pages following it (who a learner
//! is when the instructor lets the room launch runs of its own is `learner`).
//!
//! A presentation is the instructor page's place in the notebook (chapter, block in view,
//! open quiz answer) and its charts (runs, axis, smoothing). The server keeps the latest one and
//! sends it to every connection, and to each new one as it opens, so a learner who joins late
//! lands where the instructor is.

use serde::{Deserialize, Serialize};

use super::RunId;
use crate::Problems;
use crate::charts::{MAX_SMOOTHING, XAxis};

/// The longest chapter slug a presentation may name.
pub const MAX_SLUG_LEN: usize = 64;
/// The most runs a presentation's charts may show.
pub const MAX_PRESENTED_RUNS: usize = 16;
/// The highest block index a presentation may name (a chapter has a few dozen blocks).
pub const MAX_BLOCK_INDEX: u32 = 1024;
/// The highest element index a presentation may name (a chapter has a few hundred).
pub const MAX_ELEMENT_INDEX: u32 = 16384;

/// Where the instructor's page is, and what its charts show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Presentation {
    /// The chapter's slug (`#/slug` in the page's address).
    pub chapter: String,
    /// The block in view: its position among the chapter's blocks, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<u32>,
    /// The place in the text at the top of the window: the chapter's top-level element there
    /// (paragraph, heading, list, block...), by position from 0. Counted in elements, not
    /// pixels, so a learner's narrower window lands on the same words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<u32>,
    /// The quiz whose answer is open, by its position among the chapter's blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiz: Option<u32>,
    #[serde(default)]
    pub charts: ChartView,
}

/// What the charts show: the runs charted together, in order, and the shared controls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartView {
    /// The runs the presented chapter's charts show (not every run the presenter charts).
    pub runs: Vec<RunId>,
    pub axis: XAxis,
    /// TensorBoard's smoothing weight, 0 to [`MAX_SMOOTHING`].
    pub smoothing: f64,
    /// Each run's name in the presenter's legend (a sweep's variant), beside `runs`: a
    /// following page names them as the presenter sees them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<Option<String>>,
}

/// The longest run name a presentation carries (bytes).
pub const MAX_PRESENTED_NAME_LEN: usize = 200;

impl Default for ChartView {
    fn default() -> Self {
        ChartView { runs: Vec::new(), axis: XAxis::Step, smoothing: crate::charts::DEFAULT_SMOOTHING, names: Vec::new() }
    }
}

impl ChartView {
    /// The presented runs, each with its name (`None`: named by its id).
    pub fn named(&self) -> Vec<(RunId, Option<String>)> {
        self.runs.iter().enumerate().map(|(i, id)| (id.clone(), self.names.get(i).cloned().flatten())).collect()
    }

    /// Keeps only the runs `keep` accepts, each with its name.
    pub fn retain(&mut self, keep: impl Fn(&RunId) -> bool) {
        let (runs, names): (Vec<RunId>, Vec<Option<String>>) = self.named().into_iter().filter(|(id, _)| keep(id)).unzip();
        let named = names.iter().any(Option::is_some);
        (self.runs, self.names) = (runs, if named { names } else { Vec::new() });
    }
}

impl Presentation {
    /// Every problem with this presentation, each naming its field and the rule it breaks:
    /// the server forwards a presentation to hundreds of pages, so it takes only sound ones.
    pub fn problems(&self) -> Problems {
        let mut problems = Problems::default();
        let slug_ok = self.chapter.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if self.chapter.is_empty() || self.chapter.len() > MAX_SLUG_LEN || !slug_ok {
            problems.push("chapter", format!("a chapter slug is 1 to {MAX_SLUG_LEN} lowercase letters, digits, `-` or `_`"));
        }
        for (field, index) in [("block", self.block), ("quiz", self.quiz)] {
            if index.is_some_and(|i| i > MAX_BLOCK_INDEX) {
                problems.push(field, format!("a block position is at most {MAX_BLOCK_INDEX}"));
            }
        }
        if self.element.is_some_and(|i| i > MAX_ELEMENT_INDEX) {
            problems.push("element", format!("an element position is at most {MAX_ELEMENT_INDEX}"));
        }
        if self.charts.runs.len() > MAX_PRESENTED_RUNS {
            problems.push("charts.runs", format!("{} runs, at most {MAX_PRESENTED_RUNS} may be charted", self.charts.runs.len()));
        }
        let names = &self.charts.names;
        if names.len() > self.charts.runs.len() || names.iter().flatten().any(|name| name.len() > MAX_PRESENTED_NAME_LEN) {
            problems.push("charts.names", format!("at most one name a run, each at most {MAX_PRESENTED_NAME_LEN} bytes"));
        }
        let smoothing = self.charts.smoothing;
        if !smoothing.is_finite() || !(0.0..=MAX_SMOOTHING).contains(&smoothing) {
            problems.push("charts.smoothing", format!("must be between 0 and {MAX_SMOOTHING}"));
        }
        problems
    }
}

/// How many pages watch, and how many of them follow the presentation (told to the
/// instructor's pages whenever it changes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audience {
    /// Viewer pages connected.
    pub viewers: u32,
    /// Learners' own servers following this server's class (each stands for its learner's
    /// pages; the roster says who they are).
    #[serde(default)]
    pub followers: u32,
    /// Pages following the presentation (viewers and instructors alike), and learners' servers
    /// one of whose pages follows.
    pub following: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn presentation() -> Presentation {
        Presentation { chapter: "data-parallel".into(), block: Some(3), element: None, quiz: None, charts: ChartView::default() }
    }

    #[test]
    fn a_sound_presentation_has_no_problems_and_reads_back() {
        let p = presentation();
        assert!(p.problems().is_empty());
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"chapter": "data-parallel", "block": 3, "charts": {"runs": [], "axis": "step", "smoothing": 0.6}})
        );
        assert_eq!(serde_json::from_value::<Presentation>(json).unwrap(), p);
        // Only the chapter is required.
        let bare: Presentation = serde_json::from_str(r#"{"chapter": "intro"}"#).unwrap();
        assert_eq!(bare.charts, ChartView::default());
    }

    #[test]
    fn a_view_keeps_the_names_of_the_runs_it_keeps() {
        let id = |s: &str| RunId::parse(s).unwrap();
        let mut view = ChartView {
            runs: vec![id("a"), id("l-x-b"), id("c")],
            names: vec![None, Some("B".into()), Some("C".into())],
            ..Default::default()
        };
        view.retain(|run| !run.as_str().starts_with("l-"));
        assert_eq!(view.named(), [(id("a"), None), (id("c"), Some("C".into()))]);
        view.retain(|run| run.as_str() == "a");
        assert_eq!((view.runs.len(), view.names.len()), (1, 0), "no names left to carry");
    }

    #[test]
    fn every_broken_field_is_named() {
        let mut p = presentation();
        p.chapter = "../etc".into();
        p.block = Some(MAX_BLOCK_INDEX + 1);
        p.quiz = Some(u32::MAX);
        p.element = Some(MAX_ELEMENT_INDEX + 1);
        p.charts.smoothing = f64::NAN;
        p.charts.runs = vec![RunId::parse("r1").unwrap(); MAX_PRESENTED_RUNS + 1];
        let fields: Vec<String> = p.problems().0.into_iter().map(|problem| problem.field).collect();
        assert_eq!(fields, ["chapter", "block", "quiz", "element", "charts.runs", "charts.smoothing"]);
        assert!(serde_json::from_str::<Presentation>(r#"{"chapter": "a", "scroll": 5}"#).is_err());
    }
}
