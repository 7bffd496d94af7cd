//! The timeline of a recorded run: one the project keeps under `static/recorded/` because it
//! was made on hardware a learner may not have (a GPU), loaded as static files and labelled
//! with where it was measured.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::recorded::{self, Recording};
use scalebook_shared::profile::trace::{OpsTable, Timeline, Trace};
use scalebook_shared::profile::trace_file;

use super::timeline_ops::OpsTableView;
use super::timeline_view::TimelineView;
use crate::net::{fetch, urls};

/// A recording loaded and ready to draw.
struct Loaded {
    about: Recording,
    timeline: Arc<Timeline>,
    ops: Arc<OpsTable>,
    events: usize,
}

#[component]
pub fn RecordedTimeline(name: String) -> impl IntoView {
    let loaded = LocalResource::new({
        let name = name.clone();
        move || {
            let name = name.clone();
            async move { load(&name).await.map(Arc::new) }
        }
    });
    let state = move || match loaded.get() {
        None => "loading",
        Some(Err(_)) => "failed",
        Some(Ok(_)) => "ready",
    };
    view! {
        <section class="block timeline recorded" aria-label="Recorded step timeline" data-state=state data-recorded=name>
            {move || match loaded.get() {
                None => view! { <p class="muted">"Loading the recorded profile…"</p> }.into_any(),
                Some(Err(message)) => view! { <p class="error" role="alert">{message}</p> }.into_any(),
                Some(Ok(r)) => {
                    let Recording { gpu, what, measured_by } = &r.about;
                    let summary = format!("Recorded by {measured_by} on an {gpu}: {what} ({} events of rank 0).", r.events);
                    view! {
                        <p class="muted summary">{summary}</p>
                        <TimelineView timeline=r.timeline.clone() />
                        <OpsTableView ops=r.ops.clone() />
                    }
                    .into_any()
                }
            }}
        </section>
    }
}

async fn load(name: &str) -> Result<Loaded, String> {
    let about = fetch::text(&urls::resolve(&recorded::path(name, recorded::ABOUT_FILE))).await;
    let about: Recording = about
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        .map_err(|e| format!("The recorded run {name} did not load: {e}"))?;
    let trace = fetch::text(&urls::resolve(&recorded::path(name, &trace_file(0)))).await;
    let trace = trace
        .and_then(|text| Trace::parse(&text).map_err(|e| e.to_string()))
        .map_err(|e| format!("The trace of the recorded run {name} did not load: {e}"))?;
    let events = trace.len();
    let timeline = Timeline::new([(0, trace)]);
    let ops = OpsTable::new(&timeline);
    Ok(Loaded { about, timeline: Arc::new(timeline), ops: Arc::new(ops), events })
}
