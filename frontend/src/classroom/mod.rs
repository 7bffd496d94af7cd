//! Presenter mode, in the page. The instructor's page, while it presents, tells the server where
//! it is (chapter, the block and the element of the text at the top of its window, open quiz
//! answer) and what its charts show; every page that follows goes there as each `presenting`
//! arrives, until its learner breaks away. The server keeps the latest presentation and hands
//! it to each new connection, so a late joiner lands where the instructor is; the presenting
//! tab remembers that it presents, so a reload carries on presenting. A server that joined a
//! class relays the class instructor's presentation as its own, and its owner's page follows it
//! by default. Provided as context by the app.

mod class_panel;
mod controls;
mod dom;
mod roster;

pub use controls::ClassroomControls;
pub use model::ChartControls;
pub use scalebook_page::classroom::{class_model, model, roster_model};

use std::time::Duration;

use leptos::ev;
use leptos::prelude::*;
use scalebook_page::runs::names;
use scalebook_shared::protocol::{ChartView, ClientMessage, Presentation, Role, RunId};

use crate::net::session_storage;
use crate::routing;
use crate::runs::Runs;
use model::{ClassFollowing, Dispatch, Outbox, Place};

/// Where a presenting tab notes that it presents (sessionStorage: this tab only, through its
/// reloads), so a reload resumes the presentation rather than leaving the room on a stale one.
const PRESENTING_KEY: &str = "scalebook-presenting";

/// This page's part in the class: presenting, following, or neither.
#[derive(Clone, Copy)]
pub struct Classroom {
    /// Whether this page presents (an instructor's page, by its own choice).
    presenting: RwSignal<bool>,
    /// Whether this page follows the presentation: on by default for a viewer's page.
    following: RwSignal<bool>,
    /// The x axis and smoothing all chart blocks show; `None` until the chapter's first chart
    /// block sets it from its spec (each chapter starts from what its text asks for).
    pub charts: RwSignal<Option<ChartControls>>,
    /// The chapter whose blocks are on the page, once its text is rendered.
    rendered: RwSignal<Option<String>>,
    place: RwSignal<Place>,
    open_quiz: RwSignal<Option<u32>>,
    /// What this page would present now.
    here: Memo<Presentation>,
    outbox: StoredValue<Outbox>,
    /// What this page shows of the presentation in the chapter on screen, when following.
    shown: StoredValue<Option<Presentation>>,
    /// The presentation's charts as this page follows them, set once their runs stream.
    presented_view: RwSignal<Option<ChartView>>,
    /// Whether the first `welcome` has set the default of following.
    greeted: StoredValue<bool>,
    class_following: StoredValue<ClassFollowing>,
    runs: Runs,
    current: Signal<String>,
}

impl Classroom {
    /// The classroom of the page whose chapter is `current`, talking through `runs`.
    pub fn start(runs: Runs, current: Signal<String>) -> Classroom {
        let charts = RwSignal::new(None);
        let place = RwSignal::new(Place::default());
        let open_quiz = RwSignal::new(None);
        let here = Memo::new(move |_| {
            let chapter = current.get();
            let shown = runs.names.with(|names| runs.charted.with(|charted| names::named_in_chapter(charted, names, Some(&chapter))));
            model::presentation(&chapter, place.get(), open_quiz.get(), &shown, charts.get())
        });
        let classroom = Classroom {
            presenting: RwSignal::new(false),
            following: RwSignal::new(false),
            charts,
            rendered: RwSignal::new(None),
            place,
            open_quiz,
            here,
            outbox: StoredValue::new(Outbox::default()),
            shown: StoredValue::new(None),
            presented_view: RwSignal::new(None),
            greeted: StoredValue::new(false),
            class_following: StoredValue::new(ClassFollowing::default()),
            runs,
            current,
        };
        Effect::new(move |_| {
            if let Some(role) = runs.server.with(|info| info.as_ref().map(|info| info.role)) {
                untrack(|| classroom.welcomed(role));
            }
        });
        Effect::new(move |_| {
            let change = runs.class.with(|state| classroom.class_following.try_update_value(|rule| rule.changed(state)).flatten());
            // A presenting page does not follow, whatever class its server joined.
            if let Some(following) = change.filter(|on| !(*on && classroom.presenting.get_untracked())) {
                untrack(|| classroom.set_following(following));
            }
        });
        Effect::new(move |_| {
            here.track();
            if classroom.presenting.get() {
                untrack(|| classroom.schedule());
            }
        });
        Effect::new(move |_| {
            let presented = runs.presentation.get();
            if classroom.following.get() {
                let rendered = classroom.rendered.get();
                untrack(|| classroom.follow(presented, rendered));
            }
        });
        // Scroll events come at most once a frame, and only a presenting page measures.
        let _ = window_event_listener(ev::scroll, move |_| {
            if classroom.presenting.get_untracked() {
                classroom.track_place();
            }
        });
        classroom
    }

    /// Presents this page, or stops. A presenting page does not follow.
    pub fn set_presenting(self, on: bool) {
        self.presenting.set(on);
        if let Some(storage) = session_storage() {
            let _ = if on { storage.set_item(PRESENTING_KEY, "1") } else { storage.remove_item(PRESENTING_KEY) };
        }
        if on {
            if self.following.get_untracked() {
                self.set_following(false);
            }
            self.outbox.update_value(Outbox::forget);
            self.track_place();
        } else {
            self.runs.send(&ClientMessage::StopPresenting);
        }
    }

    /// Follows the presentation (going where it is now: catching up), or breaks away.
    pub fn set_following(self, on: bool) {
        self.shown.set_value(None);
        self.presented_view.set(None);
        self.following.set(on);
        self.runs.send(&ClientMessage::Follow { following: on });
    }

    /// The run the presentation charts last, while this page follows it (reactive): what a
    /// following page's run block shows, as the instructor's does.
    pub fn presented_run(self) -> Option<RunId> {
        if !self.following.get() || self.presenting.get() {
            return None;
        }
        self.runs.presentation.with(|presented| presented.as_ref().and_then(|p| p.charts.runs.last().cloned()))
    }

    /// What the presentation charts, while this page follows it (reactive): a following page's
    /// charts show these runs, named as the presenter names them, instead of the learner's own
    /// (which come back, untouched, when it stops following).
    pub fn presented_charts(self) -> Option<ChartView> {
        if !self.following.get() || self.presenting.get() {
            return None;
        }
        self.presented_view.get()
    }

    /// Whether this page shows something else than the presentation (see [`model::differs`]).
    pub fn differs(self) -> bool {
        let chapter = self.current.get();
        let shown = match self.presented_charts() {
            Some(view) => view.runs,
            None => self.runs.names.with(|names| self.runs.charted.with(|charted| names::in_chapter(charted, names, Some(&chapter)))),
        };
        self.runs.presentation.with(|presented| presented.as_ref().is_some_and(|p| model::differs(p, &chapter, &shown, self.charts.get())))
    }

    /// The learner went to `chapter` (a hash change): leaving the presented chapter by hand
    /// breaks away, as a learner who clicks elsewhere expects.
    pub fn navigated(self, chapter: &str) {
        let away = self.runs.presentation.with_untracked(|p| model::breaks_away(self.following.get_untracked(), p.as_ref(), chapter));
        if away {
            self.set_following(false);
        }
    }

    /// Whether the presentation puts this page in `chapter` (it follows one presented there):
    /// then the classroom, not the chapter page, sets where the page is scrolled to.
    pub fn places(self, chapter: &str) -> bool {
        self.following.get_untracked()
            && !self.presenting.get_untracked()
            && self.runs.presentation.with_untracked(|p| p.as_ref().is_some_and(|p| p.chapter == chapter))
    }

    /// A chapter page is starting: nothing of it is in view or open yet, and its chart blocks
    /// start from their own spec.
    pub fn chapter_opened(self) {
        self.rendered.set(None);
        self.place.set(Place::default());
        self.open_quiz.set(None);
        self.charts.set(None);
        self.shown.set_value(None);
    }

    /// The chapter's text and blocks are on the page.
    pub fn chapter_rendered(self, chapter: &str) {
        self.rendered.set(Some(chapter.to_owned()));
        if self.presenting.get_untracked() {
            self.track_place();
        }
    }

    /// A quiz's answer (in the block holding `quiz`) was opened or closed.
    pub fn quiz_toggled(self, quiz: &web_sys::Element, open: bool) {
        let Some(position) = dom::position_of(quiz) else { return };
        let current = self.open_quiz.get_untracked();
        if open && current != Some(position) {
            self.open_quiz.set(Some(position));
        } else if !open && current == Some(position) {
            self.open_quiz.set(None);
        }
    }

    /// After every `welcome` (a new connection): a viewer's page follows by default, and the
    /// server, which counts followers per connection, hears it again; a presenting page
    /// presents again in full, and so does an instructor's tab that presented before a reload.
    fn welcomed(self, role: Role) {
        if !self.greeted.get_value() {
            self.greeted.set_value(true);
            // Following may already be on: the class this server joined said so first.
            if role == Role::Viewer {
                self.following.set(true);
            }
            let presented_before = session_storage().and_then(|s| s.get_item(PRESENTING_KEY).ok().flatten()).is_some();
            if role == Role::Instructor && presented_before {
                self.set_presenting(true);
            }
        }
        if self.following.get_untracked() {
            self.runs.send(&ClientMessage::Follow { following: true });
        }
        if self.presenting.get_untracked() {
            self.outbox.update_value(Outbox::forget);
            self.schedule();
        }
    }

    fn schedule(self) {
        match self.outbox.try_update_value(|outbox| outbox.changed(js_sys::Date::now())) {
            Some(Dispatch::Now) => self.flush(),
            Some(Dispatch::After(ms)) => set_timeout(move || self.flush(), Duration::from_millis(ms.ceil() as u64)),
            Some(Dispatch::Due) | None => {}
        }
    }

    /// Sends where the page is now, if it changed and can be presented (a page on an
    /// unknown chapter has nowhere to take the room).
    fn flush(self) {
        let here = self.here.try_get_untracked().filter(|here| self.presenting.get_untracked() && here.problems().is_empty());
        if let Some(presentation) = self.outbox.try_update_value(|outbox| outbox.flush(here, js_sys::Date::now())).flatten() {
            self.runs.send(&ClientMessage::Present { presentation });
        }
    }

    fn track_place(self) {
        let place = dom::place();
        if place != self.place.get_untracked() {
            self.place.set(place);
        }
    }

    /// Goes where `presented` is: its charted runs streaming at once (the charts show them,
    /// [`Classroom::presented_charts`]), then the chapter, then (once that chapter is
    /// `rendered`) whatever changed in it.
    fn follow(self, presented: Option<Presentation>, rendered: Option<String>) {
        let Some(presented) = presented else {
            self.presented_view.set(None);
            return;
        };
        if self.presented_view.with_untracked(|view| view.as_ref() != Some(&presented.charts)) {
            for id in &presented.charts.runs {
                self.runs.watch(id);
            }
            self.presented_view.set(Some(presented.charts.clone()));
        }
        if self.current.get_untracked() != presented.chapter {
            routing::navigate(&presented.chapter);
            return;
        }
        if rendered.as_deref() != Some(presented.chapter.as_str()) {
            return;
        }
        let steps = self.shown.with_value(|shown| model::steps(shown.as_ref(), &presented));
        if let Some(controls) = steps.charts {
            self.charts.set(Some(controls));
        }
        if let Some(quiz) = steps.close_quiz {
            dom::set_answer_open(quiz, false);
        }
        if let Some(quiz) = steps.open_quiz {
            dom::set_answer_open(quiz, true);
        }
        if let Some(target) = steps.scroll_to {
            dom::scroll_to(target);
        }
        // The presenter's window may show more below its place than this one does.
        if let Some(quiz) = steps.open_quiz {
            dom::reveal_answer(quiz);
        }
        self.shown.set_value(Some(presented));
    }
}
