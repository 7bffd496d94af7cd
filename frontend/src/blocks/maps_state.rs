//! The maps block's signals: the run shown, its list of maps asked for again while it trains,
//! the channel and epoch picked and the picture they name, so the component itself only lays
//! them out. What they decide is `scalebook_page`'s maps model.

use std::time::Duration;

use leptos::prelude::*;
use scalebook_page::blocks::maps_model::{self, Message, Shown};
use scalebook_shared::protocol::{RunId, RunState};
use scalebook_shared::weather::{Lead, MAPPED_CHANNELS, MapEntry, MapIndex, Rollout};

use super::data_fetch::fetch_json;
use crate::net::object_url::{Picture, api_picture};
use crate::net::urls;
use crate::runs::Runs;

/// How often a live run's list of maps is asked for again: an epoch of a CPU run takes
/// seconds to minutes, and a classroom of pages polling this often is still a trickle.
const POLL: Duration = Duration::from_secs(4);

/// The server's answer about a run's maps: the list, or why there is none.
type Answer = (RunId, Result<MapIndex, String>);

#[derive(Clone, Copy)]
pub struct MapsState {
    pub runs: Runs,
    /// The run chosen; `None` follows the newest run (the one just launched on this page,
    /// else the server's newest).
    pub picked: RwSignal<Option<RunId>>,
    /// The run shown.
    pub run: Memo<Option<RunId>>,
    /// Where the run shown stands.
    run_state: Memo<Option<RunState>>,
    /// The last answer about a run's maps, kept only for the run shown.
    answer: RwSignal<Option<Answer>>,
    /// The run's maps, once its list is here.
    maps: Memo<Option<Vec<MapEntry>>>,
    pub channel: RwSignal<String>,
    /// The epoch the learner moved the slider to; `None` follows the newest.
    chosen: RwSignal<Option<u64>>,
    pub channels: Memo<Vec<String>>,
    /// The epochs with a map of the channel, oldest first.
    pub epochs: Memo<Vec<u64>>,
    /// The epoch shown.
    pub epoch: Memo<Option<u64>>,
    /// The map shown.
    pub entry: Memo<Option<MapEntry>>,
    /// Its picture, fetched (the previous one stays up while the next loads).
    pub picture: ReadSignal<Option<Picture<MapEntry>>>,
    /// The forecast rolled out at the run's end, once there is one.
    pub rollout: Memo<Option<Rollout>>,
    /// The lead shown (its place in the rollout).
    pub lead: RwSignal<usize>,
    /// That lead and its map of the channel.
    pub lead_entry: Memo<Option<(Lead, MapEntry)>>,
    pub lead_picture: ReadSignal<Option<Picture<MapEntry>>>,
}

impl MapsState {
    pub fn new(run: Option<RunId>) -> MapsState {
        let runs = expect_context::<Runs>();
        let picked = RwSignal::new(run);
        let run = Memo::new(move |_| picked.get().or_else(|| newest_run(runs)));
        let run_state = Memo::new(move |_| run.get().and_then(|id| runs.record(&id)).map(|r| r.state()));
        let answer = RwSignal::new(None::<Answer>);
        ask_for_maps(run, run_state, answer);
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
        // Another run starts at its newest epoch.
        Effect::new(move |_| {
            run.track();
            chosen.set(None);
        });
        let channels = Memo::new(move |_| maps.with(|m| m.as_deref().map(maps_model::channels_of).unwrap_or_default()));
        let epochs = Memo::new(move |_| maps.with(|m| m.as_deref().map(|m| maps_model::epochs_of(m, &channel.get())).unwrap_or_default()));
        let epoch = Memo::new(move |_| epochs.with(|e| maps_model::shown_epoch(e, chosen.get())));
        let entry = Memo::new(move |_| {
            let (epoch, channel) = (epoch.get()?, channel.get());
            maps.with(|m| maps_model::entry_at(m.as_ref()?, epoch, &channel))
        });
        let picture = api_picture(move || {
            let (entry, id) = entry.get().zip(run.get())?;
            let url = urls::api(&format!("runs/{id}/maps/{}", entry.file));
            Some((entry, url))
        });
        let rollout = Memo::new(move |_| {
            shown.with(|s| s.as_ref().filter(|(id, _)| Some(id) == run.get().as_ref()).and_then(|(_, index)| index.rollout.clone()))
        });
        let lead = RwSignal::new(0usize);
        let lead_entry = Memo::new(move |_| {
            let channel = channel.get();
            rollout.with(|r| {
                let lead = r.as_ref()?.leads.get(lead.get())?.clone();
                let entry = lead.maps.iter().find(|m| m.channel == channel)?.clone();
                Some((lead, entry))
            })
        });
        let lead_picture = api_picture(move || {
            let ((_, entry), id) = lead_entry.get().zip(run.get())?;
            let url = urls::api(&format!("runs/{id}/maps/{}", entry.file));
            Some((entry, url))
        });
        MapsState {
            runs,
            picked,
            run,
            run_state,
            answer,
            maps,
            channel,
            chosen,
            channels,
            epochs,
            epoch,
            entry,
            picture,
            rollout,
            lead,
            lead_entry,
            lead_picture,
        }
    }

    /// Where the epoch slider stands.
    pub fn position(&self) -> usize {
        self.epochs.with(|e| maps_model::slider_position(e, self.epoch.get()))
    }

    /// The slider moved to `text`.
    pub fn slide(&self, text: String) {
        let Ok(at) = text.parse::<usize>() else { return };
        self.epochs.with(|e| self.chosen.set(maps_model::chosen_at(e, at)));
    }

    /// Why the block shows no map, if it does not.
    pub fn message(&self) -> Option<Message> {
        let run = self.run.get();
        let answer = self.answer.get();
        let list_error = match &answer {
            Some((asked, Err(message))) if Some(asked) == run.as_ref() => Some(message.as_str()),
            _ => None,
        };
        let picture_error = self.picture.with(|p| p.as_ref().and_then(|p| p.src.as_ref().err().cloned()));
        let ended = self.run_state.get().is_some_and(RunState::is_final);
        self.maps.with(|maps| {
            maps_model::message(Shown {
                run: run.as_ref(),
                list_error,
                picture_error: picture_error.as_deref(),
                ended,
                maps: maps.as_deref(),
            })
        })
    }
}

/// Asks for the run's list of maps when the run changes state (its last maps are there once
/// it has ended) and on every poll while it trains; an answer about a run no longer shown is
/// dropped.
fn ask_for_maps(run: Memo<Option<RunId>>, run_state: Memo<Option<RunState>>, answer: RwSignal<Option<Answer>>) {
    let tick = RwSignal::new(0u64);
    let poll = set_interval_with_handle(
        move || {
            if run_state.get_untracked().is_some_and(|s| !s.is_final()) {
                tick.update(|t| *t += 1)
            }
        },
        POLL,
    )
    .ok();
    on_cleanup(move || poll.iter().for_each(|handle| handle.clear()));
    Effect::new(move |_| {
        let (id, _, _) = (run.get(), run_state.get(), tick.get());
        let Some(id) = id else { return };
        fetch_json(urls::api(&format!("runs/{id}/maps")), move |result| {
            if run.try_get_untracked().flatten().as_ref() == Some(&id) {
                answer.try_set(Some((id, result)));
            }
        });
    });
}

/// The run a block without `run=ID` shows: the one this page charted last (what it just
/// launched), else the newest on the server.
fn newest_run(runs: Runs) -> Option<RunId> {
    runs.charted.with(|c| c.last().cloned()).or_else(|| runs.records.with(|r| r.last().map(|r| r.id.clone())))
}
