//! Pointing a config at a dataset directory laid out the tutorial's way (`train/`, `valid/`,
//! `test/`, `stats/*.npy`, what `scalebook-train datagen` writes and what the ERA5 extract
//! holds), so callers need not know which six keys name its parts.

use super::TrainConfig;

/// Each data-path key, its place inside a dataset directory, and its field.
#[allow(clippy::type_complexity)]
const PARTS: [(&str, &str, fn(&mut TrainConfig) -> &mut String); 6] = [
    ("train_data_path", "train", |c| &mut c.train_data_path),
    ("valid_data_path", "valid", |c| &mut c.valid_data_path),
    ("inf_data_path", "test", |c| &mut c.inf_data_path),
    ("global_means_path", "stats/global_means.npy", |c| &mut c.global_means_path),
    ("global_stds_path", "stats/global_stds.npy", |c| &mut c.global_stds_path),
    ("time_means_path", "stats/time_means.npy", |c| &mut c.time_means_path),
];

/// The six data-path overrides (`key=value`, for [`TrainConfig::apply_overrides`] or the
/// trainer's `--set`) that point a config at the dataset in `dir`.
pub fn data_dir_overrides(dir: &str) -> Vec<String> {
    let dir = dir.trim_end_matches('/');
    PARTS.map(|(key, part, _)| format!("{key}={dir}/{part}")).into()
}

impl TrainConfig {
    /// Points every data path at the dataset in `dir` (a cluster's `data_root`), setting the
    /// fields directly: a directory name is never read as YAML.
    pub fn set_data_dir(&mut self, dir: &str) {
        let dir = dir.trim_end_matches('/');
        for (_, part, field) in PARTS {
            *field(self) = format!("{dir}/{part}");
        }
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
