//! A run's prediction beside what it measured: what the estimate said before the run started
//! (`prediction.json`) and what the run's own points say, quantity by quantity, with their
//! ratio and a plain verdict where they part by more than the estimate's stated error.

pub use scalebook_shared::estimate::STATED_ERROR;
use scalebook_shared::estimate::{Estimate, Prediction};
use scalebook_shared::metrics::tags;
use scalebook_shared::numbers::round_significant;
use scalebook_shared::protocol::Series;

/// One quantity, predicted and (once measured) measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub quantity: &'static str,
    pub unit: &'static str,
    pub predicted: f64,
    pub measured: Option<f64>,
}

impl Row {
    /// Measured over predicted.
    pub fn ratio(&self) -> Option<f64> {
        self.measured.filter(|_| self.predicted > 0.0).map(|m| m / self.predicted)
    }

    /// `None` within the stated error; otherwise what to make of it, in words.
    pub fn verdict(&self) -> Option<&'static str> {
        let ratio = self.ratio()?;
        if (ratio - 1.0).abs() <= STATED_ERROR {
            return None;
        }
        Some(match (self.quantity, ratio > 1.0) {
            (SAMPLES, false) | (STEP, true) => "slower than predicted: another load on the machine, or more threads than cores?",
            (SAMPLES, true) | (STEP, false) => "faster than predicted",
            (MEMORY, true) => "more than predicted",
            (MEMORY, false) => "less than predicted",
            // The model's FLOP rate moves with its speed, which is flagged already.
            _ => return None,
        })
    }
}

/// A figure to three significant digits, as people read measurements (`39.5`, `0.847`, `507`).
pub fn figure(x: f64) -> String {
    let rounded = round_significant(x, 3);
    let decimals = if rounded == 0.0 { 0 } else { (2 - rounded.abs().log10().floor() as i32).max(0) as usize };
    format!("{rounded:.decimals$}")
}

const SAMPLES: &str = "samples/s";
const STEP: &str = "step time";
const MEMORY: &str = "peak memory per rank";
const FLOPS: &str = "model FLOP/s per rank";
const MFU: &str = "share of the peak (MFU)";

/// Why a run on this machine may be slower than its prediction, where the launch saw a cause:
/// other work on the cores (a load above half of them before this run's own ranks started).
pub fn busy_machine(prediction: &Prediction) -> Option<String> {
    let load = prediction.load_at_launch?;
    (load.one_minute > 0.5 * load.cores as f64).then(|| {
        format!(
            "the machine was busy as the run launched (load {:.1} on {} cores), and a prediction assumes it idle",
            load.one_minute, load.cores
        )
    })
}

/// The rows for `prediction` and the run's `series`. Speed is measured from epoch 2 on, as the
/// tutorial reads its logs (epoch 1 pays for the start); memory is the peak so far; the model's
/// FLOP rate and its share of the peak follow from the speed.
pub fn rows(prediction: &Prediction, series: &[Series]) -> Vec<Row> {
    let estimate = &prediction.estimate;
    let buckets = |tag: &str| series.iter().find(|s| s.tag == tag).map(|s| s.buckets.as_slice()).unwrap_or_default();
    // A once-an-epoch tag's mean over epoch 2 on.
    let steady = |tag: &str| {
        let values: Vec<f64> = buckets(tag).iter().filter(|b| b.epoch >= 2).map(|b| b.last).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let samples = steady(tags::SAMPLES_PER_SEC);
    let peak = buckets(tags::run::PEAK_MEMORY).iter().map(|b| b.max).reduce(f64::max);
    let mut rows = vec![
        Row { quantity: SAMPLES, unit: "samples/s", predicted: estimate.samples_per_sec, measured: samples },
        Row {
            quantity: STEP,
            unit: "s",
            predicted: estimate.step_time_s,
            measured: samples.filter(|s| *s > 0.0).map(|s| estimate.global_batch_size as f64 / s),
        },
        Row { quantity: MEMORY, unit: "GiB", predicted: estimate.memory_gb.total, measured: peak },
    ];
    let predicted = model_flops(estimate, estimate.samples_per_sec);
    let measured = samples.map(|s| model_flops(estimate, s));
    rows.push(Row {
        quantity: FLOPS,
        unit: "TFLOP/s",
        predicted: predicted.tflops_per_rank,
        measured: measured.map(|m| m.tflops_per_rank),
    });
    if let Some(share) = predicted.share_of_peak {
        rows.push(Row { quantity: MFU, unit: "%", predicted: share, measured: measured.and_then(|m| m.share_of_peak) });
    }
    // The step as the estimate splits it: data (which it takes to keep up), compute, and each
    // group's collectives with their bytes.
    let time = &estimate.time;
    let compute = time.total_s - time.exposed_data_s - time.blocking_comm_s - time.exposed_overlapped_comm_s;
    rows.push(Row { quantity: DATA_WAIT, unit: "s", predicted: time.exposed_data_s, measured: steady(tags::split::DATA_WAIT) });
    rows.push(Row { quantity: COMPUTE, unit: "s", predicted: compute, measured: steady(tags::split::COMPUTE) });
    for traffic in estimate.by_group() {
        let Some(&(_, time_tag, bytes_tag)) = tags::split::GROUPS.iter().find(|g| g.0 == traffic.group.to_string()) else { continue };
        let Some(&(_, time_words, bytes_words)) = GROUP_ROWS.iter().find(|g| g.0 == traffic.group.to_string()) else { continue };
        rows.push(Row { quantity: time_words, unit: "s", predicted: traffic.seconds_per_step, measured: steady(time_tag) });
        let megabytes = steady(bytes_tag).map(|b| b / 1e6);
        rows.push(Row { quantity: bytes_words, unit: "MB", predicted: traffic.bytes_per_step as f64 / 1e6, measured: megabytes });
    }
    rows
}

/// What a throughput means in arithmetic: the model's FLOPs per second on one rank, and their
/// share of the hardware's peak (MFU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelFlops {
    pub tflops_per_rank: f64,
    /// Percent of the GPU's data-sheet rate, or of this machine's measured matmul rate; `None`
    /// where the estimate knows no peak.
    pub share_of_peak: Option<f64>,
}

/// The model's FLOP rate at `samples_per_sec` on the hardware `estimate` was made for, from
/// its FLOP count per sample.
pub fn model_flops(estimate: &Estimate, samples_per_sec: f64) -> ModelFlops {
    let tflops_per_rank = estimate.flops.per_sample_training * samples_per_sec / f64::from(estimate.world.max(1)) / 1e12;
    let peak = estimate.terms().iter().find(|t| t.name.starts_with("peak_tflops.")).map(|t| t.value).filter(|p| *p > 0.0);
    ModelFlops { tflops_per_rank, share_of_peak: peak.map(|peak| 100.0 * tflops_per_rank / peak) }
}

const DATA_WAIT: &str = "data wait per step";
const COMPUTE: &str = "compute per step";
/// Each group's rows, by its token.
const GROUP_ROWS: [(&str, &str, &str); 3] = [
    ("tp", "tp communication per step", "tp bytes per step"),
    ("cp", "cp communication per step", "cp bytes per step"),
    ("dp", "dp communication per step", "dp bytes per step"),
];

#[cfg(test)]
mod tests {
    use scalebook_shared::cluster::Clusters;
    use scalebook_shared::config::ConfigFile;
    use scalebook_shared::estimate::{EstimateOptions, estimate};
    use scalebook_shared::metrics::Bucket;

    use super::*;

    fn prediction() -> Prediction {
        let config = ConfigFile::parse(include_str!("../shipped/ViT.yaml")).unwrap().get("short").unwrap();
        let clusters = Clusters::parse(include_str!("../shipped/clusters.yaml")).unwrap();
        let cluster = clusters.get("perlmutter").unwrap();
        let layout = scalebook_shared::layout::Layout::new(config.sizes(1), &config.parallel_order).unwrap();
        let estimate = estimate(&config, &layout, cluster, &cluster.gpus[0], &EstimateOptions::default()).unwrap();
        Prediction { made_at: 0, basis: "a100-40gb on perlmutter".into(), estimate, load_at_launch: None }
    }

    fn series(tag: &str, by_epoch: &[(u64, f64)]) -> Series {
        let bucket = |&(epoch, value): &(u64, f64)| Bucket {
            first_step: epoch * 10,
            last_step: epoch * 10,
            first_wall: 0.0,
            last_wall: 0.0,
            epoch,
            min: value,
            max: value,
            last: value,
            count: 1,
            non_finite: 0,
        };
        Series { tag: tag.into(), buckets: by_epoch.iter().map(bucket).collect() }
    }

    #[test]
    fn figures_keep_three_significant_digits() {
        assert_eq!([figure(39.54), figure(0.84673), figure(506.64), figure(0.0), figure(2301.3)], ["39.5", "0.847", "507", "0", "2300"]);
    }

    #[test]
    fn nothing_is_measured_before_the_second_epoch() {
        let p = prediction();
        let rows = rows(&p, &[series(tags::SAMPLES_PER_SEC, &[(1, 3.0)])]);
        assert_eq!(rows.len(), 7, "five figures, then data wait and compute (one GPU has no collectives)");
        assert!(rows.iter().all(|r| r.measured.is_none() && r.ratio().is_none() && r.verdict().is_none()));
        assert_eq!(rows[0].predicted, p.estimate.samples_per_sec);
        assert_eq!(rows[2].predicted, p.estimate.memory_gb.total);
        // short reads its batches inside the step (0 workers): the estimate's wait for them.
        assert_eq!((rows[5].quantity, rows[5].predicted), ("data wait per step", p.estimate.time.exposed_data_s));
        assert!(rows[5].predicted > 0.0);
        assert!((rows[5].predicted + rows[6].predicted - p.estimate.step_time_s).abs() < 1e-12, "data wait and compute make the step");
    }

    #[test]
    fn the_steady_epochs_and_the_peak_are_set_beside_the_prediction() {
        let p = prediction();
        let predicted = p.estimate.samples_per_sec;
        // Epoch 1 (warm-up) is left out; epochs 2 and 3 average to the prediction.
        let speed = series(tags::SAMPLES_PER_SEC, &[(1, 0.1), (2, 0.9 * predicted), (3, 1.1 * predicted)]);
        let memory = series(tags::run::PEAK_MEMORY, &[(1, 7.0), (2, 9.5), (3, 9.0)]);
        let rows = rows(&p, &[speed, memory]);
        assert!((rows[0].ratio().unwrap() - 1.0).abs() < 1e-9 && rows[0].verdict().is_none());
        let step = p.estimate.global_batch_size as f64 / predicted;
        assert!((rows[1].measured.unwrap() - step).abs() < 1e-9);
        assert_eq!(rows[2].measured, Some(9.5));
        // The model's FLOP rate at the measured speed, per rank, and its share of the A100's
        // TF32 peak (156 TFLOP/s): what the estimate calls TFLOP/s per GPU.
        assert!((rows[3].predicted - p.estimate.tflops_per_gpu).abs() < 1e-9 * p.estimate.tflops_per_gpu);
        assert!((rows[3].ratio().unwrap() - 1.0).abs() < 1e-9);
        assert!((rows[4].predicted - 100.0 * p.estimate.tflops_per_gpu / 156.0).abs() < 1e-9, "{:?}", rows[4]);
    }

    #[test]
    fn the_step_is_split_as_the_estimate_splits_it_with_each_groups_traffic() {
        let mut config = ConfigFile::parse(include_str!("../shipped/ViT.yaml")).unwrap().get("mp").unwrap();
        config.tensor_parallel = 4;
        let clusters = Clusters::parse(include_str!("../shipped/clusters.yaml")).unwrap();
        let cluster = clusters.get("perlmutter").unwrap();
        let layout = scalebook_shared::layout::Layout::new(config.sizes(16), &config.parallel_order).unwrap();
        let estimate = estimate(&config, &layout, cluster, &cluster.gpus[0], &EstimateOptions::default()).unwrap();
        let tp = estimate.by_group().into_iter().find(|g| g.group.to_string() == "tp").unwrap();
        let p = Prediction { made_at: 0, basis: String::new(), estimate, load_at_launch: None };
        let measured = [
            series(tags::split::COMPUTE, &[(1, 9.0), (2, 0.5), (3, 0.7)]),
            series("Step split/tp communication", &[(2, 2.0 * tp.seconds_per_step)]),
            series("Comm bytes per step/tp", &[(2, tp.bytes_per_step as f64)]),
        ];
        let rows = rows(&p, &measured);
        let row = |q: &str| rows.iter().find(|r| r.quantity == q).unwrap_or_else(|| panic!("no {q} in {rows:?}"));
        assert_eq!(row("compute per step").measured, Some(0.6), "epochs 2 and 3");
        assert_eq!(row("data wait per step").predicted, 0.0);
        assert_eq!(row("data wait per step").ratio(), None, "nothing to divide by");
        assert!((row("tp communication per step").ratio().unwrap() - 2.0).abs() < 1e-9);
        assert!((row("tp bytes per step").ratio().unwrap() - 1.0).abs() < 1e-9);
        assert!(rows.iter().any(|r| r.quantity == "dp communication per step"));
    }

    #[test]
    fn a_run_far_from_its_prediction_is_flagged_with_its_likely_cause() {
        let p = prediction();
        let half = series(tags::SAMPLES_PER_SEC, &[(2, 0.5 * p.estimate.samples_per_sec)]);
        let rows = rows(&p, &[half]);
        assert!(rows[0].verdict().unwrap().starts_with("slower than predicted"));
        assert!(rows[1].verdict().unwrap().starts_with("slower than predicted"), "twice the step time is slower");
        let fast = series(tags::SAMPLES_PER_SEC, &[(2, 1.2 * p.estimate.samples_per_sec)]);
        assert_eq!(super::rows(&p, &[fast])[0].verdict(), None, "20% is within the stated error");
    }

    #[test]
    fn a_machine_busy_at_launch_is_named_as_the_likely_cause() {
        let mut p = prediction();
        assert_eq!(busy_machine(&p), None, "a Slurm run records no local load");
        p.load_at_launch = Some(scalebook_shared::estimate::Load { one_minute: 0.4, cores: 2 });
        assert_eq!(busy_machine(&p), None);
        p.load_at_launch = Some(scalebook_shared::estimate::Load { one_minute: 3.1, cores: 2 });
        assert!(busy_machine(&p).unwrap().contains("load 3.1 on 2 cores"));
    }
}
