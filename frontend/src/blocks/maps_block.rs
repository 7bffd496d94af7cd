//! The maps block: a run's weather maps epoch by epoch, as its trainer draws them after every
//! epoch (one validation sample's input, target, prediction and error; `shared::weather::maps`),
//! with a slider over the epochs, a switch between the mapped channels, and a legend for each
//! colour scale. While the run trains the block asks for the list again every few seconds and
//! follows the newest epoch, unless the learner has moved the slider back to an older one.

use std::time::Duration;

use leptos::prelude::*;
use scalebook_shared::protocol::{RunId, RunState};
use scalebook_shared::weather::{CHANNELS, ERROR_PANEL, MAPPED_CHANNELS, MapEntry, MapIndex, Palette, channel_index};

use super::data_fetch::fetch_json;
use super::maps_legend::ColourLegend;
use crate::ids::unique_id;
use crate::net::object_url::{Picture, api_picture};
use crate::net::urls;
use crate::runs::Runs;

/// How often a live run's list of maps is asked for again: an epoch of a CPU run takes
/// seconds to minutes, and a classroom of pages polling this often is still a trickle.
const POLL: Duration = Duration::from_secs(4);

#[component]
pub fn MapsBlock(run: Option<RunId>) -> impl IntoView {
    let runs = expect_context::<Runs>();
    // None follows the newest run (the one just launched on this page, else the server's newest).
    let picked = RwSignal::new(run);
    let run = Memo::new(move |_| picked.get().or_else(|| newest_run(runs)));
    let state = Memo::new(move |_| run.get().and_then(|id| runs.record(&id)).map(|r| r.state()));
    let tick = RwSignal::new(0u64);
    let poll = set_interval_with_handle(
        move || {
            if state.get_untracked().is_some_and(|s| !s.is_final()) {
                tick.update(|t| *t += 1)
            }
        },
        POLL,
    )
    .ok();
    on_cleanup(move || poll.iter().for_each(|handle| handle.clear()));
    // Asked again when the run changes state (its last maps are there once it has ended) and
    // on every poll while it trains; an answer about a run no longer shown is dropped.
    let answer = RwSignal::new(None::<(RunId, Result<MapIndex, String>)>);
    Effect::new(move |_| {
        let (id, _, _) = (run.get(), state.get(), tick.get());
        let Some(id) = id else { return };
        fetch_json(urls::api(&format!("runs/{id}/maps")), move |result| {
            if run.try_get_untracked().flatten().as_ref() == Some(&id) {
                answer.try_set(Some((id, result)));
            }
        });
    });
    let shown = RwSignal::new(None::<(RunId, MapIndex)>);
    Effect::new(move |_| {
        if let Some((id, Ok(index))) = answer.get()
            && shown.with_untracked(|s| s.as_ref().is_none_or(|(i, x)| *i != id || *x != index))
        {
            shown.set(Some((id, index)));
        }
    });
    let maps = Memo::new(move |_| {
        shown.with(|s| s.as_ref().filter(|(id, _)| Some(id) == run.get().as_ref()).map(|(_, index)| index.maps.clone()))
    });
    let channel = RwSignal::new(MAPPED_CHANNELS[0].to_owned());
    let chosen = RwSignal::new(None::<u64>);
    Effect::new(move |_| {
        run.track();
        chosen.set(None);
    });
    let channels = Memo::new(move |_| maps.with(|m| m.as_deref().map(channels_of).unwrap_or_default()));
    let epochs = Memo::new(move |_| maps.with(|m| m.as_deref().map(|m| epochs_of(m, &channel.get())).unwrap_or_default()));
    let epoch = Memo::new(move |_| epochs.with(|e| chosen.get().filter(|c| e.contains(c)).or(e.last().copied())));
    let entry = Memo::new(move |_| {
        let (epoch, channel) = (epoch.get()?, channel.get());
        maps.with(|m| m.as_ref()?.iter().find(|e| e.epoch == epoch && e.channel == channel).cloned())
    });
    let picture = api_picture(move || {
        let (entry, id) = entry.get().zip(run.get())?;
        let url = urls::api(&format!("runs/{id}/maps/{}", entry.file));
        Some((entry, url))
    });
    let position = move || epochs.with(|e| epoch.get().and_then(|x| e.iter().position(|y| *y == x)).unwrap_or(0));
    let slide = move |text: String| {
        let Ok(at) = text.parse::<usize>() else { return };
        epochs.with(|e| chosen.set(e.get(at).copied().filter(|_| at + 1 < e.len())));
    };
    let message = move || -> Option<(bool, String)> {
        let Some(id) = run.get() else {
            return Some((false, "No run yet: launch one, and its maps appear here after its first epoch.".into()));
        };
        if let Some((asked, Err(message))) = answer.get()
            && asked == id
        {
            return Some((true, message));
        }
        if let Some(message) = picture.with(|p| p.as_ref().and_then(|p| p.src.as_ref().err().cloned())) {
            return Some((true, message));
        }
        let ended = state.get().is_some_and(RunState::is_final);
        match maps.get() {
            None => Some((false, format!("Loading the maps of run {id}…"))),
            Some(m) if m.is_empty() && ended => Some((
                false,
                format!(
                    "Run {id} drew no maps (a run from before the trainer drew them, or one that stopped before its first epoch ended)."
                ),
            )),
            Some(m) if m.is_empty() => {
                Some((false, format!("Run {id} has drawn no maps yet: the trainer draws them after each epoch's validation.")))
            }
            Some(_) => None,
        }
    };
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
                    prop:value=move || position().to_string()
                    on:input=move |ev| slide(event_target_value(&ev)) />
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
            {move || message().map(|(error, text)| match error {
                true => view! { <p class="error" role="alert">{text}</p> }.into_any(),
                false => view! { <p class="muted status">{text}</p> }.into_any(),
            })}
        </section>
    }
}

/// The run a block without `run=ID` shows: the one this page charted last (what it just
/// launched), else the newest on the server.
fn newest_run(runs: Runs) -> Option<RunId> {
    runs.charted.with(|c| c.last().cloned()).or_else(|| runs.records.with(|r| r.last().map(|r| r.id.clone())))
}

/// The channels drawn, the trainer's own first.
fn channels_of(maps: &[MapEntry]) -> Vec<String> {
    let mut names: Vec<String> =
        MAPPED_CHANNELS.iter().filter(|c| maps.iter().any(|m| m.channel == **c)).map(|c| (*c).to_owned()).collect();
    for m in maps {
        if !names.contains(&m.channel) {
            names.push(m.channel.clone());
        }
    }
    names
}

/// The epochs with a map of `channel`, oldest first.
fn epochs_of(maps: &[MapEntry], channel: &str) -> Vec<u64> {
    let mut epochs: Vec<u64> = maps.iter().filter(|m| m.channel == channel).map(|m| m.epoch).collect();
    epochs.sort_unstable();
    epochs.dedup();
    epochs
}

fn panel_title(panel: &str) -> String {
    match panel {
        "input" => "input (now)".into(),
        "target" => "target (dt later)".into(),
        "prediction" => "prediction".into(),
        p if p == ERROR_PANEL => "error (prediction − target)".into(),
        other => other.to_owned(),
    }
}

fn describe(entry: &MapEntry) -> String {
    let title = channel_index(&entry.channel).map(|i| CHANNELS[i].title).unwrap_or_default();
    format!(
        "{} ({title}) of validation sample {} after epoch {} (step {}): input, target, prediction and error on the {} × {} grid",
        entry.channel, entry.sample, entry.epoch, entry.step, entry.height, entry.width
    )
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    fn entry(epoch: u64, channel: &str) -> MapEntry {
        let grid = [0.0f32; 2];
        let (mut entry, _) = MapEntry::draw(epoch, epoch * 10, 0, channel_index(channel).unwrap(), [&grid, &grid, &grid], 1, 2);
        entry.channel = channel.to_owned();
        entry
    }

    #[wasm_bindgen_test]
    fn epochs_and_channels_come_in_order_the_trainers_channels_first() {
        let maps = [entry(2, "u10"), entry(1, "tcwv"), entry(1, "u10"), entry(1, "t2m"), entry(2, "t2m")];
        assert_eq!(channels_of(&maps), ["t2m", "u10", "tcwv"]);
        assert_eq!(epochs_of(&maps, "u10"), [1, 2]);
        assert_eq!(epochs_of(&maps, "tcwv"), [1]);
        assert!(epochs_of(&maps, "v10").is_empty());
        assert!(describe(&maps[0]).starts_with("u10 (eastward wind at 10 m) of validation sample 0 after epoch 2 (step 20)"));
    }
}
