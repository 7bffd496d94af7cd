//! The learning rate: the tutorial's cosine schedule and its square-root batch-size rule.

use std::f64::consts::PI;

use super::TrainConfig;

/// The rule's anchor: `base` trains batch 16 at 5e-4.
const RULE_LR: f64 = 5e-4;
const RULE_BATCH: f64 = 16.0;

/// The learning rate the tutorial pairs with a global batch: `5e-4 · sqrt(batch / 16)`. Its
/// `bs*_opt` configs write this rounded to 3 significant digits.
pub fn sqrt_rule_lr(global_batch_size: usize) -> f64 {
    // Batch sizes are far below 2^52, so the conversion is exact.
    RULE_LR * (global_batch_size as f64 / RULE_BATCH).sqrt()
}

/// The learning rate after `step` scheduler steps, as the tutorial's trainers set it: cosine
/// annealing to 0 over `num_iters`, and with `warmup > 0` the `LambdaLR` factor
/// `min((step + 1) / warmup, cosine)`. Assumes a config that passed validation
/// (`lr_schedule: cosine`, `num_iters >= 1`).
pub fn lr_at(config: &TrainConfig, step: usize) -> f64 {
    let cosine = 0.5 * (1.0 + (PI * step as f64 / config.num_iters as f64).cos());
    let factor = match config.warmup {
        0 => cosine,
        warmup => ((step + 1) as f64 / warmup as f64).min(cosine),
    };
    config.lr * factor
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numbers::round_significant;

    #[test]
    fn rounds_to_significant_digits() {
        assert_eq!(round_significant(7.0710678e-4, 3), 7.07e-4);
        assert_eq!(round_significant(1.4142136e-3, 3), 1.41e-3);
        assert_eq!(round_significant(-2.8284e-3, 3), -2.83e-3);
        assert_eq!(round_significant(123456.0, 2), 120000.0);
        assert_eq!(round_significant(0.0, 3), 0.0);
    }

    #[test]
    fn warmup_ramps_linearly_then_follows_the_cosine() {
        let config = TrainConfig { warmup: 10, num_iters: 100, lr: 1e-3, ..TrainConfig::default() };
        assert!((lr_at(&config, 0) - 1e-4).abs() < 1e-15);
        assert!((lr_at(&config, 4) - 5e-4).abs() < 1e-15);
        // Past the ramp the cosine is the smaller factor.
        let cosine_50 = 1e-3 * 0.5 * (1.0 + (PI * 0.5).cos());
        assert!((lr_at(&config, 50) - cosine_50).abs() < 1e-15);
    }
}
