//! The dataset: the tutorial's index rule at the boundaries, the limit, the crop and the
//! normalisation.

use scalebook_trainer::Error;
use scalebook_trainer::data::Era5Dataset;

use crate::common::{file_stats, generate, labelled_years, raw_stats, small, temp_dir, write_h5};

/// (year, input step, target step) of sample `index`, read back from the labelled values.
fn steps_of(dataset: &Era5Dataset, index: usize) -> (usize, usize, usize) {
    let sample = dataset.get(index).unwrap();
    let plane = 2 * 3;
    for (c, values) in sample.input.chunks_exact(plane).enumerate() {
        assert!(values.iter().all(|v| (v - values[0]).abs() < 1e-3 && ((v * 100.0).round() as usize) % 100 == c));
    }
    let label = |v: f32| (v.floor() as usize / 1000, v.floor() as usize % 1000);
    let ((year, input), (target_year, target)) = (label(sample.input[0]), label(sample.target[0]));
    assert_eq!(year, target_year);
    (year, input, target)
}

#[test]
fn index_rule_matches_the_tutorial_at_the_boundaries() {
    let dir = temp_dir("index");
    labelled_years(dir.path());
    let open = |dt, limit| Era5Dataset::open(dir.path(), [2, 3], 20, dt, limit, raw_stats(20)).unwrap();

    let dt1 = open(1, None);
    assert_eq!((dt1.len(), dt1.n_per_year()), (30, 10));
    // local = idx % 10 % 9, then 0 -> 1: steps 0, 1 and the last all start at step 1.
    for (index, expected) in [
        (0, (0, 1, 2)),
        (1, (0, 1, 2)),
        (8, (0, 8, 9)),
        (9, (0, 1, 2)),
        (10, (1, 1, 2)),
        (18, (1, 8, 9)),
        (19, (1, 1, 2)),
        (20, (2, 1, 2)),
        (29, (2, 1, 2)),
    ] {
        assert_eq!(steps_of(&dt1, index), expected, "dt 1, index {index}");
        assert_eq!(dt1.locate(index).unwrap(), (expected.0, expected.1));
    }

    let dt2 = open(2, None);
    // local = idx % 10 % 8, then 0 -> 2 and 1 -> 3.
    for (index, expected) in [
        (0, (0, 2, 4)),
        (1, (0, 3, 5)),
        (2, (0, 2, 4)),
        (7, (0, 7, 9)),
        (8, (0, 2, 4)),
        (9, (0, 3, 5)),
        (10, (1, 2, 4)),
        (17, (1, 7, 9)),
        (29, (2, 3, 5)),
    ] {
        assert_eq!(steps_of(&dt2, index), expected, "dt 2, index {index}");
    }
}

#[test]
fn limit_truncates_the_index_space() {
    let dir = temp_dir("limit");
    labelled_years(dir.path());
    let open = |limit| Era5Dataset::open(dir.path(), [2, 3], 20, 1, limit, raw_stats(20)).unwrap();
    let limited = open(Some(13));
    assert_eq!(limited.len(), 13);
    assert_eq!(steps_of(&limited, 12), (1, 2, 3));
    assert!(matches!(limited.get(13), Err(Error::SampleIndex { index: 13, len: 13 })));
    assert_eq!(open(Some(500)).len(), 30);
}

#[test]
fn reads_the_top_left_crop() {
    let dir = temp_dir("crop");
    write_h5(&dir.path().join("1990.h5"), "fields", [3, 20, 12, 20], |[t, c, y, x]| (t * 10_000 + c * 1000 + y * 100 + x) as f32);
    let dataset = Era5Dataset::open(dir.path(), [8, 16], 20, 1, None, raw_stats(20)).unwrap();
    let sample = dataset.get(0).unwrap();
    assert_eq!(sample.input.len(), 20 * 8 * 16);
    for (i, (input, target)) in sample.input.iter().zip(&sample.target).enumerate() {
        let (c, y, x) = (i / 128, i / 16 % 8, i % 16);
        assert_eq!(*input, (10_000 + c * 1000 + y * 100 + x) as f32);
        assert_eq!(*target, (20_000 + c * 1000 + y * 100 + x) as f32);
    }
}

#[test]
fn normalised_training_data_has_zero_mean_and_unit_deviation() {
    let dir = temp_dir("normalised");
    let (h, w) = (16, 32);
    generate(dir.path(), &small(2, 16, h, w));
    let dataset = Era5Dataset::open(&dir.path().join("train"), [h, w], 20, 1, None, file_stats(dir.path())).unwrap();
    let mut sums = [(0.0f64, 0.0f64); 20];
    for index in 0..dataset.len() {
        let sample = dataset.get(index).unwrap();
        for (sum, values) in sums.iter_mut().zip(sample.input.chunks_exact(h * w)) {
            for &v in values {
                *sum = (sum.0 + f64::from(v), sum.1 + f64::from(v).powi(2));
            }
        }
    }
    let count = (dataset.len() * h * w) as f64;
    for (c, (sum, square)) in sums.iter().enumerate() {
        let mean = sum / count;
        let std = (square / count - mean * mean).sqrt();
        assert!(mean.abs() < 0.1 && (std - 1.0).abs() < 0.1, "channel {c}: mean {mean:.3} std {std:.3}");
    }
}

/// One year of 6 steps of labelled values, stored as `layout` says.
fn year_stored(dir: &std::path::Path, layout: &str) {
    let data = ndarray::Array4::from_shape_fn((6, 20, 12, 20), |(t, c, y, x)| (t * 10_000 + c * 1000 + y * 100 + x) as f32);
    let file = hdf5::File::create(dir.join("1990.h5")).unwrap();
    let builder = file.new_dataset_builder().with_data(&data);
    match layout {
        "contiguous" => builder.create("fields"),
        "step chunks" => builder.chunk((1, 20, 12, 20)).create("fields"),
        "compressed" => builder.chunk((1, 20, 12, 20)).deflate(1).create("fields"),
        "tile chunks" => builder.chunk((2, 4, 6, 5)).create("fields"),
        _ => unreachable!(),
    }
    .unwrap();
}

#[test]
fn plain_layouts_are_read_directly_and_every_layout_reads_the_same() {
    let stats = || scalebook_trainer::data::Stats::new((0..20).map(|c| c as f32).collect(), vec![3.0; 20]).unwrap();
    // A crop as wide as the file (a run of bytes per channel), a narrower one (a run per row),
    // and the whole plane (one run per time step).
    for crop in [[8, 20], [8, 16], [12, 20]] {
        let mut samples = Vec::new();
        for (layout, direct) in [("contiguous", true), ("step chunks", true), ("compressed", false), ("tile chunks", false)] {
            let dir = temp_dir("layouts");
            year_stored(dir.path(), layout);
            let dataset = Era5Dataset::open(dir.path(), crop, 20, 1, None, stats()).unwrap();
            assert_eq!(dataset.reads_directly(), direct, "{layout}");
            samples.push((layout, (0..dataset.len()).map(|i| dataset.get(i).unwrap()).collect::<Vec<_>>()));
        }
        let (first, expected) = &samples[0];
        let (c, y, x) = (3, crop[0] - 1, crop[1] - 1);
        let raw = (2 * 10_000 + c * 1000 + y * 100 + x) as f32;
        let value = expected[0].target[(c * crop[0] + y) * crop[1] + x];
        assert!((value - (raw - c as f32) / 3.0).abs() <= 1e-3 * value.abs(), "{crop:?}: {value}");
        for (layout, read) in &samples[1..] {
            assert_eq!(read, expected, "{layout} and {first} differ at crop {crop:?}");
        }
    }
}

#[test]
fn a_file_cut_short_after_opening_is_a_read_error_not_garbage() {
    let dir = temp_dir("cut-short");
    year_stored(dir.path(), "step chunks");
    let dataset = Era5Dataset::open(dir.path(), [12, 20], 20, 1, None, raw_stats(20)).unwrap();
    assert!(dataset.reads_directly());
    let path = dir.path().join("1990.h5");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(std::fs::metadata(&path).unwrap().len() / 2).unwrap();
    let err = dataset.get(4).unwrap_err();
    assert!(err.is_user_input() && err.to_string().contains("1990.h5") && err.to_string().contains("time step"), "{err}");
}
