//! One channel of one sample of a config's training or validation set, as the data block
//! shows it: the picture (the shared sequential palette over the crop's own value range) and
//! what a legend and a reader need beside it.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use scalebook_shared::config::{ConfigFile, DEFAULT_CONFIG, TrainConfig};
use scalebook_shared::weather::{CHANNELS, Palette, Raster, channel_index, encode_png, latitude_weights};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::dataset::YearFiles;
use crate::Error;
use crate::limits::LaunchLimits;

/// The query of `api/data/sample`, every field as text so that each mistake is answered with
/// its field and rule (a typed query would fail as a whole, without saying which part).
#[derive(Debug, Default, Deserialize)]
pub struct SampleQuery {
    config: Option<String>,
    set: Option<String>,
    index: Option<String>,
    channel: Option<String>,
}

/// The two sets a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Set {
    Train,
    Valid,
}

impl Set {
    /// The config key naming the set's directory, its path, and the config's cap on its samples.
    fn source(self, config: &TrainConfig) -> (&'static str, &str, Option<usize>) {
        match self {
            Set::Train => ("train_data_path", &config.train_data_path, config.limit_nsamples),
            Set::Valid => ("valid_data_path", &config.valid_data_path, config.limit_nsamples_val),
        }
    }
}

/// A checked request: which config's set, which sample and channel.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    pub config: String,
    pub set: Set,
    pub index: usize,
    pub channel: usize,
}

impl SampleQuery {
    /// The request, with defaults for what is left out (the app's config, the training set,
    /// the first sample, t2m: the channel the tutorial plots).
    pub fn check(self, configs: &ConfigFile) -> Result<(SampleRequest, TrainConfig), Error> {
        let bad = |field, message: String| Error::BadSample { field, message };
        let config = self.config.unwrap_or_else(|| DEFAULT_CONFIG.to_owned());
        let train = configs.get(&config).map_err(|e| bad("config", e.to_string()))?;
        let set = match self.set.as_deref() {
            None | Some("train") => Set::Train,
            Some("valid") => Set::Valid,
            Some(other) => return Err(bad("set", format!("`{}` is not a set; the sets are train and valid", other.escape_debug()))),
        };
        let index = match self.index {
            None => 0,
            Some(text) => {
                text.parse().map_err(|_| bad("index", format!("`{}` is not a sample number (0, 1, 2, …)", text.escape_debug())))?
            }
        };
        let channel = match self.channel {
            None => channel_index("t2m").unwrap_or(0),
            Some(name) => channel_index(&name).ok_or_else(|| {
                let names: Vec<&str> = CHANNELS.iter().map(|c| c.name).collect();
                bad("channel", format!("`{}` is not one of the 20 channels: {}", name.escape_debug(), names.join(", ")))
            })?,
        };
        Ok((SampleRequest { config, set, index, channel }, train))
    }
}

/// What the data block draws: the picture as a `data:` URL (one request per view, no second
/// read of the file for the picture) and its legend, units and latitude weights.
#[derive(Debug, Clone, Serialize)]
pub struct SampleView {
    pub config: String,
    pub set: Set,
    pub index: usize,
    /// The samples in the set's files...
    pub samples: usize,
    /// ...and how many of them the config reads (its `limit_nsamples`, or `_val`).
    pub used: usize,
    /// Where the sample's input lies.
    pub file: String,
    pub step: usize,
    pub channel: &'static str,
    pub title: &'static str,
    pub units: &'static str,
    pub height: usize,
    pub width: usize,
    /// The lowest and highest value, the ends of the colour scale.
    pub range: [f32; 2],
    pub palette: &'static str,
    /// The weight of every row in the latitude-weighted metric, north to south.
    pub latitude_weights: Vec<f32>,
    pub png: String,
}

/// Samples read at the same time: a classroom moving its sliders at once queues here instead of
/// filling the blocking pool (libhdf5 reads one at a time anyway).
static READERS: Semaphore = Semaphore::const_new(2);

/// [`draw`] on a blocking thread, at most [`READERS`] at a time, from the data directories
/// `limits` lets runs read.
pub async fn draw_off_workers(request: SampleRequest, config: TrainConfig, limits: &LaunchLimits) -> Result<SampleView, Error> {
    let _turn = READERS.acquire().await.map_err(|e| Error::Io(std::io::Error::other(e)))?;
    let (workdir, roots) = (limits.workdir.clone(), limits.data_roots.clone());
    tokio::task::spawn_blocking(move || draw(request, &config, &workdir, &roots)).await.map_err(|e| Error::Io(std::io::Error::other(e)))?
}

/// Reads and draws the sample `request` asks for, from `config`'s data (resolved from
/// `workdir`, inside `roots`). Blocking: one slab of one file.
pub fn draw(request: SampleRequest, config: &TrainConfig, workdir: &Path, roots: &[PathBuf]) -> Result<SampleView, Error> {
    let (key, dir, limit) = request.set.source(config);
    let crop = config.img_size;
    let files = YearFiles::open(key, dir, workdir, roots, crop, config.dt)?;
    let (place, values) = files.read(request.index, config.dt, request.channel)?;
    let (lo, hi) = values.iter().filter(|v| v.is_finite()).fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let range = if lo <= hi { [lo, hi] } else { [0.0, 0.0] };
    let [height, width] = crop;
    let palette = Palette::Sequential;
    let raster = Raster::from_values(&values, height, width, (range[0], range[1]), palette, 1);
    let png = encode_png(&raster).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
    let channel = &CHANNELS[request.channel];
    let samples = files.samples();
    Ok(SampleView {
        config: request.config,
        set: request.set,
        index: request.index,
        samples,
        used: limit.map_or(samples, |l| l.min(samples)),
        file: place.file,
        step: place.step,
        channel: channel.name,
        title: channel.title,
        units: channel.units,
        height,
        width,
        range,
        palette: palette.name(),
        latitude_weights: latitude_weights(height),
        png: format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs() -> ConfigFile {
        ConfigFile::parse(include_str!("../../shipped/ViT.yaml")).unwrap()
    }

    fn query(pairs: &[(&str, &str)]) -> SampleQuery {
        let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned());
        SampleQuery { config: get("config"), set: get("set"), index: get("index"), channel: get("channel") }
    }

    fn refusal(pairs: &[(&str, &str)]) -> (&'static str, String) {
        match query(pairs).check(&configs()) {
            Err(Error::BadSample { field, message }) => (field, message),
            other => panic!("{pairs:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn a_query_defaults_to_the_apps_config_and_t2m() {
        let (request, _) = SampleQuery::default().check(&configs()).unwrap();
        assert_eq!(request, SampleRequest { config: DEFAULT_CONFIG.into(), set: Set::Train, index: 0, channel: 2 });
        let (request, config) =
            query(&[("config", "cpu_tiny"), ("set", "valid"), ("index", "7"), ("channel", "tcwv")]).check(&configs()).unwrap();
        assert_eq!((request.set, request.index, request.channel, config.img_size), (Set::Valid, 7, 19, [36, 72]));
    }

    #[test]
    fn each_bad_value_is_refused_with_its_field_and_rule() {
        assert_eq!(refusal(&[("config", "nope")]).0, "config");
        let (field, message) = refusal(&[("set", "test")]);
        assert_eq!((field, message.as_str()), ("set", "`test` is not a set; the sets are train and valid"));
        let (field, message) = refusal(&[("index", "-1")]);
        assert_eq!(field, "index");
        assert!(message.contains("not a sample number"), "{message}");
        let (field, message) = refusal(&[("channel", "t2")]);
        assert_eq!(field, "channel");
        assert!(message.contains("u10, v10, t2m"), "{message}");
    }
}
