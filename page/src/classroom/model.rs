//! The classroom's decisions, kept apart from the browser so they are tested on their own:
//! what the presenting page sends and when, what a following page must change to be where the
//! presentation is, when a learner has left it, and when joining a class makes a page follow.

use scalebook_shared::charts::XAxis;
use scalebook_shared::protocol::{Audience, ChartView, ClassState, MAX_PRESENTED_RUNS, Presentation, RunId};

/// The shortest gap between two `present` messages. The server takes 20 a second; dragging the
/// smoothing slider fires far more input events than that, and ten updates a second still
/// reach a follower well within the quarter of a second the room may wait.
pub const PRESENT_INTERVAL_MS: f64 = 100.0;

/// The x axis and smoothing that every chart block of the page shows (page-wide, so one
/// presentation carries them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChartControls {
    pub axis: XAxis,
    pub smoothing: f64,
}

/// Where in its chapter a page is: what is at the top of its window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Place {
    /// The block there (see [`first_in_view`]), by position among the chapter's blocks.
    pub block: Option<u32>,
    /// The top-level element there (a paragraph, a heading, a list, a block...), by position
    /// among the chapter's top-level elements.
    pub element: Option<u32>,
}

/// Where a page is and what its charts show (the runs of `chapter`'s charts, each with its
/// name), as the presentation it would send. A page with no chart controls yet (no chart block
/// rendered) presents the protocol's defaults.
pub fn presentation(
    chapter: &str,
    place: Place,
    quiz: Option<u32>,
    runs: &[(RunId, Option<String>)],
    controls: Option<ChartControls>,
) -> Presentation {
    let defaults = ChartView::default();
    let controls = controls.unwrap_or(ChartControls { axis: defaults.axis, smoothing: defaults.smoothing });
    Presentation {
        chapter: chapter.to_owned(),
        block: place.block,
        element: place.element,
        quiz,
        charts: ChartView {
            runs: runs.iter().take(MAX_PRESENTED_RUNS).map(|(id, _)| id.clone()).collect(),
            axis: controls.axis,
            smoothing: controls.smoothing,
            names: match runs.iter().any(|(_, name)| name.is_some()) {
                true => runs.iter().take(MAX_PRESENTED_RUNS).map(|(_, name)| name.clone()).collect(),
                false => Vec::new(),
            },
        },
    }
}

/// When a change of the presenting page goes out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dispatch {
    /// At once: nothing was sent for a while.
    Now,
    /// After this many milliseconds (then with whatever the page shows by then).
    After(f64),
    /// A send is already due, and it will carry this change too.
    Due,
}

/// The presenting page's outgoing side: at most one `present` per [`PRESENT_INTERVAL_MS`], each
/// carrying the latest place, and never the same presentation twice in a row.
#[derive(Debug, Default)]
pub struct Outbox {
    sent: Option<Presentation>,
    sent_at: Option<f64>,
    due: bool,
}

impl Outbox {
    /// The page changed at `now` (milliseconds): when to send.
    pub fn changed(&mut self, now: f64) -> Dispatch {
        if self.due {
            return Dispatch::Due;
        }
        match self.sent_at.map(|at| now - at).filter(|since| *since < PRESENT_INTERVAL_MS) {
            None => Dispatch::Now,
            Some(since) => {
                self.due = true;
                Dispatch::After(PRESENT_INTERVAL_MS - since)
            }
        }
    }

    /// The time to send has come: what to send of `here` (`None`: the page has nothing to
    /// present now).
    pub fn flush(&mut self, here: Option<Presentation>, now: f64) -> Option<Presentation> {
        self.due = false;
        let here = here.filter(|here| self.sent.as_ref() != Some(here))?;
        self.sent = Some(here.clone());
        self.sent_at = Some(now);
        Some(here)
    }

    /// Forgets what was sent (a new connection, or presenting again), so the next change goes
    /// out in full.
    pub fn forget(&mut self) {
        self.sent = None;
    }
}

/// What a following page brings to the top of its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scroll {
    /// A top-level element of the chapter: the presenter's place in the text.
    Element(u32),
    /// A block, for a presentation that names no element.
    Block(u32),
    /// The chapter's top: a page arriving in a chapter presented with no place in it.
    Top,
}

/// What a following page changes, in the chapter on its screen, to show a presentation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Steps {
    pub scroll_to: Option<Scroll>,
    /// The quiz answer this page opened for the presentation before, now closed.
    pub close_quiz: Option<u32>,
    pub open_quiz: Option<u32>,
    pub charts: Option<ChartControls>,
}

/// The steps from `shown` (what the page already shows of the presentation, in the chapter
/// now on screen; `None` after arriving in it or catching up) to `next`. Only what changed is
/// redone: a new smoothing must not pull back a learner who scrolled a little.
pub fn steps(shown: Option<&Presentation>, next: &Presentation) -> Steps {
    let shown = shown.filter(|shown| shown.chapter == next.chapter);
    let changed = |part: fn(&Presentation) -> Option<u32>| shown.is_none_or(|shown| part(shown) != part(next));
    let controls = |p: &Presentation| ChartControls { axis: p.charts.axis, smoothing: p.charts.smoothing };
    // The element is the finer place: the block only stands in for a presentation without one.
    let scroll_to = match next.element {
        Some(element) => Some(Scroll::Element(element)).filter(|_| changed(|p| p.element)),
        None => match next.block {
            Some(block) => Some(Scroll::Block(block)).filter(|_| changed(|p| p.block)),
            None => Some(Scroll::Top).filter(|_| shown.is_none()),
        },
    };
    Steps {
        scroll_to,
        close_quiz: shown.and_then(|shown| shown.quiz).filter(|_| changed(|p| p.quiz)),
        open_quiz: next.quiz.filter(|_| changed(|p| p.quiz)),
        charts: Some(controls(next)).filter(|c| shown.is_none_or(|shown| controls(shown) != *c)),
    }
}

/// Whether a following page that arrived at `chapter` by the learner's own hand has broken
/// away: a hash change to where the presentation is was the page following it.
pub fn breaks_away(following: bool, presented: Option<&Presentation>, chapter: &str) -> bool {
    following && presented.is_some_and(|p| p.chapter != chapter)
}

/// Whether the page shows something else than the presentation: another chapter, other runs
/// charted, or other chart controls (a page with no chart block yet has no controls to differ).
/// Where it is in the chapter is the learner's own: it never counts.
pub fn differs(presented: &Presentation, chapter: &str, runs: &[RunId], controls: Option<ChartControls>) -> bool {
    presented.chapter != chapter
        || presented.charts.runs != runs
        || controls.is_some_and(|c| c.axis != presented.charts.axis || c.smoothing != presented.charts.smoothing)
}

/// The first of a chapter's blocks or elements, in page order, not yet scrolled past `top` (the
/// top of the window below the sticky header), given their bottom edges relative to the window.
pub fn first_in_view(bottoms: impl IntoIterator<Item = f64>, top: f64) -> Option<u32> {
    bottoms.into_iter().position(|bottom| bottom > top).and_then(|at| u32::try_from(at).ok())
}

/// The window's scroll position that puts an element whose top is at `element_top` (relative
/// to the window, now scrolled to `scroll_y`) at `top`, just below the sticky header.
pub fn scroll_target(scroll_y: f64, element_top: f64, top: f64) -> f64 {
    (scroll_y + element_top - top).max(0.0)
}

/// The window's scroll position that brings an element spanning `top` to `bottom` (relative to
/// the window, now scrolled to `scroll_y`) into the view between `view_top` (just below the
/// sticky header) and `view_bottom`, or `None` when all of it is in view. The least scroll
/// that shows its bottom, but never past its top: a follower's window, shorter than the
/// presenter's, sees an answer the presenter opened below it, from its start when it is tall.
pub fn reveal_target(scroll_y: f64, top: f64, bottom: f64, view_top: f64, view_bottom: f64) -> Option<f64> {
    if top >= view_top && bottom <= view_bottom {
        return None;
    }
    let by = if top < view_top { top - view_top } else { (bottom - view_bottom).min(top - view_top) };
    Some((scroll_y + by).max(0.0))
}

/// Whether joining and leaving a class makes a page follow: a page follows the class it joins
/// (or opens in) by default, as a viewer's page follows its instructor, and stops when the
/// class is left or refuses it. A reconnection to the same class changes nothing, so a
/// learner who broke away stays away.
#[derive(Debug, Default)]
pub struct ClassFollowing {
    /// The address of the class the page is in.
    joined: Option<String>,
}

impl ClassFollowing {
    /// The server's class state is now `state`: `Some(following)` when the page should start
    /// (`true`) or stop following, `None` when it keeps what it does.
    pub fn changed(&mut self, state: &ClassState) -> Option<bool> {
        match state {
            ClassState::Joined { address } if self.joined.as_ref() != Some(address) => {
                self.joined = Some(address.clone());
                Some(true)
            }
            ClassState::Joined { .. } | ClassState::Connecting { .. } => None,
            ClassState::Alone | ClassState::Refused { .. } => self.joined.take().map(|_| false),
        }
    }
}

/// The instructor's head count, as the header says it.
pub fn audience_label(audience: Audience) -> String {
    let viewers = if audience.viewers == 1 { "viewer" } else { "viewers" };
    match audience.followers {
        0 => format!("{} following ({} {viewers} connected)", audience.following, audience.viewers),
        n => {
            let servers = if n == 1 { "learner's Scalebook" } else { "learners' Scalebooks" };
            format!("{} following ({} {viewers} and {n} {servers} connected)", audience.following, audience.viewers)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(chapter: &str, block: Option<u32>, quiz: Option<u32>) -> Presentation {
        presentation(chapter, Place { block, element: None }, quiz, &[], Some(ChartControls { axis: XAxis::Step, smoothing: 0.6 }))
    }

    fn run(id: &str) -> RunId {
        RunId::parse(id).unwrap()
    }

    #[test]
    fn a_page_presents_its_place_and_at_most_the_runs_the_server_takes() {
        let runs: Vec<(RunId, Option<String>)> = (0..MAX_PRESENTED_RUNS + 2).map(|i| (run(&format!("r{i}")), None)).collect();
        let p = presentation("single-gpu", Place { block: Some(2), element: Some(7) }, None, &runs, None);
        assert_eq!((p.block, p.element), (Some(2), Some(7)));
        assert_eq!(p.charts.runs, runs[..MAX_PRESENTED_RUNS].iter().map(|(id, _)| id.clone()).collect::<Vec<_>>());
        assert!(p.charts.names.is_empty(), "no names to send");
        assert_eq!((p.charts.axis, p.charts.smoothing), (ChartView::default().axis, ChartView::default().smoothing));
        assert!(p.problems().is_empty());
        let wall = presentation("single-gpu", Place::default(), None, &[], Some(ChartControls { axis: XAxis::Wall, smoothing: 0.9 }));
        assert_eq!((wall.charts.axis, wall.charts.smoothing), (XAxis::Wall, 0.9));
    }

    #[test]
    fn a_presentation_carries_its_chapters_runs_named_as_the_presenter_sees_them() {
        use crate::runs::names::{RunName, RunNames, named_in_chapter};
        let mut names = RunNames::default();
        names.insert(run("r1"), RunName { chapter: Some("data-parallel".into()), name: Some("2 ranks".into()) });
        names.insert(run("r2"), RunName { chapter: Some("large-batch".into()), name: None });
        let charted = [run("r1"), run("r2"), run("r3")];
        let shown = named_in_chapter(&charted, &names, Some("data-parallel"));
        let p = presentation("data-parallel", Place::default(), None, &shown, None);
        assert_eq!(p.charts.runs, [run("r1"), run("r3")], "another chapter's run stays with the presenter");
        assert_eq!(p.charts.named(), [(run("r1"), Some("2 ranks".to_owned())), (run("r3"), None)]);
        assert!(p.problems().is_empty());
        let mut long = p.clone();
        long.charts.names[0] = Some("x".repeat(201));
        assert_eq!(long.problems().0[0].field, "charts.names");
    }

    #[test]
    fn changes_go_out_at_once_then_at_most_one_per_interval_with_the_latest_place() {
        let mut outbox = Outbox::default();
        assert_eq!(outbox.changed(1000.0), Dispatch::Now);
        assert_eq!(outbox.flush(Some(at("a", Some(1), None)), 1000.0), Some(at("a", Some(1), None)));
        // A burst within the interval: one send, when the interval is over, of the last place.
        assert_eq!(outbox.changed(1030.0), Dispatch::After(70.0));
        assert_eq!(outbox.changed(1050.0), Dispatch::Due);
        assert_eq!(outbox.flush(Some(at("a", Some(3), None)), 1100.0), Some(at("a", Some(3), None)));
        // A page with nothing sound to present sends nothing, and is not left waiting.
        assert_eq!(outbox.changed(1150.0), Dispatch::After(50.0));
        assert_eq!(outbox.flush(None, 1200.0), None);
        // Back where it was sent from: nothing to send.
        assert_eq!(outbox.changed(1300.0), Dispatch::Now);
        assert_eq!(outbox.flush(Some(at("a", Some(3), None)), 1300.0), None);
        // After a reconnection the same place goes out again.
        outbox.forget();
        assert_eq!(outbox.changed(1500.0), Dispatch::Now);
        assert_eq!(outbox.flush(Some(at("a", Some(3), None)), 1500.0), Some(at("a", Some(3), None)));
    }

    #[test]
    fn a_follower_redoes_only_what_changed_and_closes_the_answer_it_opened() {
        let first = at("a", Some(2), Some(4));
        // Arriving: everything.
        let all = steps(None, &first);
        assert_eq!((all.scroll_to, all.close_quiz, all.open_quiz), (Some(Scroll::Block(2)), None, Some(4)));
        assert_eq!(all.charts, Some(ChartControls { axis: XAxis::Step, smoothing: 0.6 }));
        // Only the smoothing moved: the learner's scroll stays.
        let mut smoother = first.clone();
        smoother.charts.smoothing = 0.9;
        assert_eq!(
            steps(Some(&first), &smoother),
            Steps { charts: Some(ChartControls { axis: XAxis::Step, smoothing: 0.9 }), ..Steps::default() }
        );
        // Another answer opened: the old one is closed.
        let other_quiz = at("a", Some(2), Some(6));
        assert_eq!(steps(Some(&first), &other_quiz), Steps { close_quiz: Some(4), open_quiz: Some(6), ..Steps::default() });
        let closed = at("a", Some(2), None);
        assert_eq!(steps(Some(&first), &closed), Steps { close_quiz: Some(4), ..Steps::default() });
        // What was shown in another chapter is gone with it: nothing to close there.
        let elsewhere = at("b", Some(1), Some(4));
        assert_eq!(steps(Some(&first), &elsewhere), Steps { scroll_to: Some(Scroll::Block(1)), open_quiz: Some(4), ..all });
    }

    #[test]
    fn a_follower_goes_to_the_presenters_place_in_the_text_not_only_to_blocks() {
        let with_element = |block, element| Presentation { element, ..at("a", block, None) };
        // The opening text, before any block: the element alone says where.
        let opening = with_element(None, Some(3));
        assert_eq!(steps(None, &opening).scroll_to, Some(Scroll::Element(3)));
        // The next paragraph: scrolled to, though the block did not change.
        let further = with_element(None, Some(4));
        assert_eq!(steps(Some(&opening), &further).scroll_to, Some(Scroll::Element(4)));
        // The element is the finer place: a block beside it is not scrolled to.
        let at_block = with_element(Some(0), Some(6));
        assert_eq!(steps(Some(&further), &at_block).scroll_to, Some(Scroll::Element(6)));
        // The same place again (a smoothing moved): no scroll.
        let mut smoother = at_block.clone();
        smoother.charts.smoothing = 0.1;
        assert_eq!(steps(Some(&at_block), &smoother).scroll_to, None);
        // No place at all: a page arriving starts at the chapter's top (the chapter page leaves
        // placing a following page to the classroom), and is left alone after that.
        let nowhere = with_element(None, None);
        assert_eq!(steps(None, &nowhere).scroll_to, Some(Scroll::Top));
        assert_eq!(steps(Some(&nowhere), &nowhere).scroll_to, None);
    }

    #[test]
    fn only_a_learner_leaving_the_presented_chapter_breaks_away() {
        let p = at("b", None, None);
        assert!(breaks_away(true, Some(&p), "c"));
        assert!(!breaks_away(true, Some(&p), "b"), "the page following the presentation");
        assert!(!breaks_away(false, Some(&p), "c"), "already on its own");
        assert!(!breaks_away(true, None, "c"), "nothing presented");
    }

    #[test]
    fn a_page_differs_by_chapter_runs_or_controls_never_by_scroll() {
        let mut p = at("b", Some(3), Some(5));
        p.charts.runs = vec![run("r1")];
        let controls = Some(ChartControls { axis: XAxis::Step, smoothing: 0.6 });
        assert!(!differs(&p, "b", &[run("r1")], controls));
        assert!(!differs(&p, "b", &[run("r1")], None));
        assert!(differs(&p, "a", &[run("r1")], controls));
        assert!(differs(&p, "b", &[], controls));
        assert!(differs(&p, "b", &[run("r1")], Some(ChartControls { axis: XAxis::Wall, smoothing: 0.6 })));
    }

    #[test]
    fn the_place_in_view_is_the_first_not_scrolled_past_the_header() {
        assert_eq!(first_in_view([-300.0, -1.0, 40.0, 900.0], 0.0), Some(2));
        assert_eq!(first_in_view([10.0], 0.0), Some(0));
        assert_eq!(first_in_view([-10.0, -5.0], 0.0), None);
        assert_eq!(first_in_view([], 0.0), None);
        // Below a 48-pixel header: what is hidden under it counts as scrolled past.
        assert_eq!(first_in_view([30.0, 48.0, 60.0], 48.0), Some(2));
    }

    #[test]
    fn an_element_is_brought_just_below_the_header() {
        // 700 px down the chapter, an element 260 px below the window's top, a 48 px header.
        assert_eq!(scroll_target(700.0, 260.0, 48.0), 912.0);
        // Above the window: scrolled back up.
        assert_eq!(scroll_target(700.0, -152.0, 48.0), 500.0);
        // Near the page's top: never before it.
        assert_eq!(scroll_target(10.0, 20.0, 48.0), 0.0);
    }

    #[test]
    fn an_opened_answer_below_the_window_is_scrolled_into_view() {
        // A window from 48 (below the header) to 600 px, scrolled 1000 px down the chapter.
        let reveal = |top, bottom| reveal_target(1000.0, top, bottom, 48.0, 600.0);
        assert_eq!(reveal(300.0, 500.0), None, "in view: the learner's place stays");
        // Its bottom 150 px below the window: up by just that much.
        assert_eq!(reveal(400.0, 750.0), Some(1150.0));
        // Taller than the window: its top just below the header.
        assert_eq!(reveal(500.0, 1400.0), Some(1452.0));
        // Wholly below: the same rule.
        assert_eq!(reveal(900.0, 1000.0), Some(1400.0));
        // Above the window: back up to its top.
        assert_eq!(reveal(-200.0, 100.0), Some(752.0));
        assert_eq!(reveal_target(10.0, -100.0, 0.0, 48.0, 600.0), Some(0.0), "never before the page's top");
    }

    #[test]
    fn a_page_follows_the_class_it_joins_until_it_leaves() {
        let mut rule = ClassFollowing::default();
        let joined = |address: &str| ClassState::Joined { address: address.into() };
        let connecting = ClassState::Connecting { address: "h:1".into(), attempt: 0, warning: None };
        assert_eq!(rule.changed(&ClassState::Alone), None, "a page that never joined keeps what it does");
        assert_eq!(rule.changed(&connecting), None);
        assert_eq!(rule.changed(&joined("h:1")), Some(true), "joined: follow");
        // A dropped connection to the class, then back: the learner's own choice stays.
        assert_eq!(rule.changed(&ClassState::Connecting { address: "h:1".into(), attempt: 2, warning: None }), None);
        assert_eq!(rule.changed(&joined("h:1")), None);
        // Another class: follow it.
        assert_eq!(rule.changed(&joined("h:2")), Some(true));
        assert_eq!(rule.changed(&ClassState::Alone), Some(false), "left: stop following");
        assert_eq!(rule.changed(&ClassState::Alone), None);
        assert_eq!(rule.changed(&joined("h:2")), Some(true), "joined again: follow again");
        assert_eq!(rule.changed(&ClassState::Refused { address: "h:2".into(), reason: "removed".into() }), Some(false));
    }

    #[test]
    fn the_head_count_reads_naturally() {
        assert_eq!(audience_label(Audience { viewers: 1, followers: 0, following: 1 }), "1 following (1 viewer connected)");
        assert_eq!(audience_label(Audience { viewers: 12, followers: 0, following: 9 }), "9 following (12 viewers connected)");
        assert_eq!(
            audience_label(Audience { viewers: 0, followers: 2, following: 1 }),
            "1 following (0 viewers and 2 learners' Scalebooks connected)"
        );
    }
}
