//! This machine as a step estimate sees it, for runs whose ranks compute on CPU cores: the
//! rates a rank reaches with a given number of threads, measured once by the trainer
//! (`scalebook-train machine`, libtorch's own kernels at the model's shapes) and cached, so
//! that local runs get a prediction from the same model as GPU runs.

use serde::{Deserialize, Serialize};

/// The file a measurement is cached in (in the runs directory).
pub const FILE: &str = "machine.json";

/// The embedding widths the matrix-multiply rate is measured at: the CPU configs' (cpu_tiny
/// 48, cpu_short 128) and the tutorial's (384). A config between them takes the nearer one's
/// rate on a log scale.
pub const WIDTHS: [u64; 3] = [48, 128, 384];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineModel {
    /// Cores the trainer may use (`available_parallelism`).
    pub cores: usize,
    /// The machine's memory, GiB: what a run must fit in.
    pub memory_gb: f64,
    /// Resident memory of a trainer process once libtorch is loaded and a model built, GiB.
    pub process_baseline_gb: f64,
    /// One entry per thread count measured (1 and all cores).
    pub by_threads: Vec<ThreadRates>,
    /// Unix time of the measurement.
    pub measured_at: u64,
}

/// What one rank reaches with `threads` intra-op threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRates {
    pub threads: usize,
    /// float32 matrix-multiply GFLOP/s of a `[tokens, D] x [D, 4D]` product, one per
    /// [`WIDTHS`] entry.
    pub matmul_gflops: Vec<f64>,
    /// Bytes read plus bytes written per second by a large tensor copy, GB/s.
    pub copy_gb_per_s: f64,
    /// The cost of one tiny op (dispatch and call), µs: what a step of many small ops pays.
    pub op_overhead_us: f64,
}

impl MachineModel {
    /// The rates of the measured thread count nearest `threads` (from below where it can).
    pub fn rates(&self, threads: usize) -> Option<&ThreadRates> {
        self.by_threads.iter().filter(|r| r.threads <= threads.max(1)).max_by_key(|r| r.threads).or_else(|| self.by_threads.first())
    }
}

impl ThreadRates {
    /// The matrix-multiply rate for embedding width `width`, FLOP/s: the measured width
    /// nearest it on a log scale.
    pub fn matmul_flops(&self, width: u64) -> f64 {
        let nearest = WIDTHS
            .iter()
            .zip(&self.matmul_gflops)
            .min_by(|a, b| log_distance(*a.0, width).total_cmp(&log_distance(*b.0, width)))
            .map_or(0.0, |(_, rate)| *rate);
        nearest * 1e9
    }
}

fn log_distance(a: u64, b: u64) -> f64 {
    ((a.max(1) as f64).ln() - (b.max(1) as f64).ln()).abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> MachineModel {
        let rates = |threads, scale| ThreadRates {
            threads,
            matmul_gflops: vec![10.0 * scale, 40.0 * scale, 60.0 * scale],
            copy_gb_per_s: 8.0,
            op_overhead_us: 3.0,
        };
        MachineModel { cores: 4, memory_gb: 16.0, process_baseline_gb: 0.3, by_threads: vec![rates(1, 1.0), rates(4, 3.0)], measured_at: 0 }
    }

    #[test]
    fn a_rank_gets_the_rates_of_its_thread_count_or_the_next_below() {
        let m = model();
        assert_eq!(m.rates(1).unwrap().threads, 1);
        assert_eq!(m.rates(2).unwrap().threads, 1);
        assert_eq!(m.rates(4).unwrap().threads, 4);
        assert_eq!(m.rates(0).unwrap().threads, 1);
    }

    #[test]
    fn a_width_takes_the_nearest_measured_one_on_a_log_scale() {
        let r = model().rates(1).unwrap().clone();
        assert_eq!(r.matmul_flops(48), 10e9);
        assert_eq!(r.matmul_flops(100), 40e9);
        assert_eq!(r.matmul_flops(1024), 60e9);
        assert_eq!(r.matmul_flops(70), 10e9, "70 is nearer 48 than 128 on a log scale");
    }
}
