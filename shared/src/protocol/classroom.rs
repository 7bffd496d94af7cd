//! The classroom: what the instructor's page presents to the pages following it, and who a
//! learner is when the instructor lets the room launch small runs of its own.
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

/// A fixed number of lowercase hex digits: the shape of a learner's key and name, checked
/// wherever one is read, so neither can carry anything else into a record or a page. `OLD` is
/// a length an earlier version wrote, still read (a record kept from then).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HexName<const LEN: usize, const OLD: usize = LEN>(String);

impl<const LEN: usize, const OLD: usize> HexName<LEN, OLD> {
    pub fn parse(text: &str) -> Result<HexName<LEN, OLD>, String> {
        if (text.len() == LEN || text.len() == OLD) && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(HexName(text.to_owned()))
        } else {
            Err(format!("must be {LEN} lowercase hex digits"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<const LEN: usize, const OLD: usize> TryFrom<String> for HexName<LEN, OLD> {
    type Error = String;
    fn try_from(text: String) -> Result<HexName<LEN, OLD>, String> {
        HexName::parse(&text)
    }
}

impl<const LEN: usize, const OLD: usize> From<HexName<LEN, OLD>> for String {
    fn from(name: HexName<LEN, OLD>) -> String {
        name.0
    }
}

impl<const LEN: usize, const OLD: usize> std::fmt::Display for HexName<LEN, OLD> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The length of a [`LearnerKey`] in hex digits.
pub const LEARNER_KEY_LEN: usize = 32;
/// The length of a [`Learner`] name in hex digits: 128 bits, so that no one finds a key of
/// another learner's name by trying keys (48 bits, as names had before, took hours on a GPU).
pub const LEARNER_LEN: usize = 32;
/// The length of the names that earlier versions recorded on runs: still read, never made
/// (no key's name has it now, so such a run is no learner's to act on).
pub const OLD_LEARNER_LEN: usize = 12;

/// A learner's private key: the server hands one to a viewer page, which keeps it and presents
/// it again after a reload, so its runs stay its own. Only its hash, [`Learner`], is ever shown
/// to anyone else.
pub type LearnerKey = HexName<LEARNER_KEY_LEN>;

/// A learner as the others see them: a public name derived one way from their key, recorded
/// on the runs they launch (a run without one is the instructor's).
pub type Learner = HexName<LEARNER_LEN, OLD_LEARNER_LEN>;

/// What the room may do beyond reading, as the instructor started the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnerRuns {
    /// Runs one learner may have queued or running at once (`--viewer-runs N`); 0: none.
    pub per_learner: u32,
    /// The configs a learner may launch (the instructor's learner configs), CPU only.
    pub configs: Vec<String>,
    /// Minutes a learner's run may train before it is stopped (`--learner-time-limit`).
    #[serde(default)]
    pub time_limit_minutes: u32,
    /// The most ranks one learner's run may have (`--learner-ranks`): the distributed
    /// chapters' hands-on layouts need two. A run larger than the machine's
    /// `--max-local-ranks` waits for the machine and then runs alone.
    #[serde(default = "one_rank")]
    pub ranks: u32,
    /// The memory one learner's run may use, all its ranks together, in bytes
    /// (`--learner-memory-share`; by default the machine's memory over the learner runs it
    /// runs at once). `None` from a server that predates the share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_share_bytes: Option<u64>,
}

/// What a server that predates `--learner-ranks` allowed.
fn one_rank() -> u32 {
    1
}

impl LearnerRuns {
    /// How long a learner's run may train (`None`: learners launch nothing).
    pub fn time_limit(&self) -> Option<std::time::Duration> {
        (self.per_learner > 0 && self.time_limit_minutes > 0)
            .then(|| std::time::Duration::from_secs(u64::from(self.time_limit_minutes) * 60))
    }
}

/// The identity a viewer connection launches under (sent in `welcome` to a viewer page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnerIdentity {
    /// To keep, and present again in `hello` after a reload.
    pub key: LearnerKey,
    /// How its runs are marked (`RunRecord::learner`).
    pub learner: Learner,
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

    #[test]
    fn learner_keys_and_names_are_fixed_length_hex() {
        assert!(LearnerKey::parse(&"0a".repeat(16)).is_ok());
        assert!(LearnerKey::parse("0A0A").is_err());
        assert!(LearnerKey::parse(&"g".repeat(32)).is_err());
        assert!(Learner::parse(&"0123456789abcdef".repeat(2)).is_ok());
        assert!(Learner::parse("0123456789ab").is_ok(), "a name an earlier version recorded");
        assert!(Learner::parse("0123456789abc").is_err());
        assert!(LearnerKey::parse(&"0a".repeat(6)).is_err(), "no old length for keys");
        assert!(serde_json::from_str::<Learner>(r#""../x""#).is_err());
    }
}
