//! Unusable data: every case a clear, user-fixable error naming the file.

use std::path::Path;

use scalebook_trainer::Error;
use scalebook_trainer::data::{Era5Dataset, Stats, npy};

use crate::common::{labelled_years, raw_stats, temp_dir, write_h5};

fn open_error(dir: &Path, img: [usize; 2], dt: usize) -> Error {
    match Era5Dataset::open(dir, img, 20, dt, None, raw_stats(20)) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(err) => err,
    }
}

fn assert_names(err: &Error, path: &Path, words: &[&str]) {
    let text = err.to_string();
    assert!(err.is_user_input(), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text} should name {}", path.display());
    for word in words {
        assert!(text.contains(word), "{text} should say {word:?}");
    }
}

#[test]
fn missing_or_empty_data_directories_are_reported() {
    let dir = temp_dir("empty");
    let missing = dir.path().join("nowhere");
    assert_names(&open_error(&missing, [2, 3], 1), &missing, &["does not exist"]);
    std::fs::write(dir.path().join("notes.txt"), "not data").unwrap();
    std::fs::write(dir.path().join(".hidden.h5"), "").unwrap();
    assert_names(&open_error(dir.path(), [2, 3], 1), dir.path(), &["no .h5 files"]);
}

/// A directory with a good year and then `write`'s file, which must be reported in `words`.
/// The bad file sorts after the good one: every file is checked, not only the first.
fn assert_bad_year(name: &str, write: impl Fn(&Path), words: &[&str]) {
    let dir = temp_dir(name);
    write_h5(&dir.path().join("1990.h5"), "fields", [4, 20, 8, 9], |_| 1.0);
    let bad = dir.path().join("1991.h5");
    write(&bad);
    assert_names(&open_error(dir.path(), [2, 3], 1), &bad, words);
}

fn write_array<D: ndarray::Dimension>(path: &Path, data: &ndarray::Array<impl hdf5::H5Type, D>) {
    let file = hdf5::File::create(path).unwrap();
    file.new_dataset_builder().with_data(data).create("fields").unwrap();
}

#[test]
fn files_that_are_not_the_tutorials_format_are_reported() {
    assert_bad_year("not-hdf5", |p| std::fs::write(p, "plain text").unwrap(), &["cannot open as HDF5"]);
    assert_bad_year("no-fields", |p| write_h5(p, "other", [4, 20, 2, 3], |_| 0.0), &["no dataset `fields`", "other"]);
    assert_bad_year("channels", |p| write_h5(p, "fields", [4, 19, 2, 3], |_| 0.0), &["19 channels", "20"]);
    assert_bad_year("small", |p| write_h5(p, "fields", [4, 20, 1, 9], |_| 0.0), &["1 x 9", "2 x 3"]);
    let three_d = ndarray::Array3::<f32>::zeros((4, 20, 6));
    assert_bad_year("three-d", |p| write_array(p, &three_d), &["4 dimensions", "[4, 20, 6]"]);
    let integers = ndarray::Array4::<i32>::zeros((4, 20, 2, 3));
    assert_bad_year("integers", |p| write_array(p, &integers), &["float32"]);
}

#[test]
fn years_too_short_for_dt_are_reported() {
    let dir = temp_dir("dt");
    let year = dir.path().join("1990.h5");
    write_h5(&year, "fields", [2, 20, 2, 3], |_| 0.0);
    assert_names(&open_error(dir.path(), [2, 3], 2), &year, &["2 time steps", "dt = 2"]);
    assert!(matches!(open_error(dir.path(), [2, 3], 0), Error::DataSetting(_)));
}

#[test]
fn a_year_shorter_than_the_first_is_reported() {
    let dir = temp_dir("short-year");
    write_h5(&dir.path().join("1990.h5"), "fields", [6, 20, 2, 3], |_| 0.0);
    let short = dir.path().join("1991.h5");
    write_h5(&short, "fields", [5, 20, 2, 3], |_| 0.0);
    assert_names(&open_error(dir.path(), [2, 3], 1), &short, &["5 time steps", "6"]);
}

#[test]
fn unusable_statistics_are_reported() {
    let dir = temp_dir("bad-stats");
    let (means, stds) = (dir.path().join("means.npy"), dir.path().join("stds.npy"));
    npy::write_f32(&means, &[1, 20, 1, 1], &[0.0; 20]).unwrap();

    let err = Stats::load(&means, &stds, 20).unwrap_err();
    assert_names(&err, &stds, &["cannot read"]);

    npy::write_f32(&stds, &[1, 19, 1, 1], &[1.0; 19]).unwrap();
    assert_names(&Stats::load(&means, &stds, 20).unwrap_err(), &stds, &["[1, 20, 1, 1]", "[1, 19, 1, 1]"]);
    npy::write_f32(&stds, &[20], &[1.0; 20]).unwrap();
    assert_names(&Stats::load(&means, &stds, 20).unwrap_err(), &stds, &["[1, 20, 1, 1]", "[20]"]);

    let mut zero = [1.0f32; 20];
    zero[4] = 0.0;
    npy::write_f32(&stds, &[1, 20, 1, 1], &zero).unwrap();
    assert_names(&Stats::load(&means, &stds, 20).unwrap_err(), &stds, &["channel 4"]);

    std::fs::write(&means, "not numpy").unwrap();
    assert_names(&Stats::load(&means, &stds, 20).unwrap_err(), &means, &["not a NumPy"]);

    let twenty_one = Stats::new(vec![0.0; 21], vec![1.0; 21]).unwrap();
    labelled_years(dir.path());
    let err = Era5Dataset::open(dir.path(), [2, 3], 20, 1, None, twenty_one).err().unwrap();
    assert!(err.is_user_input() && err.to_string().contains("21 channels"), "{err}");
}
