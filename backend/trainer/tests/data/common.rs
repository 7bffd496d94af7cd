//! Helpers shared by the data tests: temporary directories, small generated datasets and
//! hand-made HDF5 files.

use std::path::{Path, PathBuf};

use scalebook_trainer::data::Stats;
use scalebook_trainer::data::synth::{self, SynthConfig};

/// A fresh directory, removed when the test ends (pass or fail).
pub fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("scalebook-data-{name}-")).tempdir().unwrap()
}

pub fn small(years: usize, steps: usize, height: usize, width: usize) -> SynthConfig {
    SynthConfig { years, steps_per_year: steps, height, width, seed: 7 }
}

pub fn generate(dir: &Path, config: &SynthConfig) -> Vec<PathBuf> {
    synth::generate(dir, config, false, &mut |_| {}).unwrap()
}

pub fn raw_stats(channels: usize) -> Stats {
    Stats::new(vec![0.0; channels], vec![1.0; channels]).unwrap()
}

pub fn file_stats(dir: &Path) -> Stats {
    Stats::load(&dir.join(synth::GLOBAL_MEANS), &dir.join(synth::GLOBAL_STDS), 20).unwrap()
}

/// All of `fields` of one file, (T, C, H, W) in C order.
pub fn read_fields(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let fields = hdf5::File::open(path).unwrap().dataset("fields").unwrap();
    (fields.shape(), fields.read_raw::<f32>().unwrap())
}

/// A `fields` dataset (or another name) whose values are `value([t, c, y, x])`.
pub fn write_h5(path: &Path, name: &str, shape: [usize; 4], value: impl Fn([usize; 4]) -> f32) {
    let file = hdf5::File::create(path).unwrap();
    let data = ndarray::Array4::from_shape_fn(shape, |(t, c, y, x)| value([t, c, y, x]));
    file.new_dataset_builder().with_data(&data).create(name).unwrap();
}

/// Three years of 10 steps whose values name the year, step and channel: 1000·year + t + c/100.
pub fn labelled_years(dir: &Path) {
    for year in 0..3 {
        write_h5(&dir.join(format!("{}.h5", 2000 + year)), "fields", [10, 20, 2, 3], |[t, c, _, _]| {
            1000.0 * year as f32 + t as f32 + c as f32 / 100.0
        });
    }
}
