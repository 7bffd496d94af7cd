//! A large profile drawn from excerpts of its traces (`shared`'s `ExcerptOf`), never from the
//! whole files: first every rank's whole trace at the drawing's width, then, once the window
//! settles after a zoom or a pan, that window in detail beside the rest. The excerpts of one
//! trace share its first and last instants, so the window stays where it is as one replaces
//! another.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use leptos::prelude::*;
use scalebook_shared::profile::trace::{EXCERPT_PIXELS, Timeline, Trace, Window};
use scalebook_shared::protocol::RunId;

use super::timeline_state::Shown;
use super::timeline_view::TimelineView;
use crate::net::{fetch, urls};

/// How long the window must stay still before its detail is asked for.
const SETTLE: Duration = Duration::from_millis(250);
/// A window this close to the whole trace is drawn from the whole trace's excerpt.
const NEAR_WHOLE: f64 = 0.95;

/// Where a run's excerpts come from: its ranks' traces on the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Excerpts {
    pub run: RunId,
    pub ranks: Vec<usize>,
}

impl Excerpts {
    /// Every rank's whole trace at the drawing's width; the ranks whose excerpt did not load,
    /// with the reason.
    pub async fn whole(&self) -> (Vec<(usize, Trace)>, Vec<String>) {
        self.fetch(|_| None).await
    }

    /// The timeline of every rank with `window` (on `timeline`'s clock) in detail.
    async fn around(&self, timeline: &Timeline, window: Window) -> Result<Timeline, String> {
        let (traces, broken) = self.fetch(|rank| Some(timeline.file_window(rank, window))).await;
        match broken.first() {
            Some(why) => Err(why.clone()),
            None => Ok(Timeline::new(traces)),
        }
    }

    async fn fetch(&self, window_of: impl Fn(usize) -> Option<Window>) -> (Vec<(usize, Trace)>, Vec<String>) {
        let asked = self.ranks.iter().map(|&rank| {
            let window = window_of(rank).map(|w| format!("&start={}&end={}", w.start, w.end)).unwrap_or_default();
            let url = urls::api(&format!("runs/{}/profile/{rank}?px={EXCERPT_PIXELS}{window}", self.run));
            async move { (rank, fetch::text(&url).await.and_then(|text| Trace::parse(&text).map_err(|e| e.to_string()))) }
        });
        let (mut traces, mut broken) = (Vec::new(), Vec::new());
        for (rank, read) in join_all(asked).await {
            match read {
                Ok(trace) => traces.push((rank, trace)),
                Err(why) => broken.push(format!("rank {rank}: {why}")),
            }
        }
        (traces, broken)
    }
}

/// What the drawing holds now.
#[derive(Debug, Clone, PartialEq)]
enum Detail {
    Whole,
    Loading,
    Window,
    Failed(String),
}

/// The timeline of `coarse` (every rank's whole trace at the drawing's width), with the
/// window's detail fetched whenever the window settles.
#[component]
pub fn ExcerptedTimeline(coarse: Arc<Timeline>, excerpts: Excerpts) -> impl IntoView {
    let shown = Shown::whole(&coarse);
    let current = RwSignal::new(coarse.clone());
    let detail = RwSignal::new(Detail::Whole);
    // Each change of the window outdates the fetches before it.
    let asked = StoredValue::new(0u64);
    Effect::new(move |_| {
        let window = shown.window.get();
        asked.update_value(|n| *n += 1);
        let this = asked.get_value();
        let (coarse, excerpts) = (coarse.clone(), excerpts.clone());
        set_timeout(
            move || {
                if asked.get_value() != this {
                    return;
                }
                if window.width() >= shown.bounds.width() * NEAR_WHOLE {
                    if detail.get_untracked() != Detail::Whole {
                        current.set(coarse);
                        detail.set(Detail::Whole);
                    }
                    return;
                }
                detail.set(Detail::Loading);
                leptos::task::spawn_local(async move {
                    let fetched = excerpts.around(&coarse, window).await;
                    if asked.get_value() != this {
                        return;
                    }
                    match fetched {
                        Ok(timeline) => {
                            current.set(Arc::new(timeline));
                            detail.set(Detail::Window);
                        }
                        Err(why) => detail.set(Detail::Failed(why)),
                    }
                });
            },
            SETTLE,
        );
    });
    let state = move || match detail.get() {
        Detail::Whole => "whole",
        Detail::Loading => "loading",
        Detail::Window => "window",
        Detail::Failed(_) => "failed",
    };
    let said = move || match detail.get() {
        Detail::Whole => "The whole trace, what a pixel cannot show merged; zoom in for the detail.".to_owned(),
        Detail::Loading => "Loading the window's detail…".to_owned(),
        Detail::Window => "The window in full detail, the rest of the trace merged.".to_owned(),
        Detail::Failed(why) => format!("The window's detail did not load ({why}); zoom or pan to ask again."),
    };
    view! {
        <p class="muted excerpt" data-state=state aria-live="polite">{said}</p>
        {move || view! { <TimelineView timeline=current.get() shown /> }}
    }
}
