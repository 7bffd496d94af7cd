//! The maps block: a run's weather maps epoch by epoch, as its trainer draws them after every
//! epoch (one validation sample's input, target, prediction and error; `shared::weather::maps`),
//! with a slider over the epochs, a switch between the mapped channels, and a legend for each
//! colour scale. While the run trains the block asks for the list again every few seconds and
//! follows the newest epoch, unless the learner has moved the slider back to an older one.
//! Once the run has ended, the forecast its trainer rolled out shows below ([`RolloutView`]).

use leptos::prelude::*;
use scalebook_page::blocks::maps_model::{Message, describe, panel_title};
use scalebook_shared::protocol::RunId;
use scalebook_shared::weather::{CHANNELS, Palette, channel_index};

use super::maps_legend::ColourLegend;
use super::maps_rollout::RolloutView;
use super::maps_state::MapsState;
use crate::ids::unique_id;
use crate::net::object_url::Picture;

#[component]
pub fn MapsBlock(run: Option<RunId>) -> impl IntoView {
    let state = MapsState::new(run);
    let MapsState { runs, picked, run, channel, channels, epochs, epoch, entry, picture, .. } = state;
    let run_id = unique_id("maps-run");
    let epoch_id = unique_id("maps-epoch");

    view! {
        <section class="block maps-block" aria-label="Weather maps of a run" data-run=move || run.get().map(|id| id.to_string()).unwrap_or_default()>
            <div class="toolbar">
                <label for=run_id.clone()>"run"</label>
                <select id=run_id class="maps-run" on:change=move |ev| picked.set(RunId::parse(&event_target_value(&ev)).ok())>
                    <option value="" selected=move || picked.with(Option::is_none)>"the newest run"</option>
                    {move || {
                        let records = runs.records.get();
                        records.iter().rev().map(|r| {
                            let id = r.id.clone();
                            let label = format!("{} ({}, {})", r.id, r.config, r.state().label());
                            view! { <option value=id.to_string() selected=move || picked.with(|p| p.as_ref() == Some(&id))>{label}</option> }
                        }).collect_view()
                    }}
                </select>
                <span class="maps-channels" role="group" aria-label="channel">
                    {move || channels.get().into_iter().map(|name| {
                        let title = channel_index(&name).map(|i| CHANNELS[i].title).unwrap_or_default();
                        let pressed = { let name = name.clone(); move || channel.with(|c| *c == name) };
                        let (pick, key) = (name.clone(), name.clone());
                        view! {
                            <button type="button" class="maps-channel" data-channel=key title=title
                                aria-pressed=move || pressed().to_string() on:click=move |_| channel.set(pick.clone())>{name}</button>
                        }
                    }).collect_view()}
                </span>
                <label for=epoch_id.clone()>"epoch"</label>
                <input id=epoch_id class="maps-epoch" type="range" min="0" step="1"
                    max=move || epochs.with(|e| e.len().saturating_sub(1))
                    disabled=move || epochs.with(|e| e.len() < 2)
                    prop:value=move || state.position().to_string()
                    on:input=move |ev| state.slide(event_target_value(&ev)) />
                <output class="maps-epoch-label">{move || epoch.get().map(|e| format!("epoch {e} of {}", epochs.with(Vec::len))).unwrap_or_default()}</output>
            </div>
            <figure class="maps-figure" hidden=move || entry.with(Option::is_none)>
                <div class="maps-panels">
                    {move || entry.get().map(|e| e.panels.iter().map(|p| view! { <span>{panel_title(p)}</span> }).collect_view())}
                </div>
                // The attributes describe the picture on screen, which may still be the previous
                // one while the next loads.
                <img class="maps-image map-image"
                    src=move || picture.with(|p| p.as_ref().and_then(Picture::object_url))
                    alt=move || picture.with(|p| p.as_ref().map(|p| describe(&p.of)))
                    data-epoch=move || picture.with(|p| p.as_ref().map(|p| p.of.epoch.to_string()).unwrap_or_default())
                    data-channel=move || picture.with(|p| p.as_ref().map(|p| p.of.channel.clone()).unwrap_or_default()) />
                <figcaption>{move || entry.get().map(|e| describe(&e))}</figcaption>
                {move || entry.get().map(|e| view! {
                    <ColourLegend palette=Palette::Sequential range=e.range units=e.units.clone() label="input, target, prediction".to_owned() />
                    <ColourLegend palette=Palette::Diverging range=e.error_range units=e.units label="error".to_owned() />
                })}
            </figure>
            <RolloutView state />
            {move || state.message().map(|message| match message {
                Message::Error(text) => view! { <p class="error" role="alert">{text}</p> }.into_any(),
                Message::Status(text) => view! { <p class="muted status">{text}</p> }.into_any(),
            })}
        </section>
    }
}
