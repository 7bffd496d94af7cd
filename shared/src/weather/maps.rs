//! The weather maps of a run: every epoch, rank 0 draws one validation sample's input, target,
//! prediction and error for a few channels, as one PNG per channel (the four panels side by
//! side) in the run's maps directory, listed in its index, and as a TensorBoard image with the
//! tutorial's tag.

use serde::{Deserialize, Serialize};

use super::{CHANNELS, Palette, Raster};

/// The channels drawn every epoch: the tutorial's t2m (its plots) and u10 (its metric).
pub const MAPPED_CHANNELS: [&str; 2] = ["t2m", "u10"];

/// The panels of a map, left to right.
pub const PANELS: [&str; 4] = ["input", "target", "prediction", "error"];
/// The panel drawn with the diverging palette over a symmetric range.
pub const ERROR_PANEL: &str = "error";

/// White pixels between panels.
const GAP: usize = 4;
/// Small grids are drawn with each value as a block, up to this many pixels high.
const MIN_HEIGHT: usize = 120;

/// The file of `channel`'s map after epoch `epoch`.
pub fn map_file(epoch: u64, channel: &str) -> String {
    format!("epoch{epoch:04}-{channel}.png")
}

/// The epoch and channel of a map file's name: `Some` only for exactly what [`map_file`] makes
/// for some epoch and one of the 20 channels, so a name that passes names nothing else.
pub fn map_file_parts(name: &str) -> Option<(u64, &str)> {
    let (epoch, channel) = name.strip_prefix("epoch")?.strip_suffix(".png")?.split_once('-')?;
    let epoch = epoch.bytes().all(|b| b.is_ascii_digit()).then(|| epoch.parse::<u64>().ok())??;
    (super::channel_index(channel).is_some() && map_file(epoch, channel) == name).then_some((epoch, channel))
}

/// The file of `channel`'s map of the forecast `hours` ahead, rolled out at the end of a run.
pub fn rollout_file(hours: u64, channel: &str) -> String {
    format!("lead{hours:03}h-{channel}.png")
}

/// Whether `name` is exactly what [`map_file`] or [`rollout_file`] makes for some epoch or lead
/// and one of the 20 channels, so a name that passes names nothing else.
pub fn is_map_file(name: &str) -> bool {
    map_file_parts(name).is_some() || rollout_file_parts(name).is_some()
}

fn rollout_file_parts(name: &str) -> Option<(u64, &str)> {
    let (hours, channel) = name.strip_prefix("lead")?.strip_suffix(".png")?.split_once("h-")?;
    let hours = hours.bytes().all(|b| b.is_ascii_digit()).then(|| hours.parse::<u64>().ok())??;
    (super::channel_index(channel).is_some() && rollout_file(hours, channel) == name).then_some((hours, channel))
}

/// The maps a run has drawn so far (`index.json` in the maps directory), oldest first, and the
/// forecast rolled out at its end.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MapIndex {
    pub maps: Vec<MapEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}

/// A forecast rolled out from the trained model: its prediction fed back as its next input,
/// lead after lead, against the truth at each lead time, and against persistence (the forecast
/// that the weather stays as it was), the baseline every forecast must beat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    /// The epoch and step whose weights rolled out (the last checkpoint's).
    pub epoch: u64,
    pub step: u64,
    /// The validation samples the forecasts start from (the errors are their average).
    pub starts: Vec<usize>,
    pub leads: Vec<Lead>,
}

/// One lead time of a rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lead {
    /// Hours ahead of the start (6 per step of the data at `dt` 1).
    pub hours: u64,
    /// The latitude-weighted RMSE per mapped channel, in its units.
    pub errors: Vec<LeadError>,
    /// The first start's maps at this lead: input (the start), target (the truth at this lead),
    /// prediction and error.
    pub maps: Vec<MapEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeadError {
    pub channel: String,
    pub units: String,
    pub model: f64,
    pub persistence: f64,
}

/// One map: which sample, channel and epoch, and what the colours mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapEntry {
    pub epoch: u64,
    pub step: u64,
    /// The sample's index in the validation set.
    pub sample: usize,
    pub channel: String,
    pub units: String,
    /// The PNG, relative to the maps directory.
    pub file: String,
    /// The panels left to right ([`PANELS`]).
    pub panels: Vec<String>,
    /// The value range of the input, target and prediction panels (sequential palette).
    pub range: [f32; 2],
    /// The symmetric range of the error panel (prediction − target, diverging palette).
    pub error_range: [f32; 2],
    /// The grid's size in values, and the pixels per value in the PNG.
    pub height: usize,
    pub width: usize,
    pub scale: usize,
}

impl MapEntry {
    /// Draws `channel`'s four panels from the input, target and prediction grids (row-major,
    /// `height` × `width`, in the channel's units).
    pub fn draw(
        epoch: u64,
        step: u64,
        sample: usize,
        channel: usize,
        grids: [&[f32]; 3],
        height: usize,
        width: usize,
    ) -> (MapEntry, Raster) {
        let [input, target, prediction] = grids;
        let finite = |v: &&f32| v.is_finite();
        let (lo, hi) = input
            .iter()
            .chain(target)
            .chain(prediction)
            .filter(finite)
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 0.0) };
        let error: Vec<f32> = prediction.iter().zip(target).map(|(p, t)| p - t).collect();
        let e = error.iter().filter(finite).fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = MIN_HEIGHT.div_ceil(height.max(1)).clamp(1, 8);
        let field = |values: &[f32]| Raster::from_values(values, height, width, (lo, hi), Palette::Sequential, scale);
        let panels = [
            field(input),
            field(target),
            field(prediction),
            Raster::from_values(&error, height, width, (-e, e), Palette::Diverging, scale),
        ];
        let c = &CHANNELS[channel];
        let entry = MapEntry {
            epoch,
            step,
            sample,
            channel: c.name.to_owned(),
            units: c.units.to_owned(),
            file: map_file(epoch, c.name),
            panels: PANELS.iter().map(|p| (*p).to_owned()).collect(),
            range: [lo, hi],
            error_range: [-e, e],
            height,
            width,
            scale,
        };
        (entry, Raster::side_by_side(&panels, GAP))
    }

    /// The TensorBoard image tag: the tutorial's `Visualization, t2m`, and likewise for the
    /// other channels.
    pub fn tensorboard_tag(&self) -> String {
        format!("Visualization, {}", self.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_has_four_panels_a_shared_range_and_a_symmetric_error() {
        let input = [1.0, 2.0];
        let target = [2.0, 3.0];
        let prediction = [2.5, 2.0];
        let (entry, raster) = MapEntry::draw(3, 30, 7, 2, [&input, &target, &prediction], 1, 2);
        assert_eq!(entry.range, [1.0, 3.0]);
        assert_eq!(entry.error_range, [-1.0, 1.0]);
        assert_eq!((entry.channel.as_str(), entry.units.as_str(), entry.file.as_str()), ("t2m", "K", "epoch0003-t2m.png"));
        assert_eq!(entry.tensorboard_tag(), "Visualization, t2m");
        assert_eq!(raster.height, entry.scale);
        assert_eq!(raster.width, 4 * 2 * entry.scale + 3 * GAP);
    }

    #[test]
    fn rollout_maps_have_names_of_their_own() {
        assert_eq!(rollout_file(6, "u10"), "lead006h-u10.png");
        assert!(is_map_file("lead006h-u10.png") && is_map_file("lead120h-t2m.png") && is_map_file("epoch0001-t2m.png"));
        for bad in ["lead6h-u10.png", "lead006h-x.png", "lead006h-u10.PNG", "lead006-u10.png", "lead006h-../u10.png", "lead+06h-u10.png"] {
            assert!(!is_map_file(bad), "{bad}");
        }
    }
}
