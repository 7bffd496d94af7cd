//! The tutorial's loss and metric (`utils/loss.py`, `utils/metrics.py`), in the normalised
//! units the data loader produces.

use scalebook_shared::config::AmpMode;
use scalebook_shared::profile::ranges;
use scalebook_shared::weather::latitude_weights;
use tch::{Device, Kind, Tensor};

use crate::Error;
use crate::ffi::Range;
use crate::model::Forward;
use crate::train::amp::Autocast;

/// A step's forward pass: the training loss of `input` against `target`, under autocast
/// (shared by the whole-batch step and the CPU's lanes).
pub(crate) fn training_loss(model: &dyn Forward, device: Device, amp: AmpMode, input: &Tensor, target: &Tensor) -> Result<Tensor, Error> {
    let _range = Range::enter(ranges::FORWARD);
    let _autocast = Autocast::enter(device, amp)?;
    Ok(l2_loss(&model.forward(input, true)?, target))
}

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

/// Latitude-weighted RMSE per channel, averaged over the batch: a [C] tensor. Channel 0 is
/// u10, the tutorial's `RMSE(u10m)/valid`.
pub fn weighted_rmse(pred: &Tensor, target: &Tensor) -> Tensor {
    let size = pred.size();
    let h = size[2];
    let weights = Tensor::from_slice(&latitude_weights(h as usize)).to_device(pred.device()).view([1, 1, h, 1]);
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
