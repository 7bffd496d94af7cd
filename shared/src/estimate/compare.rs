//! An estimate beside what a run measured: what a finished run's view shows, and how the
//! tutorial's published figures are checked.

use serde::{Deserialize, Serialize};

use super::Estimate;

/// How far a run's measurement may part from its estimate before it is called off: the estimate
/// is checked to 25% against the tutorial's figures and this machine's runs (BENCHMARKS.md).
pub const STATED_ERROR: f64 = 0.25;

/// What a run measured; any subset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub samples_per_sec: Option<f64>,
    pub step_time_s: Option<f64>,
    /// NVML's device-used memory after the forward pass, in GiB, as the tutorial logs it.
    pub memory_gb: Option<f64>,
}

/// One quantity, estimated and measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub quantity: &'static str,
    pub unit: &'static str,
    pub estimated: f64,
    pub measured: f64,
    /// `(estimated − measured) / measured`, in percent: positive when the estimate is high.
    pub error_pct: f64,
}

impl Comparison {
    pub fn new(quantity: &'static str, unit: &'static str, estimated: f64, measured: f64) -> Comparison {
        Comparison { quantity, unit, estimated, measured, error_pct: (estimated - measured) / measured * 100.0 }
    }
}

impl Estimate {
    /// A row for every quantity the run measured.
    pub fn compare(&self, measured: &Measured) -> Vec<Comparison> {
        [
            ("samples_per_sec", "samples/s", self.samples_per_sec, measured.samples_per_sec),
            ("step_time_s", "s", self.step_time_s, measured.step_time_s),
            ("memory_gb", "GiB", self.memory_gb.total, measured.memory_gb),
        ]
        .into_iter()
        .filter_map(|(quantity, unit, estimated, measured)| Some(Comparison::new(quantity, unit, estimated, measured?)))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_relative_to_the_measurement() {
        let high = Comparison::new("samples_per_sec", "samples/s", 50.0, 40.0);
        assert!((high.error_pct - 25.0).abs() < 1e-12);
        let low = Comparison::new("memory_gb", "GiB", 30.0, 40.0);
        assert!((low.error_pct + 25.0).abs() < 1e-12);
    }
}
