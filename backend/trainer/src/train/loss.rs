//! The tutorial's loss and metric (`utils/loss.py`, `utils/metrics.py`), in the normalised
//! units the data loader produces.

use tch::{Kind, Tensor};

/// Relative L2: the mean over the batch of ‖pred − target‖₂ / ‖target‖₂, each norm over all
/// of a sample's C·H·W values. Computed in float32 whatever the autocast precision, as
/// autocast itself does for norms.
pub fn l2_loss(pred: &Tensor, target: &Tensor) -> Tensor {
    let b = pred.size()[0];
    let pred = pred.to_kind(Kind::Float).reshape([b, -1]);
    let target = target.to_kind(Kind::Float).reshape([b, -1]);
    let dims: &[i64] = &[1];
    let diff = (&pred - &target).square().sum_dim_intlist(dims, false, Kind::Float).sqrt();
    let norm = target.square().sum_dim_intlist(dims, false, Kind::Float).sqrt();
    (diff / norm).mean(Kind::Float)
}

/// Latitude weights of the H rows: `lat(j) = 90 − j·180/(H−1)` (+90° at the top row to −90°),
/// `w(j) = H·cos(lat(j)) / Σ cos(lat)`, so the weights average to 1. π is 3.1416 as in the
/// tutorial's code, which keeps the polar rows' weights a hair above zero.
pub fn latitude_weights(h: i64) -> Vec<f32> {
    #[allow(clippy::approx_constant)] // the tutorial's rounded π, on purpose
    const PI: f64 = 3.1416;
    let cos: Vec<f64> = (0..h)
        .map(|j| {
            let lat = if h > 1 { 90.0 - j as f64 * 180.0 / (h - 1) as f64 } else { 0.0 };
            (PI / 180.0 * lat).cos()
        })
        .collect();
    let sum: f64 = cos.iter().sum();
    cos.iter().map(|c| (h as f64 * c / sum) as f32).collect()
}

/// Latitude-weighted RMSE per channel, averaged over the batch: a [C] tensor. Channel 0 is
/// u10, the tutorial's `RMSE(u10m)/valid`.
pub fn weighted_rmse(pred: &Tensor, target: &Tensor) -> Tensor {
    let size = pred.size();
    let h = size[2];
    let weights = Tensor::from_slice(&latitude_weights(h)).to_device(pred.device()).view([1, 1, h, 1]);
    let err = (pred.to_kind(Kind::Float) - target.to_kind(Kind::Float)).square() * weights;
    let dims: &[i64] = &[2, 3];
    err.mean_dim(dims, false, Kind::Float).sqrt().mean_dim(&[0i64][..], false, Kind::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_loss_is_the_mean_relative_error_per_sample() {
        // Sample 0: target (3, 4) -> norm 5, error (0, 1) -> 1/5. Sample 1: target (0, 2),
        // error (2, 0) -> 2/2. Mean 0.6.
        let target = Tensor::from_slice(&[3.0f32, 4.0, 0.0, 2.0]).view([2, 1, 1, 2]);
        let pred = Tensor::from_slice(&[3.0f32, 5.0, 2.0, 2.0]).view([2, 1, 1, 2]);
        let loss = f64::try_from(l2_loss(&pred, &target)).unwrap();
        assert!((loss - 0.6).abs() < 1e-6, "{loss}");
    }

    #[test]
    #[allow(clippy::approx_constant)] // 3.1416/2 and 3.1416/4: the tutorial's rounded π
    fn latitude_weights_average_to_one_and_favour_the_equator() {
        let w = latitude_weights(5);
        // lat = 90, 45, 0, -45, -90; cos(3.1416/180·lat) computed by hand.
        let cos = [(1.5708f64).cos(), (0.7854f64).cos(), 1.0, (0.7854f64).cos(), (1.5708f64).cos()];
        let sum: f64 = cos.iter().sum();
        for (wi, ci) in w.iter().zip(cos) {
            assert!((f64::from(*wi) - 5.0 * ci / sum).abs() < 1e-6);
        }
        assert!((w.iter().map(|&x| f64::from(x)).sum::<f64>() - 5.0).abs() < 1e-5);
        // π = 3.1416 overshoots π/2 at the poles: their weight is a tiny negative number.
        assert!(w[0] < 0.0 && w[0] > -1e-4, "polar row weight {}", w[0]);
    }

    #[test]
    fn weighted_rmse_weighs_rows_and_averages_samples() {
        // H = 3 rows: lat 90, 0, -90 -> weights ≈ (0, 3, 0). A unit error on the middle row
        // (both columns) of channel 1 gives sqrt(mean over 3x2 pixels of w·e²) = sqrt(2·w₁/6).
        let target = Tensor::zeros([2, 2, 3, 2], (Kind::Float, tch::Device::Cpu));
        let pred = target.zeros_like();
        let _ = pred.narrow(1, 1, 1).narrow(2, 1, 1).fill_(1.0); // channel 1, row 1, both columns
        let rmse = weighted_rmse(&pred, &target);
        let expected = (f64::from(latitude_weights(3)[1]) * 2.0 / 6.0).sqrt();
        assert!(f64::try_from(rmse.get(0)).unwrap().abs() < 1e-6);
        assert!((f64::try_from(rmse.get(1)).unwrap() - expected).abs() < 1e-5);
    }
}
