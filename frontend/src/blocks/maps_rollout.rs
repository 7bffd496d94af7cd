//! The maps block's forecast: once a run has ended, its model rolled out lead after lead
//! (`shared::weather::Rollout`): the error against lead time beside persistence's, and the map
//! of any lead, picked with a slider.

use leptos::prelude::*;
use scalebook_page::blocks::rollout_model::{HEIGHT, MARGIN, RolloutChart, WIDTH, describe_lead, polyline};

use super::maps_state::MapsState;
use crate::ids::unique_id;
use crate::net::object_url::Picture;

#[component]
pub fn RolloutView(state: MapsState) -> impl IntoView {
    let MapsState { rollout, lead, lead_entry, lead_picture, channel, .. } = state;
    let lead_id = unique_id("rollout-lead");
    let chart = Memo::new(move |_| rollout.with(|r| r.as_ref().and_then(|r| RolloutChart::of(r, &channel.get()))));
    view! {
        <div class="rollout" hidden=move || rollout.with(Option::is_none)>
            <h4>{move || rollout.with(|r| r.as_ref().map(|r| format!(
                "A forecast rolled out: the model of epoch {} applied to its own output, {} times", r.epoch, r.leads.len()
            )))}</h4>
            {move || chart.get().map(|c| view! {
                <svg class="rollout-chart" viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img"
                    aria-label=format!("RMSE of {} in {} against lead time, for the forecast and for persistence", channel.get(), c.units)>
                    {c.y_ticks.iter().map(|(y, label)| view! {
                        <line class="grid" x1=MARGIN x2=WIDTH - 12.0 y1=*y y2=*y />
                        <text class="tick" x=MARGIN - 6.0 y=*y + 4.0 text-anchor="end">{label.clone()}</text>
                    }).collect_view()}
                    {c.x_ticks.iter().map(|(x, label)| view! {
                        <text class="tick" x=*x y=HEIGHT - MARGIN + 24.0 text-anchor="middle">{format!("{label} h")}</text>
                    }).collect_view()}
                    <polyline class="persistence" points=polyline(&c.persistence) />
                    <polyline class="forecast" points=polyline(&c.model) />
                </svg>
                <p class="rollout-legend muted">
                    <span class="key forecast">"forecast"</span>" and "<span class="key persistence">"persistence"</span>
                    {format!(" (the weather stays as it is): latitude-weighted RMSE of {} in {}, averaged over the first validation samples", channel.get(), c.units)}
                </p>
            })}
            <label for=lead_id.clone()>"lead"</label>
            <input id=lead_id class="rollout-lead" type="range" min="0" step="1"
                max=move || rollout.with(|r| r.as_ref().map_or(0, |r| r.leads.len().saturating_sub(1)))
                prop:value=move || lead.get().to_string()
                on:input=move |ev| {
                    if let Ok(at) = event_target_value(&ev).parse::<usize>() {
                        lead.set(at);
                    }
                } />
            <output class="rollout-lead-label">{move || lead_entry.with(|e| e.as_ref().map(|(l, _)| format!("+{} h", l.hours)))}</output>
            <figure class="maps-figure">
                <div class="maps-panels"><span>"start"</span><span>"truth at this lead"</span><span>"forecast"</span><span>"error"</span></div>
                <img class="rollout-image"
                    src=move || lead_picture.with(|p| p.as_ref().and_then(Picture::object_url))
                    data-file=move || lead_picture.with(|p| p.as_ref().map(|p| p.of.file.clone()).unwrap_or_default()) />
                <figcaption>{move || {
                    let (lead, entry) = lead_entry.get()?;
                    rollout.with(|r| r.as_ref().map(|r| describe_lead(r, &lead, &entry)))
                }}</figcaption>
            </figure>
        </div>
    }
}
