//! The generator: the tutorial's on-disk format, statistics from the training years,
//! determinism, and data a model can learn.

use std::path::PathBuf;

use scalebook_trainer::Error;
use scalebook_trainer::data::npy;
use scalebook_trainer::data::synth::{self, SynthConfig};

use crate::common::{file_stats, generate, read_fields, small, temp_dir};

#[test]
fn generator_writes_the_tutorials_layout() {
    let dir = temp_dir("layout");
    let config = small(2, 6, 8, 16);
    let written = generate(dir.path(), &config);
    let expected: Vec<PathBuf> = ["train/1990.h5", "train/1991.h5", "valid/1992.h5", "test/1993.h5"]
        .iter()
        .chain(&[synth::GLOBAL_MEANS, synth::GLOBAL_STDS, synth::TIME_MEANS])
        .map(|file| dir.path().join(file))
        .collect();
    assert_eq!(written, expected);
    for path in &expected[..4] {
        let fields = hdf5::File::open(path).unwrap().dataset("fields").unwrap();
        assert_eq!(fields.shape(), vec![6, 20, 8, 16], "{}", path.display());
        assert!(fields.dtype().unwrap().is::<f32>());
        assert_eq!(fields.chunk(), Some(vec![1, 20, 8, 16]), "one time step per chunk");
        assert!(fields.filters().is_empty(), "no filters: any HDF5 reader can read it");
    }
    assert!(!dir.path().join("train/1990.h5.partial").exists());
    npy::read_f32(&dir.path().join(synth::GLOBAL_MEANS), &[1, 20, 1, 1]).unwrap();
    npy::read_f32(&dir.path().join(synth::GLOBAL_STDS), &[1, 20, 1, 1]).unwrap();
    npy::read_f32(&dir.path().join(synth::TIME_MEANS), &[1, 20, 8, 16]).unwrap();
}

#[test]
fn statistics_are_those_of_the_training_years() {
    let dir = temp_dir("stats");
    let config = small(2, 5, 6, 12);
    generate(dir.path(), &config);
    let years: Vec<Vec<f32>> = ["train/1990.h5", "train/1991.h5"].iter().map(|f| read_fields(&dir.path().join(f)).1).collect();
    let plane = 6 * 12;
    let stats = file_stats(dir.path());
    let time_means = npy::read_f32(&dir.path().join(synth::TIME_MEANS), &[1, 20, 6, 12]).unwrap();
    for c in 0..20 {
        let values: Vec<f64> =
            years.iter().flat_map(|year| year.chunks_exact(plane).skip(c).step_by(20).flatten()).map(|&v| f64::from(v)).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1.0);
        assert!(close(f64::from(stats.means()[c]), mean), "channel {c}: mean {} vs {mean}", stats.means()[c]);
        assert!(close(f64::from(stats.stds()[c]), std), "channel {c}: std {} vs {std}", stats.stds()[c]);
        let pixel = 13;
        let steps = years.iter().flat_map(|year| year.chunks_exact(20 * plane)).count() as f64;
        let pixel_mean: f64 =
            years.iter().flat_map(|year| year.chunks_exact(20 * plane)).map(|step| f64::from(step[c * plane + pixel])).sum::<f64>() / steps;
        assert!(close(f64::from(time_means[c * plane + pixel]), pixel_mean), "time mean of channel {c}");
    }
}

#[test]
fn generator_is_deterministic_for_a_seed() {
    let (a, b, c) = (temp_dir("det-a"), temp_dir("det-b"), temp_dir("det-c"));
    let config = small(1, 4, 6, 12);
    let files = generate(a.path(), &config);
    generate(b.path(), &config);
    generate(c.path(), &SynthConfig { seed: 8, ..config });
    for file in &files {
        let relative = file.strip_prefix(a.path()).unwrap();
        let bytes = std::fs::read(file).unwrap();
        assert_eq!(bytes, std::fs::read(b.path().join(relative)).unwrap(), "{}", relative.display());
        assert_ne!(bytes, std::fs::read(c.path().join(relative)).unwrap(), "another seed, {}", relative.display());
    }
}

#[test]
fn years_are_different_realisations() {
    let dir = temp_dir("years");
    generate(dir.path(), &small(2, 4, 6, 12));
    let (_, first) = read_fields(&dir.path().join("train/1990.h5"));
    let (_, second) = read_fields(&dir.path().join("train/1991.h5"));
    assert_ne!(first, second);
}

#[test]
fn generator_keeps_an_existing_dataset_unless_forced() {
    let dir = temp_dir("force");
    generate(dir.path(), &small(3, 4, 6, 12));
    let err = synth::generate(dir.path(), &small(1, 4, 6, 12), false, &mut |_| {}).unwrap_err();
    assert!(err.is_user_input());
    assert!(err.to_string().contains("--force"), "{err}");

    synth::generate(dir.path(), &small(1, 4, 6, 12), true, &mut |_| {}).unwrap();
    let mut train: Vec<_> = std::fs::read_dir(dir.path().join("train")).unwrap().map(|e| e.unwrap().file_name()).collect();
    train.sort();
    assert_eq!(train, vec!["1990.h5"], "the stale years 1991 and 1992 are gone");
    assert!(dir.path().join("valid/1991.h5").exists() && !dir.path().join("valid/1993.h5").exists());
}

#[test]
fn generator_rejects_unusable_sizes() {
    let dir = temp_dir("sizes");
    for config in [small(0, 4, 6, 12), small(1, 2, 6, 12), small(1, 4, 2, 12), small(1, 4, 6, 3)] {
        let err = synth::generate(dir.path(), &config, false, &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::DataSetting(_)) && err.is_user_input(), "{config:?}: {err}");
    }
}

#[test]
fn fields_have_physical_magnitudes() {
    let dir = temp_dir("magnitudes");
    generate(dir.path(), &small(1, 8, 30, 60));
    let stats = file_stats(dir.path());
    let mean = |c: usize| f64::from(stats.means()[c]);
    for (c, name, low, high) in [
        (2, "t2m", 260.0, 295.0),
        (3, "sp", 8.5e4, 1.02e5),
        (4, "msl", 9.9e4, 1.03e5),
        (5, "t850", 250.0, 285.0),
        (8, "z1000", 0.0, 2.0e3),
        (11, "z850", 1.1e4, 1.5e4),
        (14, "z500", 5.0e4, 5.8e4),
        (15, "t500", 235.0, 265.0),
        (16, "z50", 1.85e5, 2.1e5),
        (17, "r500", 10.0, 90.0),
        (18, "r850", 10.0, 90.0),
        (19, "tcwv", 5.0, 50.0),
    ] {
        assert!((low..high).contains(&mean(c)), "{name} mean {}", mean(c));
    }
    for (c, name) in [(0, "u10"), (1, "v10"), (6, "u1000"), (9, "u850"), (12, "u500"), (13, "v500")] {
        assert!(mean(c).abs() < 15.0 && (0.5..30.0).contains(&f64::from(stats.stds()[c])), "{name}");
    }
    // Westerlies aloft: the zonal wind grows with height in the mean.
    assert!(mean(12) > mean(9) && mean(9) > mean(6), "u500 {} u850 {} u1000 {}", mean(12), mean(9), mean(6));
    let (_, values) = read_fields(&dir.path().join("train/1990.h5"));
    let t2m = values.chunks_exact(30 * 60).skip(2).step_by(20).flatten();
    let (low, high) = t2m.fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    assert!(low > 200.0 && high < 320.0, "t2m range {low}..{high}");
}

/// Weather systems drift east: at mid-latitudes, a later z1000 field matches the earlier one
/// shifted east better than unshifted or shifted west.
#[test]
fn weather_systems_travel_east() {
    let dir = temp_dir("travel");
    let (h, w, lag) = (36, 72, 4);
    generate(dir.path(), &small(1, 24, h, w));
    let (_, values) = read_fields(&dir.path().join("train/1990.h5"));
    let z1000 = |t: usize, j: usize, i: usize| f64::from(values[((t * 20 + 8) * h + j) * w + i % w]);
    // Rows between 35 and 55 degrees north and south (5-degree rows from the north pole).
    let rows: Vec<usize> = (7..11).chain(25..29).collect();
    let mismatch = |shift: usize| -> f64 {
        let mut total = 0.0;
        for t in 0..24 - lag {
            for &j in &rows {
                total += (0..w).map(|i| (z1000(t + lag, j, i + shift) - z1000(t, j, i)).powi(2)).sum::<f64>();
            }
        }
        total
    };
    let best = (0..w).min_by(|&a, &b| mismatch(a).total_cmp(&mismatch(b))).unwrap();
    // z1000(t + lag) at column i + shift equals z1000(t) at column i: shift > 0 is eastward.
    assert!((1..=4).contains(&best), "best shift {best} columns over {lag} steps");
}

/// The next step is predictable from the current one (a model can learn the dynamics), while
/// another year at the same time of year is a much worse guess: a check that fails on noise
/// (both differences alike) and on years that repeat each other (no difference at all).
#[test]
fn steps_are_predictable_and_years_are_not() {
    let dir = temp_dir("learnable");
    // A year long enough that the seasonal cycle, which persistence cannot follow, changes
    // slowly from one step to the next, as it does in real data.
    let (steps, h, w) = (128, 24, 48);
    generate(dir.path(), &small(2, steps, h, w));
    let plane = h * w;
    let stds = file_stats(dir.path()).stds().to_vec();
    let year = |file: &str| read_fields(&dir.path().join(file)).1;
    let (first, second) = (year("train/1990.h5"), year("train/1991.h5"));
    let step = |values: &[f32], t: usize, c: usize| {
        let start = (t * 20 + c) * plane;
        values[start..start + plane].iter().map(|&v| f64::from(v) / f64::from(stds[c])).collect::<Vec<_>>()
    };
    let mean_square = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len() as f64;
    let mut moved = 0.0;
    for c in 0..20 {
        let step_change: f64 =
            (0..steps - 1).map(|t| mean_square(&step(&first, t, c), &step(&first, t + 1, c))).sum::<f64>() / (steps - 1) as f64;
        let across_years: f64 = (0..steps).map(|t| mean_square(&step(&first, t, c), &step(&second, t, c))).sum::<f64>() / steps as f64;
        assert!(
            step_change < 0.3 * across_years,
            "channel {c}: one step changes by {step_change:.4}, another year differs by {across_years:.4}"
        );
        moved += step_change / 20.0;
    }
    assert!(moved > 0.005, "the fields hardly move: {moved:.5} per step");
}
