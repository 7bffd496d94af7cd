//! Per-channel normalisation statistics: the tutorial's `global_means.npy` and
//! `global_stds.npy`, each of shape (1, C, 1, 1) (FourCastNet's layout, which the tutorial
//! indexes with `[0]` and broadcasts over H and W).

use std::path::Path;

use super::npy;
use crate::Error;

#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    means: Vec<f32>,
    stds: Vec<f32>,
}

impl Stats {
    /// Checks that there is one mean and one positive standard deviation per channel, since a
    /// zero or non-finite deviation would silently turn every sample into inf or NaN.
    pub fn new(means: Vec<f32>, stds: Vec<f32>) -> Result<Stats, Error> {
        if means.len() != stds.len() {
            return Err(Error::DataSetting(format!("{} channel means but {} standard deviations", means.len(), stds.len())));
        }
        check_means(&means).and_then(|()| check_stds(&stds)).map_err(Error::DataSetting)?;
        Ok(Stats { means, stds })
    }

    /// Loads both files and checks their shape is (1, `channels`, 1, 1).
    pub fn load(means_path: &Path, stds_path: &Path, channels: usize) -> Result<Stats, Error> {
        let shape = [1, channels, 1, 1];
        let in_file = |path: &Path| {
            let path = path.to_owned();
            move |message| Error::Data { path, message }
        };
        let means = npy::read_f32(means_path, &shape)?;
        check_means(&means).map_err(in_file(means_path))?;
        let stds = npy::read_f32(stds_path, &shape)?;
        check_stds(&stds).map_err(in_file(stds_path))?;
        Ok(Stats { means, stds })
    }

    pub fn channels(&self) -> usize {
        self.means.len()
    }

    pub fn means(&self) -> &[f32] {
        &self.means
    }

    pub fn stds(&self) -> &[f32] {
        &self.stds
    }

    /// `(x − mean_c) / std_c` in place over a (C, H, W) sample, as the tutorial does in numpy,
    /// computed as `(x − mean_c) · (1 / std_c)`: within a rounding of the division, and a
    /// multiply is several times cheaper than a divide in this loop, which touches every value
    /// the loader delivers.
    pub fn normalise(&self, sample: &mut [f32]) {
        let plane = sample.len() / self.channels().max(1);
        for ((values, &mean), &std) in sample.chunks_exact_mut(plane).zip(&self.means).zip(&self.stds) {
            let scale = 1.0 / std;
            for value in values {
                *value = (*value - mean) * scale;
            }
        }
    }
}

fn check_means(means: &[f32]) -> Result<(), String> {
    match means.iter().position(|m| !m.is_finite()) {
        Some(c) => Err(format!("the mean of channel {c} is {}", means[c])),
        None => Ok(()),
    }
}

fn check_stds(stds: &[f32]) -> Result<(), String> {
    match stds.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
        Some(c) => Err(format!("the standard deviation of channel {c} is {}; it must be positive", stds[c])),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_mismatched_and_degenerate_statistics() {
        assert!(Stats::new(vec![0.0; 3], vec![1.0; 2]).is_err());
        let zero = Stats::new(vec![0.0; 3], vec![1.0, 0.0, 1.0]).unwrap_err().to_string();
        assert!(zero.contains("channel 1"), "{zero}");
        assert!(Stats::new(vec![f32::NAN], vec![1.0]).is_err());
        assert!(Stats::new(vec![0.0], vec![f32::INFINITY]).is_err());
    }

    #[test]
    fn normalises_each_channel_with_its_own_statistics() {
        let stats = Stats::new(vec![10.0, -1.0], vec![2.0, 0.5]).unwrap();
        let mut sample = vec![10.0, 12.0, 8.0, -1.0, -0.5, 0.0];
        stats.normalise(&mut sample);
        assert_eq!(sample, vec![0.0, 1.0, -1.0, 0.0, 1.0, 2.0]);
    }
}
