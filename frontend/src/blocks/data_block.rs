//! The data block: any channel of any sample of a config's training or validation set, drawn
//! by the server from the HDF5 files (`api/data/sample`, one channel of one time step per
//! request), with its colour legend and units and, beside it, the weight each latitude row has
//! in the metric. The last picture stays up while the next one loads, so scrubbing through
//! samples does not flicker.

use leptos::prelude::*;
use scalebook_shared::weather::{CHANNELS, Palette};
use serde::Deserialize;

use super::data_fetch::fetch_json;
use super::data_latitude::LatitudeWeights;
use super::maps_legend::ColourLegend;
use crate::ids::unique_id;
use crate::library::{Library, Ready};
use crate::net::urls;

pub use scalebook_page::blocks::spec::SETS;

/// What `api/data/sample` answers (the server's `SampleView`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Sample {
    config: String,
    set: String,
    index: usize,
    samples: usize,
    used: usize,
    file: String,
    step: usize,
    channel: String,
    title: String,
    units: String,
    height: usize,
    width: usize,
    range: [f32; 2],
    latitude_weights: Vec<f32>,
    png: String,
}

/// The sample the controls ask for.
#[derive(Debug, Clone, PartialEq)]
struct Choice {
    config: String,
    set: &'static str,
    index: usize,
    channel: &'static str,
}

impl Choice {
    fn url(&self) -> String {
        let config = String::from(js_sys::encode_uri_component(&self.config));
        urls::api(&format!("data/sample?config={config}&set={}&index={}&channel={}", self.set, self.index, self.channel))
    }
}

#[component]
pub fn DataBlock(config: String, set: &'static str, index: usize, channel: &'static str) -> impl IntoView {
    let library = expect_context::<Library>();
    let choice = RwSignal::new(Choice { config, set, index, channel });
    // Each answer carries the choice it answers; one to a choice since changed is dropped (a
    // newer request is on its way), so a slow answer never passes for a newer one.
    let answer = RwSignal::new(None::<(Choice, Result<Sample, String>)>);
    Effect::new(move |_| {
        let asked = choice.get();
        fetch_json(asked.url(), move |result| {
            if choice.try_with_untracked(|c| *c == asked) == Some(true) {
                answer.try_set(Some((asked, result)));
            }
        });
    });
    let shown = RwSignal::new(None::<Sample>);
    Effect::new(move |_| {
        if let Some((_, Ok(sample))) = answer.get() {
            shown.set(Some(sample));
        }
    });
    let state = move || match answer.get() {
        Some((asked, result)) if asked == choice.get() => match result {
            Ok(_) => ("ready", None),
            Err(message) => ("error", Some(message)),
        },
        _ => ("loading", None),
    };
    let config_name = Memo::new(move |_| choice.with(|c| c.config.clone()));
    let config_names = move || library.configs.ready().map(|file| file.names().map(str::to_owned).collect::<Vec<_>>()).unwrap_or_default();
    let last_index = move || shown.with(|s| s.as_ref().map_or(0, |s| s.samples.saturating_sub(1)));
    let pick_index = move |text: String| {
        if let Ok(index) = text.trim().parse::<usize>() {
            choice.update(|c| c.index = index);
        }
    };
    let (config_id, set_id, index_id, channel_id) =
        (unique_id("data-config"), unique_id("data-set"), unique_id("data-index"), unique_id("data-channel"));

    view! {
        <section class="block data-block" aria-label="A sample of the data" data-state=move || state().0>
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="data-config" on:change=move |ev| {
                    let config = event_target_value(&ev);
                    choice.update(|c| { c.config = config; c.index = 0; });
                }>
                    {move || {
                        let current = config_name.get();
                        let mut names = config_names();
                        if !names.contains(&current) { names.insert(0, current.clone()); }
                        names.into_iter().map(|n| view! { <option value=n.clone() selected=n == current>{n.clone()}</option> }).collect_view()
                    }}
                </select>
                <label for=set_id.clone()>"set"</label>
                <select id=set_id class="data-set" on:change=move |ev| {
                    let picked = event_target_value(&ev);
                    if let Some(set) = SETS.into_iter().find(|s| *s == picked) { choice.update(|c| { c.set = set; c.index = 0; }); }
                }>
                    {SETS.map(|s| view! { <option value=s selected=move || choice.with(|c| c.set == s)>{s}</option> })}
                </select>
                <label for=index_id.clone()>"sample"</label>
                <input id=index_id class="data-index" type="number" min="0" max=last_index step="1"
                    prop:value=move || choice.with(|c| c.index.to_string())
                    on:input=move |ev| pick_index(event_target_value(&ev)) />
                <input class="data-slider" type="range" min="0" max=last_index step="1" aria-label="sample"
                    prop:value=move || choice.with(|c| c.index.to_string())
                    on:input=move |ev| pick_index(event_target_value(&ev)) />
                <label for=channel_id.clone()>"channel"</label>
                <select id=channel_id class="data-channel" on:change=move |ev| {
                    let picked = event_target_value(&ev);
                    if let Some(c) = CHANNELS.iter().find(|c| c.name == picked) { choice.update(|choice| choice.channel = c.name); }
                }>
                    {CHANNELS.map(|c| view! {
                        <option value=c.name selected=move || choice.with(|choice| choice.channel == c.name)>{format!("{} — {} ({})", c.name, c.title, c.units)}</option>
                    })}
                </select>
            </div>
            {move || shown.get().map(|s| view! { <SampleView sample=s stale=Signal::derive(move || state().0 != "ready") /> })}
            {move || match state() {
                ("loading", _) => view! { <p class="muted status">"Loading the sample…"</p> }.into_any(),
                (_, Some(message)) => view! { <p class="error" role="alert">{message}</p> }.into_any(),
                _ => ().into_any(),
            }}
        </section>
    }
}

/// The picture with its legend, the latitude weights beside it and where the sample lies.
#[component]
fn SampleView(sample: Sample, stale: Signal<bool>) -> impl IntoView {
    let alt = format!(
        "{} ({}) of sample {} of the {} set, {} × {} grid",
        sample.title, sample.channel, sample.index, sample.set, sample.height, sample.width
    );
    let whereabouts = format!(
        "Sample {} of {} in the {} set: {}, time step {}; {} reads the first {} of them.",
        sample.index, sample.samples, sample.set, sample.file, sample.step, sample.config, sample.used
    );
    view! {
        <div class="data-view" class:stale=stale>
            <img class="data-image map-image" src=sample.png alt=alt width=sample.width height=sample.height
                data-channel=sample.channel.clone() data-index=sample.index />
            <LatitudeWeights weights=sample.latitude_weights />
        </div>
        <ColourLegend palette=Palette::Sequential range=sample.range units=sample.units label=format!("{} ({})", sample.title, sample.channel) />
        <p class="muted where">{whereabouts}</p>
    }
}
