//! The optimizers, with their state held here rather than inside libtorch's C++ optimizers, so
//! that it can be saved in a checkpoint and restored. Adam is the tutorial's (betas 0.9/0.95,
//! eps 1e-8, no weight decay); `fused` runs libtorch's multi-tensor kernel
//! (`torch.optim.Adam(fused=True)`), otherwise the same update runs tensor by tensor. AdamW
//! and SGD with momentum are there for SC22's "put it all together" challenge.

use scalebook_shared::config::Optimizer as Choice;
use tch::{Device, Kind, Tensor};

use crate::Error;
use crate::ffi::{self, AdamStep, AdamTensors};
use crate::train::amp::GradScaler;

pub const BETA1: f64 = 0.9;
pub const BETA2: f64 = 0.95;
pub const EPS: f64 = 1e-8;
/// PyTorch's default for AdamW.
pub const ADAMW_WEIGHT_DECAY: f64 = 0.01;
pub const SGD_MOMENTUM: f64 = 0.9;

/// The configured optimizer over one rank's parameters.
pub enum Optimizer {
    Adam(Adam),
    Sgd(Sgd),
}

impl Optimizer {
    pub fn new(choice: Choice, params: Vec<(String, Tensor)>, fused: bool) -> Optimizer {
        let params = Params::own(params);
        match choice {
            Choice::Adam => Optimizer::Adam(Adam::new(params, fused, 0.0)),
            Choice::AdamW => Optimizer::Adam(Adam::new(params, fused, ADAMW_WEIGHT_DECAY)),
            Choice::Sgd => Optimizer::Sgd(Sgd::new(params)),
        }
    }

    /// The optimizer over ZeRO's shards: (name, this rank's shard of a unit's parameters, the
    /// gradient of that shard). The same update, element by element, as over the parameters.
    pub fn over_shards(choice: Choice, shards: Vec<(String, Tensor, Tensor)>, fused: bool) -> Optimizer {
        let params = Params::explicit(shards);
        match choice {
            Choice::Adam => Optimizer::Adam(Adam::new(params, fused, 0.0)),
            Choice::AdamW => Optimizer::Adam(Adam::new(params, fused, ADAMW_WEIGHT_DECAY)),
            Choice::Sgd => Optimizer::Sgd(Sgd::new(params)),
        }
    }

    fn params(&mut self) -> &mut Params {
        match self {
            Optimizer::Adam(adam) => &mut adam.params,
            Optimizer::Sgd(sgd) => &mut sgd.params,
        }
    }

    pub fn zero_grad(&mut self) {
        let params = self.params();
        match &mut params.grads {
            Some(grads) => tch::no_grad(|| {
                for g in grads {
                    let _ = g.zero_();
                }
            }),
            None => {
                for (_, p) in &mut params.named {
                    p.zero_grad();
                }
            }
        }
    }

    /// The bytes of the parameters it updates and of the gradients backward made for them
    /// (0 before the first backward pass): what a rank holds of both without ZeRO.
    pub fn param_and_grad_bytes(&self) -> (u64, u64) {
        let params = match self {
            Optimizer::Adam(adam) => &adam.params,
            Optimizer::Sgd(sgd) => &sgd.params,
        };
        let bytes = |t: &Tensor| if t.defined() { (t.numel() * t.kind().elt_size_in_bytes()) as u64 } else { 0 };
        let held: u64 = params.named.iter().map(|(_, p)| bytes(p)).sum();
        let grads = match &params.grads {
            Some(grads) => grads.iter().map(bytes).sum(),
            None => params.named.iter().map(|(_, p)| bytes(&p.grad())).sum(),
        };
        (held, grads)
    }

    /// The bytes of its state (moments, step counters, momentum).
    pub fn state_bytes(&self) -> u64 {
        self.state().iter().map(|(_, t)| (t.numel() * t.kind().elt_size_in_bytes()) as u64).sum()
    }

    /// One update at learning rate `lr`. With a scaler (fp16), gradients are unscaled first
    /// and the whole step is skipped when any of them overflowed, as GradScaler.step does.
    pub fn step(&mut self, lr: f64, scaler: Option<&mut GradScaler>) -> Result<(), Error> {
        match self {
            Optimizer::Adam(adam) => adam.step(lr, scaler),
            Optimizer::Sgd(sgd) => sgd.step(lr, scaler),
        }
    }

    /// Every state tensor with a stable name, for checkpoints.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        match self {
            Optimizer::Adam(adam) => adam.state(),
            Optimizer::Sgd(sgd) => sgd.state(),
        }
    }

    /// Copies saved state back in; `lookup` finds a saved tensor by the name [`Optimizer::state`] gave it.
    pub fn load_state(&mut self, lookup: impl Fn(&str) -> Option<Tensor>) -> Result<(), String> {
        match self {
            Optimizer::Adam(adam) => load_slots(
                &adam.params.named,
                "adam",
                lookup,
                [("exp_avg", &mut adam.exp_avgs), ("exp_avg_sq", &mut adam.exp_avg_sqs), ("step", &mut adam.steps)],
            ),
            Optimizer::Sgd(sgd) => load_slots(&sgd.params.named, "sgd", lookup, [("momentum", &mut sgd.momentum)]),
        }
    }
}

/// What an optimizer updates: parameters sorted by name (so state lines up across runs and
/// checkpoints), each with its gradient where it is not the parameter's own (ZeRO's shards).
struct Params {
    named: Vec<(String, Tensor)>,
    grads: Option<Vec<Tensor>>,
}

impl Params {
    fn own(mut named: Vec<(String, Tensor)>) -> Params {
        named.sort_by(|a, b| a.0.cmp(&b.0));
        Params { named, grads: None }
    }

    fn explicit(mut shards: Vec<(String, Tensor, Tensor)>) -> Params {
        shards.sort_by(|a, b| a.0.cmp(&b.0));
        let (named, grads) = shards.into_iter().map(|(name, p, g)| ((name, p), g)).unzip();
        Params { named, grads: Some(grads) }
    }

    /// The gradients, which backward must have produced.
    fn grads(&self, what: &str) -> Result<Vec<Tensor>, Error> {
        let grads: Vec<Tensor> = match &self.grads {
            Some(grads) => grads.iter().map(Tensor::shallow_clone).collect(),
            None => self.named.iter().map(|(_, p)| p.grad()).collect(),
        };
        if grads.iter().any(|g| !g.defined()) {
            return Err(Error::Internal { what: what.into(), message: "a parameter has no gradient; was backward() run?".into() });
        }
        Ok(grads)
    }
}

/// Copies each saved `{prefix}.{slot}.{name}` into its state slot (one tensor per parameter
/// in each slot vector), checking shapes.
fn load_slots<const N: usize>(
    params: &[(String, Tensor)],
    prefix: &str,
    lookup: impl Fn(&str) -> Option<Tensor>,
    slots: [(&str, &mut Vec<Tensor>); N],
) -> Result<(), String> {
    for (slot_name, tensors) in slots {
        for ((name, _), slot) in params.iter().zip(tensors.iter_mut()) {
            let key = format!("{prefix}.{slot_name}.{name}");
            let saved = lookup(&key).ok_or_else(|| format!("the checkpoint has no {key}"))?;
            if saved.size() != slot.size() {
                return Err(format!("{key} has shape {:?}, the model needs {:?}", saved.size(), slot.size()));
            }
            tch::no_grad(|| slot.copy_(&saved));
        }
    }
    Ok(())
}

pub struct Adam {
    params: Params,
    exp_avgs: Vec<Tensor>,
    exp_avg_sqs: Vec<Tensor>,
    /// One float32 step counter per parameter, as the fused kernel wants them.
    steps: Vec<Tensor>,
    fused: bool,
    /// Decoupled (AdamW) weight decay; 0 for Adam.
    weight_decay: f64,
}

impl Adam {
    fn new(params: Params, fused: bool, weight_decay: f64) -> Adam {
        let zeros = |p: &Tensor| p.zeros_like().detach();
        let exp_avgs = params.named.iter().map(|(_, p)| zeros(p)).collect();
        let exp_avg_sqs = params.named.iter().map(|(_, p)| zeros(p)).collect();
        // The fused kernel reads the step counters on the parameters' device. The
        // tensor-by-tensor update reads them on the host for its bias correction, so there they
        // stay on the CPU (as torch.optim.Adam keeps them): on a GPU, a counter there would cost
        // a synchronisation per parameter and step (198 per step for `base`, seen on an H200).
        let counter = |p: &Tensor| Tensor::zeros([], (Kind::Float, if fused { p.device() } else { Device::Cpu }));
        let steps = params.named.iter().map(|(_, p)| counter(p)).collect();
        Adam { params, exp_avgs, exp_avg_sqs, steps, fused, weight_decay }
    }

    fn step(&mut self, lr: f64, scaler: Option<&mut GradScaler>) -> Result<(), Error> {
        let hyper = AdamStep { lr, beta1: BETA1, beta2: BETA2, eps: EPS };
        let mut params: Vec<Tensor> = self.params.named.iter().map(|(_, p)| p.shallow_clone()).collect();
        let mut grads = self.params.grads("Adam")?;
        // The fused kernel skips an overflowed fp16 step inside, after the decay would have
        // been applied, so AdamW with a scaler takes the unfused path.
        let fused = self.fused && (self.weight_decay == 0.0 || scaler.is_none());
        if fused {
            self.decay(&mut params, lr);
            let tensors = AdamTensors {
                params: &mut params,
                grads: &mut grads,
                exp_avgs: &mut self.exp_avgs,
                exp_avg_sqs: &mut self.exp_avg_sqs,
                steps: &mut self.steps,
            };
            return match scaler {
                Some(scaler) => {
                    let (scale, inf) = scaler.kernel_inputs(tensors.grads)?;
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
        self.decay(&mut params, lr);
        tch::no_grad(|| {
            for i in 0..params.len() {
                single_tensor_update(&mut params[i], &grads[i], &mut self.exp_avgs[i], &mut self.exp_avg_sqs[i], &mut self.steps[i], hyper);
            }
        });
        Ok(())
    }

    /// AdamW's decoupled decay, `p ← p·(1 − lr·wd)`, before the Adam update (as PyTorch does).
    fn decay(&self, params: &mut [Tensor], lr: f64) {
        if self.weight_decay > 0.0 {
            tch::no_grad(|| {
                for p in params {
                    let _ = p.g_mul_scalar_(1.0 - lr * self.weight_decay);
                }
            });
        }
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(self.params.named.len() * 3);
        for (i, (name, _)) in self.params.named.iter().enumerate() {
            out.push((format!("adam.exp_avg.{name}"), self.exp_avgs[i].shallow_clone()));
            out.push((format!("adam.exp_avg_sq.{name}"), self.exp_avg_sqs[i].shallow_clone()));
            out.push((format!("adam.step.{name}"), self.steps[i].shallow_clone()));
        }
        out
    }
}

/// SGD with momentum as `torch.optim.SGD(momentum=0.9)`: `buf ← 0.9·buf + g` and
/// `p ← p − lr·buf`. PyTorch starts the buffer at the first gradient, which is what a buffer
/// of zeros gives here too.
pub struct Sgd {
    params: Params,
    momentum: Vec<Tensor>,
}

impl Sgd {
    fn new(params: Params) -> Sgd {
        let momentum = params.named.iter().map(|(_, p)| p.zeros_like().detach()).collect();
        Sgd { params, momentum }
    }

    fn step(&mut self, lr: f64, scaler: Option<&mut GradScaler>) -> Result<(), Error> {
        let mut grads = self.params.grads("SGD")?;
        if let Some(scaler) = scaler
            && !scaler.unscale(&mut grads)?
        {
            return Ok(());
        }
        tch::no_grad(|| {
            for ((_, p), (g, buf)) in self.params.named.iter_mut().zip(grads.iter().zip(&mut self.momentum)) {
                let _ = buf.g_mul_scalar_(SGD_MOMENTUM).g_add_(g);
                let _ = p.g_sub_(&(&*buf * lr));
            }
        });
        Ok(())
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        self.params.named.iter().zip(&self.momentum).map(|((name, _), m)| (format!("sgd.momentum.{name}"), m.shallow_clone())).collect()
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
