//! Adam as the tutorial configures it (betas 0.9/0.95, eps 1e-8, no weight decay), with its
//! state held here rather than inside libtorch's C++ optimizer, so that it can be saved in a
//! checkpoint and restored. `fused` runs libtorch's multi-tensor kernel
//! (`torch.optim.Adam(fused=True)`); otherwise the same update runs tensor by tensor.

use tch::{Device, Kind, Tensor};

use crate::Error;
use crate::ffi::{self, AdamStep, AdamTensors};
use crate::train::amp::GradScaler;

pub const BETA1: f64 = 0.9;
pub const BETA2: f64 = 0.95;
pub const EPS: f64 = 1e-8;

pub struct Adam {
    /// (name, parameter), sorted by name so state lines up across runs and checkpoints.
    params: Vec<(String, Tensor)>,
    exp_avgs: Vec<Tensor>,
    exp_avg_sqs: Vec<Tensor>,
    /// One float32 step counter per parameter, as the fused kernel wants them.
    steps: Vec<Tensor>,
    fused: bool,
}

impl Adam {
    pub fn new(mut params: Vec<(String, Tensor)>, fused: bool) -> Adam {
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros = |p: &Tensor| p.zeros_like().detach();
        let exp_avgs = params.iter().map(|(_, p)| zeros(p)).collect();
        let exp_avg_sqs = params.iter().map(|(_, p)| zeros(p)).collect();
        let steps = params.iter().map(|(_, p)| Tensor::zeros([], (Kind::Float, p.device()))).collect();
        Adam { params, exp_avgs, exp_avg_sqs, steps, fused }
    }

    pub fn zero_grad(&mut self) {
        for (_, p) in &mut self.params {
            p.zero_grad();
        }
    }

    /// One update at learning rate `lr`. With a scaler (fp16), gradients are unscaled first
    /// and the whole step is skipped when any of them overflowed, as GradScaler.step does.
    pub fn step(&mut self, lr: f64, scaler: Option<&mut GradScaler>) -> Result<(), Error> {
        let hyper = AdamStep { lr, beta1: BETA1, beta2: BETA2, eps: EPS };
        let mut params: Vec<Tensor> = self.params.iter().map(|(_, p)| p.shallow_clone()).collect();
        let mut grads: Vec<Tensor> = self.params.iter().map(|(_, p)| p.grad()).collect();
        if grads.iter().any(|g| !g.defined()) {
            return Err(Error::Internal { what: "Adam".into(), message: "a parameter has no gradient; was backward() run?".into() });
        }
        if self.fused {
            let tensors = AdamTensors {
                params: &mut params,
                grads: &mut grads,
                exp_avgs: &mut self.exp_avgs,
                exp_avg_sqs: &mut self.exp_avg_sqs,
                steps: &mut self.steps,
            };
            return match scaler {
                Some(scaler) => {
                    let (scale, inf) = scaler.kernel_inputs();
                    ffi::fused_adam(tensors, hyper, Some((scale, inf)))
                }
                None => ffi::fused_adam(tensors, hyper, None),
            };
        }
        if let Some(scaler) = scaler
            && !scaler.unscale(&mut grads)?
        {
            return Ok(());
        }
        tch::no_grad(|| {
            for i in 0..params.len() {
                single_tensor_update(&mut params[i], &grads[i], &mut self.exp_avgs[i], &mut self.exp_avg_sqs[i], &mut self.steps[i], hyper);
            }
        });
        Ok(())
    }

    /// Every state tensor with a stable name, for checkpoints.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(self.params.len() * 3);
        for (i, (name, _)) in self.params.iter().enumerate() {
            out.push((format!("adam.exp_avg.{name}"), self.exp_avgs[i].shallow_clone()));
            out.push((format!("adam.exp_avg_sq.{name}"), self.exp_avg_sqs[i].shallow_clone()));
            out.push((format!("adam.step.{name}"), self.steps[i].shallow_clone()));
        }
        out
    }

    /// Copies saved state back in; `lookup` finds a saved tensor by the name [`Adam::state`] gave it.
    pub fn load_state(&mut self, lookup: impl Fn(&str) -> Option<Tensor>) -> Result<(), String> {
        for (i, (name, _)) in self.params.iter().enumerate() {
            for (prefix, slot) in
                [("exp_avg", &mut self.exp_avgs[i]), ("exp_avg_sq", &mut self.exp_avg_sqs[i]), ("step", &mut self.steps[i])]
            {
                let key = format!("adam.{prefix}.{name}");
                let saved = lookup(&key).ok_or_else(|| format!("the checkpoint has no {key}"))?;
                if saved.size() != slot.size() {
                    return Err(format!("{key} has shape {:?}, the model needs {:?}", saved.size(), slot.size()));
                }
                tch::no_grad(|| slot.copy_(&saved));
            }
        }
        Ok(())
    }

    pub fn device(&self) -> Device {
        self.params.first().map_or(Device::Cpu, |(_, p)| p.device())
    }
}

/// torch.optim.Adam's single-tensor update with bias correction.
fn single_tensor_update(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, step: &mut Tensor, h: AdamStep) {
    let _ = step.g_add_scalar_(1.0);
    let t = f64::try_from(&*step).unwrap_or(1.0);
    let _ = m.g_mul_scalar_(h.beta1).g_add_(&(g * (1.0 - h.beta1)));
    let _ = v.g_mul_scalar_(h.beta2).g_add_(&(g.square() * (1.0 - h.beta2)));
    let bias1 = 1.0 - h.beta1.powf(t);
    let bias2 = 1.0 - h.beta2.powf(t);
    let denom = v.sqrt() / bias2.sqrt() + h.eps;
    let _ = p.g_sub_(&(&*m / denom * (h.lr / bias1)));
}
