//! The timeline of a recorded run: one the project keeps under `static/recorded/` because it
//! was made on hardware a learner may not have (a GPU), loaded as static files and labelled
//! with where it was measured.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::recorded::{self, Recording};
use scalebook_shared::profile::trace::Trace;
use scalebook_shared::profile::trace_file;

use super::timeline_drawn::Drawn;
use crate::net::{fetch, urls};

/// A recording loaded and ready to draw.
struct Loaded {
    about: Recording,
    drawn: Drawn,
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
                    let summary = format!("Recorded by {measured_by} on an {gpu}: {what} ({} events of rank 0).", r.drawn.events);
                    view! {
                        <p class="muted summary">{summary}</p>
                        {r.drawn.view()}
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
    Ok(Loaded { about, drawn: Drawn::new(vec![(0, trace)]) })
}
