//! Pointing a config at a dataset directory laid out the tutorial's way (`train/`, `valid/`,
//! `test/`, `stats/*.npy`, what `scalebook-train datagen` writes and what the ERA5 extract
//! holds), so callers need not know which six keys name its parts.

/// The six data-path overrides (`key=value`, for [`super::TrainConfig::apply_overrides`] or
/// the trainer's `--set`) that point a config at the dataset in `dir`.
pub fn data_dir_overrides(dir: &str) -> Vec<String> {
    let dir = dir.trim_end_matches('/');
    [
        ("train_data_path", "train"),
        ("valid_data_path", "valid"),
        ("inf_data_path", "test"),
        ("global_means_path", "stats/global_means.npy"),
        ("global_stds_path", "stats/global_stds.npy"),
        ("time_means_path", "stats/time_means.npy"),
    ]
    .map(|(key, part)| format!("{key}={dir}/{part}"))
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    #[test]
    fn every_data_path_of_the_config_points_into_the_directory() {
        let mut config = TrainConfig::default();
        config.apply_overrides(&data_dir_overrides("/scratch/era5/")).unwrap();
        assert_eq!(config.train_data_path, "/scratch/era5/train");
        assert_eq!(config.valid_data_path, "/scratch/era5/valid");
        assert_eq!(config.inf_data_path, "/scratch/era5/test");
        assert_eq!(config.global_means_path, "/scratch/era5/stats/global_means.npy");
        assert_eq!(config.global_stds_path, "/scratch/era5/stats/global_stds.npy");
        assert_eq!(config.time_means_path, "/scratch/era5/stats/time_means.npy");
    }
}
