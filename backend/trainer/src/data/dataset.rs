//! The tutorial's `ERA5Dataset`: one HDF5 file per year with a `fields` dataset of shape
//! (T, C, Hf, Wf); a sample is the top-left (H, W) crop at one time step (input) and `dt`
//! steps later (target), normalised per channel.

use std::path::{Path, PathBuf};

use hdf5::types::TypeDescriptor;
use ndarray::{Ix3, s};
use scalebook_shared::weather::sample_position;

use super::Stats;
use super::direct::DirectSteps;
use crate::Error;

/// The HDF5 dataset every year file must hold.
pub const FIELDS: &str = "fields";

pub struct Era5Dataset {
    dir: PathBuf,
    years: Vec<YearFile>,
    n_per_year: usize,
    len: usize,
    img_size: [usize; 2],
    channels: usize,
    dt: usize,
    stats: Stats,
}

/// An open year file. Every file is opened once, when the dataset is checked, and shared by all
/// loader workers: read directly when its layout allows ([`DirectSteps`]), else through
/// libhdf5 (which serialises every read behind one lock).
struct YearFile {
    path: PathBuf,
    fields: hdf5::Dataset,
    direct: Option<DirectSteps>,
}

/// One normalised sample, each a (C, H, W) array in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub input: Vec<f32>,
    pub target: Vec<f32>,
}

impl Era5Dataset {
    /// Opens the sorted `*.h5` files of `dir` and checks every one before any training starts:
    /// a `fields` dataset of floats, 4-D, `channels` channels, at least `img_size` large and
    /// more than `dt` time steps. `limit` caps the number of samples (the tutorial's
    /// `limit_nsamples`: the first indices, so the start of the first year).
    pub fn open(
        dir: &Path,
        img_size: [usize; 2],
        channels: usize,
        dt: usize,
        limit: Option<usize>,
        stats: Stats,
    ) -> Result<Era5Dataset, Error> {
        if dt == 0 {
            return Err(Error::DataSetting("dt must be at least 1 time step".into()));
        }
        if stats.channels() != channels {
            return Err(Error::DataSetting(format!(
                "the normalisation statistics have {} channels but the data has {channels}",
                stats.channels()
            )));
        }
        let paths = year_files(dir)?;
        let mut years = Vec::with_capacity(paths.len());
        let mut n_per_year = 0;
        for path in paths {
            let (fields, steps) = open_fields(&path, img_size, channels)?;
            let bad = |message: String| Error::Data { path: path.clone(), message };
            if years.is_empty() {
                if steps <= dt {
                    return Err(bad(format!("has {steps} time steps; dt = {dt} needs at least {}", dt + 1)));
                }
                n_per_year = steps;
            } else if steps < n_per_year {
                return Err(bad(format!("has {steps} time steps, fewer than the {n_per_year} of the first file")));
            }
            let direct = DirectSteps::probe(&path, &fields);
            years.push(YearFile { path, fields, direct });
        }
        let total = years.len() * n_per_year;
        let len = limit.map_or(total, |limit| limit.min(total));
        Ok(Era5Dataset { dir: dir.to_owned(), years, n_per_year, len, img_size, channels, dt, stats })
    }

    /// Number of samples (after the limit).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.years.iter().map(|year| year.path.as_path())
    }

    /// Time steps per year, from the first file.
    pub fn n_per_year(&self) -> usize {
        self.n_per_year
    }

    pub fn img_size(&self) -> [usize; 2] {
        self.img_size
    }

    pub fn channels(&self) -> usize {
        self.channels
    }

    pub fn dt(&self) -> usize {
        self.dt
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Values in one input (or target): C·H·W.
    pub fn sample_len(&self) -> usize {
        self.channels * self.img_size[0] * self.img_size[1]
    }

    /// The year file and the time step within it that sample `index` starts from
    /// ([`sample_position`]: the tutorial's rule).
    pub fn locate(&self, index: usize) -> Result<(usize, usize), Error> {
        if index >= self.len {
            return Err(Error::SampleIndex { index, len: self.len });
        }
        Ok(sample_position(index, self.n_per_year, self.dt))
    }

    /// Reads sample `index` into two buffers of [`sample_len`](Self::sample_len) values.
    pub fn read_into(&self, index: usize, input: &mut [f32], target: &mut [f32]) -> Result<(), Error> {
        let (year, local) = self.locate(index)?;
        let file = &self.years[year];
        self.read_step(file, local, input)?;
        self.read_step(file, local + self.dt, target)
    }

    /// How many time steps of sample `index`'s year file follow its input: how far ahead a
    /// forecast starting there can be checked against the truth.
    pub fn steps_after(&self, index: usize) -> Result<usize, Error> {
        let (_, local) = self.locate(index)?;
        Ok(self.n_per_year.saturating_sub(local + 1))
    }

    /// Reads the field `ahead` time steps after sample `index`'s input (0: its input; `dt`: its
    /// target), for a forecast rolled out past one step; at most [`steps_after`](Self::steps_after).
    pub fn read_ahead(&self, index: usize, ahead: usize, out: &mut [f32]) -> Result<(), Error> {
        if ahead > self.steps_after(index)? {
            return Err(Error::DataSetting(format!("sample {index} has no time step {ahead} ahead in its year file")));
        }
        let (year, local) = self.locate(index)?;
        self.read_step(&self.years[year], local + ahead, out)
    }

    pub fn get(&self, index: usize) -> Result<Sample, Error> {
        let mut sample = Sample { input: vec![0.0; self.sample_len()], target: vec![0.0; self.sample_len()] };
        self.read_into(index, &mut sample.input, &mut sample.target)?;
        Ok(sample)
    }

    /// Whether every file is read directly, outside libhdf5 (see [`DirectSteps`]).
    pub fn reads_directly(&self) -> bool {
        self.years.iter().all(|year| year.direct.is_some())
    }

    /// Reads only the crop of one time step and normalises it.
    fn read_step(&self, file: &YearFile, step: usize, out: &mut [f32]) -> Result<(), Error> {
        if out.len() != self.sample_len() {
            return Err(Error::DataSetting(format!("a sample buffer holds {} values, a sample has {}", out.len(), self.sample_len())));
        }
        let unreadable = |err: &dyn std::fmt::Display| Error::Data {
            path: file.path.clone(),
            message: format!("cannot read time step {step} of `{FIELDS}`: {err}"),
        };
        match &file.direct {
            Some(direct) => direct.read(step, self.img_size, out).map_err(|err| unreadable(&err))?,
            None => {
                let [h, w] = self.img_size;
                let crop = file.fields.read_slice::<f32, _, Ix3>(s![step, .., 0..h, 0..w]).map_err(|err| unreadable(&err))?;
                match crop.as_slice() {
                    Some(values) => out.copy_from_slice(values),
                    None => out.iter_mut().zip(crop.iter()).for_each(|(o, v)| *o = *v),
                }
            }
        }
        self.stats.normalise(out);
        Ok(())
    }
}

/// The `*.h5` files of `dir`, sorted by name like the tutorial's `sorted(glob(...))`.
fn year_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let bad = |message: String| Error::Data { path: dir.to_owned(), message };
    if !dir.is_dir() {
        return Err(bad("the data directory does not exist".into()));
    }
    let entries = std::fs::read_dir(dir).map_err(|err| bad(format!("cannot list the data directory: {err}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|err| bad(format!("cannot list the data directory: {err}")))?.path();
        let visible = path.file_name().and_then(|name| name.to_str()).is_some_and(|name| !name.starts_with('.'));
        if visible && path.extension().is_some_and(|ext| ext == "h5") && path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(bad("no .h5 files in the data directory".into()));
    }
    files.sort();
    Ok(files)
}

/// Opens `fields` in one file, checks it against the crop and channel count, and returns it
/// with its number of time steps.
fn open_fields(path: &Path, [h, w]: [usize; 2], channels: usize) -> Result<(hdf5::Dataset, usize), Error> {
    let bad = |message: String| Error::Data { path: path.to_owned(), message };
    let file = hdf5::File::open(path).map_err(|err| bad(format!("cannot open as HDF5: {err}")))?;
    let fields = file.dataset(FIELDS).map_err(|_| {
        let found = file.member_names().unwrap_or_default().join(", ");
        bad(format!("has no dataset `{FIELDS}` (it holds: {})", if found.is_empty() { "nothing" } else { &found }))
    })?;
    let shape = fields.shape();
    let &[steps, file_channels, file_h, file_w] = shape.as_slice() else {
        return Err(bad(format!("`{FIELDS}` has shape {shape:?}; expected 4 dimensions (time, channel, lat, lon)")));
    };
    match fields.dtype().and_then(|dtype| dtype.to_descriptor()) {
        Ok(TypeDescriptor::Float(_)) => {}
        Ok(other) => {
            return Err(bad(format!("`{FIELDS}` holds {other:?} values; expected float32")));
        }
        Err(err) => return Err(bad(format!("cannot read the type of `{FIELDS}`: {err}"))),
    }
    if file_channels != channels {
        return Err(bad(format!("`{FIELDS}` has {file_channels} channels; the model reads {channels}")));
    }
    if file_h < h || file_w < w {
        return Err(bad(format!("`{FIELDS}` is {file_h} x {file_w}, smaller than the {h} x {w} image the config crops (img_size)")));
    }
    Ok((fields, steps))
}
