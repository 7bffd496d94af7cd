//! Traces made ready to show, whoever loaded them (a run's ranks from the server, a recorded
//! run from the static files): every rank's timeline, the ops table, and the two drawn.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::trace::{OpsTable, Timeline, Trace};

use super::timeline_excerpt::{ExcerptedTimeline, Excerpts};
use super::timeline_ops::OpsTableView;
use super::timeline_state::Shown;
use super::timeline_view::TimelineView;

pub struct Drawn {
    timeline: Arc<Timeline>,
    source: Source,
    /// Events over every rank, for the line that says what was loaded.
    pub events: usize,
}

/// Where the drawing's detail comes from.
enum Source {
    /// The whole traces, tabulated by op too.
    Whole(Arc<OpsTable>),
    Excerpts(Excerpts),
}

impl Drawn {
    /// Whole traces, drawn with the table of their ops.
    pub fn new(traces: Vec<(usize, Trace)>) -> Drawn {
        Drawn::of(traces, None)
    }

    /// Excerpts of the whole traces (see [`Excerpts`]): drawn with their window's detail
    /// fetched as it changes; no ops table (merged events are not ops: the summary has them).
    pub fn excerpted(traces: Vec<(usize, Trace)>, excerpts: Excerpts) -> Drawn {
        Drawn::of(traces, Some(excerpts))
    }

    fn of(traces: Vec<(usize, Trace)>, excerpts: Option<Excerpts>) -> Drawn {
        let events = traces.iter().map(|(_, t)| t.len()).sum();
        let timeline = Timeline::new(traces);
        let source = match excerpts {
            Some(excerpts) => Source::Excerpts(excerpts),
            None => Source::Whole(Arc::new(OpsTable::new(&timeline))),
        };
        Drawn { timeline: Arc::new(timeline), source, events }
    }

    /// The timeline, then the table of its ops.
    pub fn view(&self) -> impl IntoView + use<> {
        let timeline = self.timeline.clone();
        match &self.source {
            Source::Excerpts(excerpts) => view! { <ExcerptedTimeline coarse=timeline excerpts=excerpts.clone() /> }.into_any(),
            Source::Whole(ops) => view! {
                <TimelineView shown=Shown::whole(&timeline) timeline />
                <OpsTableView ops=ops.clone() />
            }
            .into_any(),
        }
    }
}
