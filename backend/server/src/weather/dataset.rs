//! A set of the tutorial's HDF5 files (one per year, a float32 `fields` dataset of shape
//! (time, 20, lat, lon)), opened the way the trainer's `Era5Dataset` opens it: the `*.h5` files
//! in name order, the first file's length as every file's, sample `i` counted across files. Only
//! what one picture needs is read: the first file's header and one channel's crop of one step.

use std::path::{Component, Path, PathBuf};

use scalebook_shared::weather::{CHANNELS, sample_position};

use crate::Error;

/// The HDF5 dataset every year file holds.
const FIELDS: &str = "fields";

/// The files of one set, checked against the crop a config reads.
#[derive(Debug)]
pub struct YearFiles {
    /// The config key that names the directory (`train_data_path`), for messages.
    key: &'static str,
    files: Vec<PathBuf>,
    /// Time steps per file, from the first file (as the trainer counts them).
    steps: usize,
    /// The crop (height, width) at the top left of every field.
    crop: [usize; 2],
}

/// Where a sample's input lies: the file (by name) and the time step inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: String,
    pub step: usize,
}

impl YearFiles {
    /// Opens the set in `dir` (the value of config key `key`), which must lie inside one of
    /// `roots` once resolved from `workdir` (links followed): the server reads data only where
    /// it lets runs read it. Checks the first file's `fields` against the `crop` and `dt`.
    pub fn open(key: &'static str, dir: &str, workdir: &Path, roots: &[PathBuf], crop: [usize; 2], dt: usize) -> Result<YearFiles, Error> {
        let no_data = |message: String| Error::NoData { field: key, message };
        if Path::new(dir).components().any(|c| c == Component::ParentDir) {
            return Err(no_data(format!("`{dir}` climbs with `..`; name the data by a path inside a data directory")));
        }
        let resolved = std::fs::canonicalize(workdir.join(dir)).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                no_data(format!("`{dir}` does not exist (`./scalebook.sh run` generates the synthetic data the CPU configs read)"))
            }
            _ => no_data(format!("`{dir}` cannot be opened: {e}")),
        })?;
        if !roots.iter().any(|root| resolved.starts_with(root)) {
            return Err(no_data(format!("`{dir}` is outside the data directories this server reads (start it with --data-root DIR)")));
        }
        let files = h5_files(&resolved).map_err(|e| no_data(format!("`{dir}` cannot be listed: {e}")))?;
        let Some(first) = files.first() else {
            return Err(no_data(format!("`{dir}` holds no .h5 files")));
        };
        let (_, steps) = open_fields(key, first, crop)?;
        if steps <= dt {
            return Err(no_data(format!("{} has {steps} time steps; dt = {dt} needs at least {}", file_name(first), dt + 1)));
        }
        Ok(YearFiles { key, files, steps, crop })
    }

    /// How many samples the set holds (before any `limit_nsamples`).
    pub fn samples(&self) -> usize {
        self.files.len() * self.steps
    }

    /// Channel `channel` of sample `index`'s input: the crop's `height · width` values, row by
    /// row from the north. Reads that hyperslab only.
    pub fn read(&self, index: usize, dt: usize, channel: usize) -> Result<(Place, Vec<f32>), Error> {
        let samples = self.samples();
        if index >= samples {
            let message = format!("sample {index} is past the end: this set has {samples} samples (0 to {})", samples - 1);
            return Err(Error::BadSample { field: "index", message });
        }
        let (year, step) = sample_position(index, self.steps, dt);
        let path = &self.files[year];
        let (fields, steps) = open_fields(self.key, path, self.crop)?;
        let unreadable = |e: &dyn std::fmt::Display| Error::NoData { field: self.key, message: format!("{}: {e}", file_name(path)) };
        if step >= steps {
            return Err(unreadable(&format!("has {steps} time steps, fewer than the {} of the first file", self.steps)));
        }
        let [h, w] = self.crop;
        let slab = fields.read_slice_2d::<f32, _>((step, channel, 0..h, 0..w)).map_err(|e| unreadable(&e))?;
        Ok((Place { file: file_name(path), step }, slab.iter().copied().collect()))
    }
}

/// The `fields` dataset of `path` and its number of time steps, checked: four dimensions, the
/// 20 channels, float values, at least as large as the crop.
fn open_fields(key: &'static str, path: &Path, [h, w]: [usize; 2]) -> Result<(hdf5::Dataset, usize), Error> {
    let bad = |message: String| Error::NoData { field: key, message: format!("{}: {message}", file_name(path)) };
    let file = hdf5::File::open(path).map_err(|e| bad(format!("cannot open as HDF5: {e}")))?;
    let fields = file.dataset(FIELDS).map_err(|_| bad(format!("has no dataset `{FIELDS}`")))?;
    let shape = fields.shape();
    let &[steps, channels, file_h, file_w] = shape.as_slice() else {
        return Err(bad(format!("`{FIELDS}` has shape {shape:?}; expected (time, channel, lat, lon)")));
    };
    if !matches!(fields.dtype().and_then(|t| t.to_descriptor()), Ok(hdf5::types::TypeDescriptor::Float(_))) {
        return Err(bad(format!("`{FIELDS}` does not hold floating-point values")));
    }
    if channels != CHANNELS.len() {
        return Err(bad(format!("`{FIELDS}` has {channels} channels; the ERA5 set has {}", CHANNELS.len())));
    }
    if file_h < h || file_w < w {
        return Err(bad(format!("`{FIELDS}` is {file_h} × {file_w}, smaller than the {h} × {w} the config crops (img_size)")));
    }
    Ok((fields, steps))
}

/// The visible `*.h5` files of `dir`, sorted by name like the tutorial's `sorted(glob(...))`.
fn h5_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let visible = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.'));
        if visible && path.extension().is_some_and(|e| e == "h5") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(files: usize, steps: usize) -> YearFiles {
        YearFiles { key: "train_data_path", files: (0..files).map(|i| PathBuf::from(format!("{i}.h5"))).collect(), steps, crop: [2, 4] }
    }

    #[test]
    fn every_step_of_every_file_is_a_sample() {
        assert_eq!(set(2, 10).samples(), 20);
    }

    #[test]
    fn an_index_past_the_end_names_the_count() {
        let Err(Error::BadSample { field, message }) = set(1, 10).read(10, 1, 0) else { panic!("read past the end") };
        assert_eq!(field, "index");
        assert!(message.contains("10 samples (0 to 9)"), "{message}");
    }

    #[test]
    fn data_outside_the_roots_or_climbing_is_refused_by_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data/train")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        let roots = [std::fs::canonicalize(dir.path().join("data")).unwrap()];
        let open = |path: &str| YearFiles::open("train_data_path", path, dir.path(), &roots, [2, 4], 1).unwrap_err().to_string();
        assert!(open("elsewhere").contains("outside the data directories"), "{}", open("elsewhere"));
        assert!(open("data/../elsewhere").contains("climbs"), "{}", open("data/../elsewhere"));
        assert!(open("data/missing").contains("does not exist"), "{}", open("data/missing"));
        assert!(open("data/train").starts_with("train_data_path: `data/train` holds no .h5 files"), "{}", open("data/train"));
    }
}
