//! Mixed precision as the tutorial uses it: `autocast` around forward and loss (fp16 or
//! bf16), and for fp16 a GradScaler with dynamic loss scaling. Works on CPU as well as CUDA.

use std::rc::Rc;

use scalebook_shared::config::AmpMode;
use tch::{Device, Kind, Tensor};

use crate::Error;
use crate::ffi::{self, ProcessGroup, ReduceOp};

/// Autocast switched on for the lifetime of the guard (`with autocast(...)` in Python).
pub struct Autocast {
    device: Device,
    kind: Option<Kind>,
}

/// The type autocast computes matrix products in under `mode` (none: float32 throughout).
pub fn autocast_kind(mode: AmpMode) -> Option<Kind> {
    match mode {
        AmpMode::None => None,
        AmpMode::Fp16 => Some(Kind::Half),
        AmpMode::Bf16 => Some(Kind::BFloat16),
    }
}

impl Autocast {
    pub fn enter(device: Device, mode: AmpMode) -> Result<Autocast, Error> {
        let kind = autocast_kind(mode);
        if let Some(kind) = kind {
            ffi::set_autocast(device, true, kind)?;
        }
        Ok(Autocast { device, kind })
    }
}

impl Drop for Autocast {
    fn drop(&mut self) {
        if let Some(kind) = self.kind {
            // Switching off cannot fail in practice; there is nothing better to do if it did.
            let _ = ffi::set_autocast(self.device, false, kind);
        }
    }
}

/// Dynamic loss scaling (torch.amp.GradScaler defaults: initial scale 2¹⁶, ×2 after 2000
/// steps without overflow, ×0.5 on overflow, and that step skipped).
pub struct GradScaler {
    scale: Tensor,
    growth_tracker: Tensor,
    found_inf: Tensor,
    /// The ranks holding the other shards of the model (tp·cp > 1), and with ZeRO the dp
    /// ranks holding the other shards of the gradients: every one skips a step when any one
    /// overflows, as Megatron's scaler does, or their scales would part. Over tp-cp first,
    /// then dp, which together reach every rank of the run.
    shards: Vec<Rc<ProcessGroup>>,
}

pub const INIT_SCALE: f64 = 65_536.0;
const GROWTH_FACTOR: f64 = 2.0;
const BACKOFF_FACTOR: f64 = 0.5;
const GROWTH_INTERVAL: i64 = 2000;

impl GradScaler {
    pub fn new(device: Device, shards: Option<Rc<ProcessGroup>>) -> GradScaler {
        GradScaler {
            scale: Tensor::full([1], INIT_SCALE, (Kind::Float, device)),
            growth_tracker: Tensor::zeros([1], (Kind::Int, device)),
            found_inf: Tensor::zeros([1], (Kind::Float, device)),
            shards: shards.into_iter().collect(),
        }
    }

    /// Shares the overflow check with `group` too (ZeRO's dp group: each rank unscales only
    /// its shard of the gradients, and all of them must skip the same steps).
    pub fn share_with(&mut self, group: Rc<ProcessGroup>) {
        self.shards.push(group);
    }

    /// The non-finite check of the gradients at factor `inv` (which also unscales them),
    /// shared with the other shards.
    fn check(&mut self, grads: &mut [Tensor], inv: &mut Tensor) -> Result<(), Error> {
        ffi::unscale_grads(grads, &mut self.found_inf, inv)?;
        self.shards.iter().try_for_each(|group| group.all_reduce(&mut self.found_inf, ReduceOp::Max))
    }

    /// The loss to call backward on.
    pub fn scale(&self, loss: &Tensor) -> Tensor {
        loss * &self.scale
    }

    /// Unscales gradients in place; `false` means some overflowed and the step must be skipped.
    pub fn unscale(&mut self, grads: &mut [Tensor]) -> Result<bool, Error> {
        let mut inv = self.scale.reciprocal();
        self.check(grads, &mut inv)?;
        Ok(f64::try_from(&self.found_inf).map_err(Error::Torch)? == 0.0)
    }

    /// What the fused Adam kernel needs to unscale and skip on its own. The kernel only reads
    /// the overflow flag, so it is set here first, as GradScaler does for fused optimizers: the
    /// non-finite check with a factor of one, which leaves the gradients as they are.
    pub fn kernel_inputs(&mut self, grads: &mut [Tensor]) -> Result<(&mut Tensor, &mut Tensor), Error> {
        let mut one = self.scale.ones_like();
        self.check(grads, &mut one)?;
        Ok((&mut self.scale, &mut self.found_inf))
    }

    /// After each optimizer step: grow or back off the scale, then clear the overflow flag.
    pub fn update(&mut self) {
        let _ =
            self.scale.internal_amp_update_scale_(&self.growth_tracker, &self.found_inf, GROWTH_FACTOR, BACKOFF_FACTOR, GROWTH_INTERVAL);
        let _ = self.found_inf.zero_();
    }

    pub fn current_scale(&self) -> f64 {
        f64::try_from(&self.scale).unwrap_or(f64::NAN)
    }

    pub fn state(&self) -> Vec<(String, Tensor)> {
        vec![("scaler.scale".into(), self.scale.shallow_clone()), ("scaler.growth_tracker".into(), self.growth_tracker.shallow_clone())]
    }

    pub fn load_state(&mut self, lookup: impl Fn(&str) -> Option<Tensor>) -> Result<(), String> {
        for (key, slot) in [("scaler.scale", &mut self.scale), ("scaler.growth_tracker", &mut self.growth_tracker)] {
            let saved = lookup(key).ok_or_else(|| format!("the checkpoint has no {key}"))?;
            tch::no_grad(|| slot.copy_(&saved));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_halves_the_scale_and_reports_a_skip() {
        let mut scaler = GradScaler::new(Device::Cpu, None);
        let mut grads = vec![Tensor::from_slice(&[1.0f32, f32::INFINITY]), Tensor::from_slice(&[2.0f32])];
        assert!(!scaler.unscale(&mut grads).unwrap());
        scaler.update();
        assert_eq!(scaler.current_scale(), INIT_SCALE * BACKOFF_FACTOR);
    }

    #[test]
    fn finite_gradients_are_divided_by_the_scale() {
        let mut scaler = GradScaler::new(Device::Cpu, None);
        let mut grads = vec![Tensor::from_slice(&[INIT_SCALE as f32 * 3.0])];
        assert!(scaler.unscale(&mut grads).unwrap());
        assert_eq!(f64::try_from(&grads[0].get(0)).unwrap(), 3.0);
        scaler.update();
        assert_eq!(scaler.current_scale(), INIT_SCALE);
    }

    #[test]
    fn cpu_autocast_runs_matmuls_in_the_chosen_precision() {
        let a = Tensor::ones([4, 4], (Kind::Float, Device::Cpu));
        {
            let _guard = Autocast::enter(Device::Cpu, AmpMode::Bf16).unwrap();
            assert_eq!(a.matmul(&a).kind(), Kind::BFloat16);
        }
        assert_eq!(a.matmul(&a).kind(), Kind::Float);
    }
}
