//! The timeline block: the step profile of a run (the one its `run=` names, else the latest
//! run whose config sets `profile` of this page's own or the instructor's: never another
//! learner's, which nobody here asked to download). The server's summary comes first (each
//! rank's steps by range, overlap, stragglers, top ops); then every rank's trace, drawn as lanes
//! with the ranges on top: small traces whole, with their ops tabulated; large ones (a long
//! profile is hundreds of MB) from excerpts the server reads for the window shown, never
//! downloaded whole. A run still training is loaded again when its state changes, and the
//! reload button asks at any time.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::trace::{ProfileSummary, Trace, TraceList};
use scalebook_shared::protocol::{RunId, RunRecord};

use super::timeline_drawn::Drawn;
use super::timeline_excerpt::Excerpts;
use super::timeline_summary::SummaryView;
use crate::ids::unique_id;
use crate::net::ws::ConnectionState;
use crate::net::{fetch, urls};
use crate::runs::{Runs, Whose};

/// What to do when there is nothing to draw.
fn how_to_profile() -> impl IntoView {
    view! { "set " <code>"profile: 5:8"</code> " in the config (steps 5 to 7) and run again." }
}

/// Traces larger than this together are drawn from excerpts, not downloaded.
const DOWNLOADED_BYTES: u64 = 16 << 20;

/// A profile loaded and ready to show.
struct Profile {
    summary: ProfileSummary,
    drawn: Drawn,
    bytes: u64,
    /// The ranks whose trace did not load, with the reason.
    broken: Vec<String>,
}

/// The steps a run's config asks to profile, if any.
fn profile_of(record: &RunRecord) -> Option<String> {
    let profile = record.effective.get("profile")?.as_str()?.trim();
    (!profile.is_empty()).then(|| profile.to_owned())
}

#[component]
pub fn TimelineBlock(run: Option<RunId>) -> impl IntoView {
    let runs = expect_context::<Runs>();
    // The run chosen here; `None` follows the latest run with a profile.
    let picked = RwSignal::new(run);
    let reloads = RwSignal::new(0u32);
    let profiled = Memo::new(move |_| {
        runs.records.with(|records| records.iter().rev().filter_map(|r| Some((r.clone(), profile_of(r)?))).collect::<Vec<_>>())
    });
    let followed = move |r: &RunRecord| runs.whose(r) != Whose::Learner;
    let chosen =
        Memo::new(move |_| picked.get().or_else(|| profiled.with(|p| p.iter().find(|(r, _)| followed(r)).map(|(r, _)| r.id.clone()))));
    let record = Memo::new(move |_| chosen.get().and_then(|id| runs.record(&id)));
    // Loaded again when the run, its state or the reload count changes.
    let target = Memo::new(move |_| chosen.get().map(|id| (id, record.with(|r| r.as_ref().map(|r| r.state())), reloads.get())));
    let loaded = LocalResource::new(move || {
        let target = target.get();
        async move {
            match target {
                Some((id, ..)) => load(&id).await.map(|p| p.map(Arc::new)),
                None => Ok(None),
            }
        }
    });

    let state = move || match (chosen.get(), loaded.get()) {
        (None, _) => "none",
        (_, None) => "loading",
        (_, Some(Err(_))) => "failed",
        (_, Some(Ok(Some(_)))) => "ready",
        (_, Some(Ok(None))) if record.with(|r| r.as_ref().is_some_and(|r| !r.state().is_final())) => "waiting",
        (_, Some(Ok(None))) => "missing",
    };
    let select_id = unique_id("timeline-run");
    view! {
        <section class="block timeline" aria-label="Step timeline" data-state=state data-run=move || chosen.get().map(|id| id.to_string())>
            <div class="toolbar">
                <label for=select_id.clone()>"run"</label>
                <select id=select_id class="timeline-run" on:change=move |ev| {
                    let value = event_target_value(&ev);
                    picked.set(RunId::parse(&value).ok());
                }>
                    <option value="" selected=move || picked.get().is_none()>"the latest run with a profile (yours or the instructor's)"</option>
                    {move || profiled.get().into_iter().map(|(r, steps)| {
                        let id = r.id.to_string();
                        let selected = picked.get().as_ref() == Some(&r.id);
                        let text = format!("{id}: {}, {} rank(s), steps {steps} ({})", r.config, r.layout.world(), r.state());
                        view! { <option value=id selected=selected>{text}</option> }
                    }).collect_view()}
                </select>
                <button type="button" class="reload" on:click=move |_| reloads.update(|n| *n += 1)>"reload"</button>
            </div>
            {move || match (chosen.get(), loaded.get()) {
                (None, _) if runs.records.with(Vec::is_empty) && runs.connection.get() != ConnectionState::Open => {
                    view! { <p class="muted">"Waiting for the server's list of runs…"</p> }.into_any()
                }
                (None, _) => view! { <p class="message">"No run here has a profile yet: " {how_to_profile()}</p> }.into_any(),
                (Some(id), None) => view! { <p class="muted">{format!("Loading the profile of run {id}…")}</p> }.into_any(),
                (Some(_), Some(Err(message))) => view! { <p class="error" role="alert">{message}</p> }.into_any(),
                (Some(id), Some(Ok(None))) => missing(&id, record.get().as_ref()).into_any(),
                (Some(id), Some(Ok(Some(profile)))) => drawn(&id, record.get().as_ref(), &profile).into_any(),
            }}
        </section>
    }
}

/// Why run `id` shows no timeline, and what to do.
fn missing(id: &RunId, record: Option<&RunRecord>) -> impl IntoView + use<> {
    let text = match record.map(|r| (r.state(), profile_of(r))) {
        Some((state, Some(steps))) if !state.is_final() => {
            return view! {
                <p class="message">{format!("Run {id} is {state}: its trace appears here once steps {steps} are done (the reload button looks again).")}</p>
            }
            .into_any();
        }
        Some((state, Some(steps))) => format!("Run {id} ended ({state}) without writing the trace of steps {steps}: "),
        _ => format!("Run {id} has no profile: "),
    };
    view! { <p class="message">{text} {how_to_profile()}</p> }.into_any()
}

/// The summary, then the drawing (and the table of ops of whole traces), with a line saying
/// what was loaded.
fn drawn(id: &RunId, record: Option<&RunRecord>, profile: &Profile) -> impl IntoView + use<> {
    let ranks = profile.summary.ranks.len();
    let steps = record.and_then(profile_of).map(|s| format!(", steps {s}")).unwrap_or_default();
    let megabytes = profile.bytes as f64 / 1e6;
    let events: u64 = profile.summary.ranks.iter().map(|r| r.events).sum();
    let summary = format!("Run {id}{steps}: {ranks} rank(s), {events} events ({megabytes:.1} MB of trace).");
    let broken = (!profile.broken.is_empty()).then(|| {
        view! { <p class="error" role="alert">{format!("Some traces did not load: {}", profile.broken.join("; "))}</p> }
    });
    view! {
        <p class="muted summary">{summary}</p>
        <SummaryView summary=profile.summary.clone() />
        {broken}
        {profile.drawn.view()}
    }
}

/// Run `id`'s profile: `None` when it has none (yet). Its summary, and its traces: whole when
/// they are small, else excerpts (see [`Excerpts`]). A rank whose trace does not load is named
/// in the profile; only when none loads is the whole load an error.
async fn load(id: &RunId) -> Result<Option<Profile>, String> {
    let list = fetch::text(&urls::api(&format!("runs/{id}/profile"))).await?;
    let list: TraceList = serde_json::from_str(&list).map_err(|e| format!("the server's list of traces does not parse: {e}"))?;
    if list.traces.is_empty() {
        return Ok(None);
    }
    let summary = fetch::text(&urls::api(&format!("runs/{id}/profile/summary"))).await?;
    let summary: ProfileSummary = serde_json::from_str(&summary).map_err(|e| format!("the server's summary does not parse: {e}"))?;
    let bytes = list.traces.iter().map(|t| t.bytes).sum();
    let (traces, broken, excerpts) = if bytes > DOWNLOADED_BYTES {
        let excerpts = Excerpts { run: id.clone(), ranks: list.traces.iter().map(|t| t.rank).collect() };
        let (traces, broken) = excerpts.whole().await;
        (traces, broken, Some(excerpts))
    } else {
        let (traces, broken) = whole_traces(id, &list).await;
        (traces, broken, None)
    };
    if traces.is_empty() {
        return Err(format!("No trace of run {id} loaded: {}", broken.join("; ")));
    }
    let drawn = match excerpts {
        Some(excerpts) => Drawn::excerpted(traces, excerpts),
        None => Drawn::new(traces),
    };
    Ok(Some(Profile { summary, drawn, bytes, broken }))
}

/// Every rank's whole trace; the ranks whose trace did not load, with the reason.
async fn whole_traces(id: &RunId, list: &TraceList) -> (Vec<(usize, Trace)>, Vec<String>) {
    let (mut traces, mut broken) = (Vec::new(), Vec::new());
    for entry in &list.traces {
        let text = fetch::text(&urls::api(&format!("runs/{id}/profile/{}", entry.rank))).await;
        match text.and_then(|text| Trace::parse(&text).map_err(|e| e.to_string())) {
            Ok(trace) => traces.push((entry.rank, trace)),
            Err(message) => broken.push(format!("rank {}: {message}", entry.rank)),
        }
    }
    (traces, broken)
}
