//! The weather maps of a run: after every epoch's validation, the model predicts one fixed
//! validation sample and rank 0 draws input, target, prediction and error for the mapped
//! channels (t2m, u10) in physical units: a PNG each in the run's maps directory, listed in its
//! index, and a TensorBoard image under the tutorial's tag (`Visualization, t2m`).

use std::path::{Path, PathBuf};

use scalebook_shared::rundir;
use scalebook_shared::weather::{MAPPED_CHANNELS, MapEntry, MapIndex, channel_index, encode_png};
use tch::Tensor;

use crate::Error;
use crate::data::{Era5Dataset, Sample};
use crate::train::Learner;
use crate::train::report::Reporter;

/// The validation sample every epoch's maps show, so they can be compared epoch to epoch.
const SAMPLE: usize = 0;

pub struct WeatherMaps {
    pub(super) dir: PathBuf,
    pub(super) sample: Sample,
    pub(super) means: Vec<f32>,
    pub(super) stds: Vec<f32>,
    pub(super) shape: [usize; 3],
    pub(super) index: MapIndex,
}

impl WeatherMaps {
    /// The maps of `valid`'s first sample, appending to the index a resumed run already has.
    pub fn new(valid: &Era5Dataset, run_dir: &Path) -> Result<WeatherMaps, Error> {
        let dir = run_dir.join(rundir::MAPS_DIR);
        let index_path = dir.join(rundir::MAPS_INDEX);
        let index = match std::fs::read(&index_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
            Err(_) => MapIndex::default(),
        };
        let [h, w] = valid.img_size();
        let stats = valid.stats();
        Ok(WeatherMaps {
            dir,
            sample: valid.get(SAMPLE)?,
            means: stats.means().to_vec(),
            stds: stats.stds().to_vec(),
            shape: [valid.channels(), h, w],
            index,
        })
    }

    /// Predicts the sample (on every rank of rank 0's tp-cp group: a model-parallel forward
    /// needs the whole group) and, where `report` writes (rank 0), draws the epoch's maps.
    pub fn draw(&mut self, learner: &Learner, epoch: u64, step: u64, report: &mut Reporter) -> Result<(), Error> {
        let [c, h, w] = self.shape;
        let dims = [1, c as i64, h as i64, w as i64];
        let input = Tensor::from_slice(&self.sample.input).view(dims);
        let prediction = learner.predict(&input)?;
        if !report.writes() {
            return Ok(());
        }
        let prediction = Vec::<f32>::try_from(prediction.to_kind(tch::Kind::Float).flatten(0, -1))?;
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        for name in MAPPED_CHANNELS {
            let Some(ch) = channel_index(name).filter(|&ch| ch < c) else { continue };
            let grids = [&self.sample.input, &self.sample.target, &prediction].map(|values| self.physical(values, ch));
            let (entry, raster) = MapEntry::draw(epoch, step, SAMPLE, ch, [&grids[0], &grids[1], &grids[2]], h, w);
            let png = encode_png(&raster)?;
            let path = self.dir.join(&entry.file);
            std::fs::write(&path, &png).map_err(|e| Error::io(&path, e))?;
            report.image(step, &entry.tensorboard_tag(), &png, raster.height as u32, raster.width as u32)?;
            self.index.maps.retain(|m| !(m.epoch == epoch && m.channel == entry.channel));
            self.index.maps.push(entry);
        }
        self.write_index()
    }

    /// Channel `ch`'s grid of normalised `values` (a whole C·H·W sample), in the channel's units.
    pub(super) fn physical(&self, values: &[f32], ch: usize) -> Vec<f32> {
        let plane = self.shape[1] * self.shape[2];
        values[ch * plane..][..plane].iter().map(|v| v * self.stds[ch] + self.means[ch]).collect()
    }

    /// The index, replaced whole (written beside it, then renamed) so a reader never sees half.
    pub(super) fn write_index(&self) -> Result<(), Error> {
        let path = self.dir.join(rundir::MAPS_INDEX);
        let partial = self.dir.join(format!("{}.partial", rundir::MAPS_INDEX));
        let json = serde_json::to_vec_pretty(&self.index)
            .map_err(|e| Error::Internal { what: "the maps index".into(), message: e.to_string() })?;
        std::fs::write(&partial, json).map_err(|e| Error::io(&partial, e))?;
        std::fs::rename(&partial, &path).map_err(|e| Error::io(&path, e))
    }
}
