//! The maps block's decisions, apart from its signals: the channels and epochs a run's maps
//! offer, which map the slider and the channel switch pick, the panels' titles and the
//! picture's description, and the line the block shows while it has no map to show.

use scalebook_shared::protocol::RunId;
use scalebook_shared::weather::{CHANNELS, ERROR_PANEL, MAPPED_CHANNELS, MapEntry, channel_index};

/// The channels drawn, the trainer's own first.
pub fn channels_of(maps: &[MapEntry]) -> Vec<String> {
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
pub fn epochs_of(maps: &[MapEntry], channel: &str) -> Vec<u64> {
    let mut epochs: Vec<u64> = maps.iter().filter(|m| m.channel == channel).map(|m| m.epoch).collect();
    epochs.sort_unstable();
    epochs.dedup();
    epochs
}

/// The epoch shown: the one the learner chose while it is among `epochs`, else the newest
/// (so a block left alone follows a training run).
pub fn shown_epoch(epochs: &[u64], chosen: Option<u64>) -> Option<u64> {
    chosen.filter(|c| epochs.contains(c)).or(epochs.last().copied())
}

/// What moving the slider to `position` chooses: an older epoch, kept as the run trains on,
/// or `None` at the newest, which follows the run again.
pub fn chosen_at(epochs: &[u64], position: usize) -> Option<u64> {
    epochs.get(position).copied().filter(|_| position + 1 < epochs.len())
}

/// Where the slider stands for `epoch` (at the start when there is none).
pub fn slider_position(epochs: &[u64], epoch: Option<u64>) -> usize {
    epoch.and_then(|x| epochs.iter().position(|y| *y == x)).unwrap_or(0)
}

/// The map of `channel` after `epoch`.
pub fn entry_at(maps: &[MapEntry], epoch: u64, channel: &str) -> Option<MapEntry> {
    maps.iter().find(|e| e.epoch == epoch && e.channel == channel).cloned()
}

/// A panel's title above the picture.
pub fn panel_title(panel: &str) -> String {
    match panel {
        "input" => "input (now)".into(),
        "target" => "target (dt later)".into(),
        "prediction" => "prediction".into(),
        p if p == ERROR_PANEL => "error (prediction − target)".into(),
        other => other.to_owned(),
    }
}

/// The picture's description: its caption and its `alt` text.
pub fn describe(entry: &MapEntry) -> String {
    let title = channel_index(&entry.channel).map(|i| CHANNELS[i].title).unwrap_or_default();
    format!(
        "{} ({title}) of validation sample {} after epoch {} (step {}): input, target, prediction and error on the {} × {} grid",
        entry.channel, entry.sample, entry.epoch, entry.step, entry.height, entry.width
    )
}

/// The line the block shows in place of maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Something failed: the server's or the picture's error.
    Error(String),
    /// Nothing failed, there is just nothing (yet) to show.
    Status(String),
}

/// Where the block stands with its maps, as [`message`] reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown<'a> {
    /// The run shown, if there is one.
    pub run: Option<&'a RunId>,
    /// The server's error for the list of this run's maps.
    pub list_error: Option<&'a str>,
    /// Why the picture could not be fetched.
    pub picture_error: Option<&'a str>,
    /// Whether the run has ended (so it draws no more maps).
    pub ended: bool,
    /// The run's maps, once the list is here.
    pub maps: Option<&'a [MapEntry]>,
}

/// Why the block shows no map, or `None` when it shows one: no run, an error (the list's
/// first, then the picture's), the list still loading, or a run without maps yet or ever.
pub fn message(shown: Shown<'_>) -> Option<Message> {
    let Some(id) = shown.run else {
        return Some(Message::Status("No run yet: launch one, and its maps appear here after its first epoch.".into()));
    };
    if let Some(error) = shown.list_error.or(shown.picture_error) {
        return Some(Message::Error(error.to_owned()));
    }
    match shown.maps {
        None => Some(Message::Status(format!("Loading the maps of run {id}…"))),
        Some([]) if shown.ended => Some(Message::Status(format!(
            "Run {id} drew no maps (a run from before the trainer drew them, or one that stopped before its first epoch ended)."
        ))),
        Some([]) => Some(Message::Status(format!("Run {id} has drawn no maps yet: the trainer draws them after each epoch's validation."))),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(epoch: u64, channel: &str) -> MapEntry {
        let grid = [0.0f32; 2];
        let (mut entry, _) = MapEntry::draw(epoch, epoch * 10, 0, channel_index(channel).unwrap(), [&grid, &grid, &grid], 1, 2);
        entry.channel = channel.to_owned();
        entry
    }

    #[test]
    fn epochs_and_channels_come_in_order_the_trainers_channels_first() {
        let maps = [entry(2, "u10"), entry(1, "tcwv"), entry(1, "u10"), entry(1, "t2m"), entry(2, "t2m")];
        assert_eq!(channels_of(&maps), ["t2m", "u10", "tcwv"]);
        assert_eq!(epochs_of(&maps, "u10"), [1, 2]);
        assert_eq!(epochs_of(&maps, "tcwv"), [1]);
        assert!(epochs_of(&maps, "v10").is_empty());
        assert!(describe(&maps[0]).starts_with("u10 (eastward wind at 10 m) of validation sample 0 after epoch 2 (step 20)"));
        assert_eq!(entry_at(&maps, 1, "t2m"), Some(maps[3].clone()));
        assert_eq!(entry_at(&maps, 3, "t2m"), None);
        assert_eq!(panel_title(ERROR_PANEL), "error (prediction − target)");
        assert_eq!(panel_title("target"), "target (dt later)");
    }

    #[test]
    fn the_slider_follows_the_newest_epoch_until_moved_back() {
        let epochs = [1, 2, 5];
        assert_eq!(shown_epoch(&epochs, None), Some(5));
        assert_eq!(shown_epoch(&epochs, Some(2)), Some(2));
        assert_eq!(shown_epoch(&epochs, Some(3)), Some(5), "a choice no longer there");
        assert_eq!(shown_epoch(&[], Some(2)), None);
        assert_eq!(chosen_at(&epochs, 1), Some(2));
        assert_eq!(chosen_at(&epochs, 2), None, "the newest follows the run");
        assert_eq!(chosen_at(&epochs, 7), None);
        assert_eq!(slider_position(&epochs, Some(5)), 2);
        assert_eq!(slider_position(&epochs, None), 0);
    }

    #[test]
    fn the_block_says_why_it_shows_no_map() {
        let id = RunId::parse("20261125-101010-weather").unwrap();
        let none = Shown { run: Some(&id), list_error: None, picture_error: None, ended: false, maps: None };
        let status = |shown: Shown<'_>| match message(shown) {
            Some(Message::Status(text)) => text,
            other => panic!("{other:?}"),
        };
        assert!(status(Shown { run: None, ..none }).starts_with("No run yet"));
        assert_eq!(status(none), "Loading the maps of run 20261125-101010-weather…");
        assert!(status(Shown { maps: Some(&[]), ..none }).contains("has drawn no maps yet"));
        assert!(status(Shown { maps: Some(&[]), ended: true, ..none }).contains("drew no maps (a run from before"));
        let failed = Shown { list_error: Some("gone"), picture_error: Some("404"), ..none };
        assert_eq!(message(failed), Some(Message::Error("gone".into())));
        assert_eq!(message(Shown { list_error: None, ..failed }), Some(Message::Error("404".into())));
        let maps = [entry(1, "t2m")];
        assert_eq!(message(Shown { maps: Some(&maps), ..none }), None);
    }
}
