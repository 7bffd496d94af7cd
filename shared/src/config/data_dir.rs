//! Pointing a config at a dataset directory laid out the tutorial's way (`train/`, `valid/`,
//! `test/`, `stats/*.npy`, what `scalebook-train datagen` writes and what the ERA5 extract
//! holds), so callers need not know which six keys name its parts.

use super::TrainConfig;

/// The most bytes a statistics file (`stats/*.npy`) may have: a few numbers per channel. The
/// trainer refuses a larger one unread, and so does a server checking a launch.
pub const MAX_STATS_FILE_BYTES: u64 = 1 << 20;

/// What a data path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPathKind {
    /// A directory of HDF5 files.
    Directory,
    /// A small NumPy statistics file (per-channel means or standard deviations).
    StatsFile,
    /// The per-pixel time means (the climatology for anomaly scores): a large NumPy file the
    /// trainer does not read.
    Climatology,
}

/// Each data-path key, its place inside a dataset directory, its kind, and its field.
#[allow(clippy::type_complexity)]
const PARTS: [(&str, &str, DataPathKind, fn(&mut TrainConfig) -> &mut String); 6] = [
    ("train_data_path", "train", DataPathKind::Directory, |c| &mut c.train_data_path),
    ("valid_data_path", "valid", DataPathKind::Directory, |c| &mut c.valid_data_path),
    ("inf_data_path", "test", DataPathKind::Directory, |c| &mut c.inf_data_path),
    ("global_means_path", "stats/global_means.npy", DataPathKind::StatsFile, |c| &mut c.global_means_path),
    ("global_stds_path", "stats/global_stds.npy", DataPathKind::StatsFile, |c| &mut c.global_stds_path),
    ("time_means_path", "stats/time_means.npy", DataPathKind::Climatology, |c| &mut c.time_means_path),
];

/// The six data-path overrides (`key=value`, for [`TrainConfig::apply_overrides`] or the
/// trainer's `--set`) that point a config at the dataset in `dir`.
pub fn data_dir_overrides(dir: &str) -> Vec<String> {
    let dir = dir.trim_end_matches('/');
    PARTS.map(|(key, part, _, _)| format!("{key}={dir}/{part}")).into()
}

impl TrainConfig {
    /// Points every data path at the dataset in `dir` (a cluster's `data_root`), setting the
    /// fields directly: a directory name is never read as YAML.
    pub fn set_data_dir(&mut self, dir: &str) {
        let dir = dir.trim_end_matches('/');
        for (_, part, _, field) in PARTS {
            *field(self) = format!("{dir}/{part}");
        }
    }

    /// Every data path of the config: its key, what it names, and the path.
    pub fn data_paths(&self) -> Vec<(&'static str, DataPathKind, String)> {
        let mut config = self.clone();
        PARTS.iter().map(|(key, _, kind, field)| (*key, *kind, field(&mut config).clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_data_path_of_the_config_points_into_the_directory() {
        let mut by_overrides = TrainConfig::default();
        by_overrides.apply_overrides(&data_dir_overrides("/scratch/era5/")).unwrap();
        assert_eq!(by_overrides.train_data_path, "/scratch/era5/train");
        assert_eq!(by_overrides.valid_data_path, "/scratch/era5/valid");
        assert_eq!(by_overrides.inf_data_path, "/scratch/era5/test");
        assert_eq!(by_overrides.global_means_path, "/scratch/era5/stats/global_means.npy");
        assert_eq!(by_overrides.global_stds_path, "/scratch/era5/stats/global_stds.npy");
        assert_eq!(by_overrides.time_means_path, "/scratch/era5/stats/time_means.npy");
        let mut direct = TrainConfig::default();
        direct.set_data_dir("/scratch/era5");
        assert_eq!(direct, by_overrides);
    }
}
