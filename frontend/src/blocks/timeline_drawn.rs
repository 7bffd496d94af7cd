//! Traces made ready to show, whoever loaded them (a run's ranks from the server, a recorded
//! run from the static files): every rank's timeline, the ops table, and the two drawn.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::trace::{OpsTable, Timeline, Trace};

use super::timeline_ops::OpsTableView;
use super::timeline_view::TimelineView;

pub struct Drawn {
    timeline: Arc<Timeline>,
    ops: Arc<OpsTable>,
    /// Events over every rank, for the line that says what was loaded.
    pub events: usize,
}

impl Drawn {
    pub fn new(traces: Vec<(usize, Trace)>) -> Drawn {
        let events = traces.iter().map(|(_, t)| t.len()).sum();
        let timeline = Timeline::new(traces);
        let ops = OpsTable::new(&timeline);
        Drawn { timeline: Arc::new(timeline), ops: Arc::new(ops), events }
    }

    /// The timeline, then the table of its ops.
    pub fn view(&self) -> impl IntoView + use<> {
        view! {
            <TimelineView timeline=self.timeline.clone() />
            <OpsTableView ops=self.ops.clone() />
        }
    }
}
