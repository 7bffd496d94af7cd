//! Metric points as the trainer writes them (`metrics.jsonl`, one JSON object a line) and as
//! the server and the browser read them, with the tutorial's TensorBoard tag names.

mod history;
mod line;
pub mod nonfinite;

pub use history::{Bucket, MAX_TAGS, Series, Thinned, bucketize, series};

use serde::{Deserialize, Serialize};

/// One scalar at one step, exactly one line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricPoint {
    /// Optimizer steps taken so far (0 = before training, as the tutorial's step-0 evaluation).
    pub step: u64,
    /// 1-based epoch the point belongs to (0 for the step-0 evaluation).
    pub epoch: u64,
    /// Seconds since the Unix epoch when the point was measured.
    #[serde(with = "nonfinite")]
    pub wall: f64,
    pub tag: String,
    /// NaN and the infinities included (a diverged loss), see [`nonfinite`].
    #[serde(with = "nonfinite")]
    pub value: f64,
}

/// A once-an-epoch tag's steady value: its mean from epoch 2 on, as the tutorial reads its
/// logs (epoch 1 pays for the start); `None` until epoch 2 has logged it.
pub fn steady(points: &[MetricPoint], tag: &str) -> Option<f64> {
    let values: Vec<f64> = points.iter().filter(|p| p.tag == tag && p.epoch >= 2).map(|p| p.value).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The tutorial's scalar tags, logged once per epoch (and at step 0 for the losses).
pub mod tags {
    pub const LOSS_TRAIN: &str = "Loss/train";
    pub const LOSS_VALID: &str = "Loss/valid";
    pub const RMSE_U10M_VALID: &str = "RMSE(u10m)/valid";
    pub const LEARNING_RATE: &str = "Learning Rate";
    pub const ITERS_PER_SEC: &str = "Avg iters per sec";
    pub const SAMPLES_PER_SEC: &str = "Avg samples per sec";

    /// Finer tags written every step beside the tutorial's per-epoch ones (its 22-hour
    /// baseline has only 11 points per curve).
    pub mod step {
        pub const LOSS_TRAIN: &str = "Step/Loss/train";
        pub const LEARNING_RATE: &str = "Step/Learning Rate";
        pub const SAMPLES_PER_SEC: &str = "Step/Samples per sec";
        /// Where one step's time goes, in seconds.
        pub const DATA_WAIT: &str = "Step time/data wait";
        pub const FORWARD: &str = "Step time/forward";
        pub const BACKWARD: &str = "Step time/backward";
        pub const OPTIMIZER: &str = "Step time/optimizer";
    }

    /// What a run says about itself, beside its measurements.
    pub mod run {
        /// The step the run stops at, written once as it starts (with the step it starts
        /// from), so whoever follows it can show how far it has come and how long it has left.
        pub const STEPS: &str = "Run/Steps";
        /// The most memory any rank has held so far, in GiB, at the end of each epoch: the
        /// peak resident set on the CPU, the caching allocator's peak on a GPU. What an
        /// estimate's memory per rank is checked against.
        pub const PEAK_MEMORY: &str = "Run/Peak memory (GiB)";
        /// The training state the fullest rank holds between steps, in MiB, at the end of each
        /// epoch: its parameters, their gradients and its optimizer's state, as ZeRO shards
        /// them (and as a tp, cp or pipeline rank holds its own part). What ZeRO's stages and
        /// the estimate's weights, gradients and optimizer state are checked against.
        pub const STATE_HELD: [&str; 3] = ["Run/Parameters held (MiB)", "Run/Gradients held (MiB)", "Run/Optimizer state held (MiB)"];
    }

    /// Where an epoch's training steps spent their time, on average, once an epoch: what the
    /// estimate's split of a step is checked against. Seconds per step.
    pub mod split {
        /// Waiting for the next batch.
        pub const DATA_WAIT: &str = "Step split/data wait";
        /// The forward, backward and optimizer work, less the collectives inside them.
        pub const COMPUTE: &str = "Step split/compute";
        /// For each group the estimate counts traffic over (its token), the time its
        /// collectives took and the bytes of their buffers, per step; written for groups of
        /// more than one rank.
        pub const GROUPS: [(&str, &str, &str); 3] = [
            ("tp", "Step split/tp communication", "Comm bytes per step/tp"),
            ("cp", "Step split/cp communication", "Comm bytes per step/cp"),
            ("dp", "Step split/dp communication", "Comm bytes per step/dp"),
        ];
    }

    /// Every tag the trainer writes in every run, tutorial tags first (the split's
    /// communication tags only where a group has more than one rank).
    pub const ALL: [&str; 20] = [
        LOSS_TRAIN,
        LOSS_VALID,
        RMSE_U10M_VALID,
        LEARNING_RATE,
        ITERS_PER_SEC,
        SAMPLES_PER_SEC,
        step::LOSS_TRAIN,
        step::LEARNING_RATE,
        step::SAMPLES_PER_SEC,
        step::DATA_WAIT,
        step::FORWARD,
        step::BACKWARD,
        step::OPTIMIZER,
        run::STEPS,
        run::PEAK_MEMORY,
        run::STATE_HELD[0],
        run::STATE_HELD[1],
        run::STATE_HELD[2],
        split::DATA_WAIT,
        split::COMPUTE,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_one_json_object_with_the_five_keys() {
        let p = MetricPoint { step: 32, epoch: 1, wall: 1.5e9, tag: tags::LOSS_VALID.into(), value: 0.25 };
        let line = serde_json::to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys.len(), 5);
        for k in ["step", "epoch", "wall", "tag", "value"] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(serde_json::from_str::<MetricPoint>(&line).unwrap(), p);
    }
}
