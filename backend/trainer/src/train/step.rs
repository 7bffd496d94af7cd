//! One training step and one evaluation pass, with the time of each phase measured.

use std::time::Instant;

use scalebook_shared::config::{AmpMode, TrainConfig};
use tch::{Device, Tensor, nn, nn::ModuleT};

use crate::Error;
use crate::data::Batch;
use crate::model::{VisionTransformer, VitSpec};
use crate::train::amp::{Autocast, GradScaler};
use crate::train::loss::{l2_loss, weighted_rmse};
use crate::train::optim::Adam;

/// Where one step's time went, in seconds (data wait is measured by the caller).
#[derive(Debug, Clone, Copy, Default)]
pub struct StepTimes {
    pub forward: f64,
    pub backward: f64,
    pub optimizer: f64,
}

/// The model and everything that updates it.
pub struct Learner {
    pub model: VisionTransformer,
    pub optimizer: Adam,
    pub scaler: Option<GradScaler>,
    pub amp: AmpMode,
    pub device: Device,
}

impl Learner {
    /// The model of `config` on `device`, with its optimizer (fused when `enable_jit` or
    /// `enable_fused` asks) and, for fp16, a loss scaler. The VarStore owns the parameters.
    pub fn build(config: &TrainConfig, device: Device) -> (nn::VarStore, Learner) {
        let vs = nn::VarStore::new(device);
        let model = VisionTransformer::new(&vs.root(), &VitSpec::from(config));
        let fused = config.enable_jit || config.enable_fused;
        let optimizer = Adam::new(vs.variables().into_iter().collect(), fused);
        let scaler = (config.amp_mode == AmpMode::Fp16).then(|| GradScaler::new(device));
        (vs, Learner { model, optimizer, scaler, amp: config.amp_mode, device })
    }

    /// zero_grad, forward and loss under autocast, backward (scaled for fp16), Adam step at
    /// `lr`. Returns the loss and the phase times.
    pub fn train_step(&mut self, batch: &Batch, lr: f64) -> Result<(f64, StepTimes), Error> {
        let (input, target) = (batch.input.to_device(self.device), batch.target.to_device(self.device));
        self.optimizer.zero_grad();
        let t0 = Instant::now();
        let loss = {
            let _autocast = Autocast::enter(self.device, self.amp)?;
            l2_loss(&self.model.forward_t(&input, true), &target)
        };
        let forward = self.synced_since(t0);
        let t1 = Instant::now();
        match &self.scaler {
            Some(scaler) => scaler.scale(&loss).backward(),
            None => loss.backward(),
        }
        let backward = self.synced_since(t1);
        let t2 = Instant::now();
        self.optimizer.step(lr, self.scaler.as_mut())?;
        if let Some(scaler) = &mut self.scaler {
            scaler.update();
        }
        let optimizer = self.synced_since(t2);
        Ok((f64::try_from(&loss)?, StepTimes { forward, backward, optimizer }))
    }

    /// Loss and per-channel RMSE of one batch, without gradients.
    pub fn evaluate(&self, batch: &Batch) -> Result<(Tensor, Tensor), Error> {
        let (input, target) = (batch.input.to_device(self.device), batch.target.to_device(self.device));
        let _autocast = Autocast::enter(self.device, self.amp)?;
        Ok(tch::no_grad(|| {
            let pred = self.model.forward_t(&input, false);
            (l2_loss(&pred, &target), weighted_rmse(&pred, &target))
        }))
    }

    /// GPU work is asynchronous: wait for it before reading the clock.
    fn synced_since(&self, start: Instant) -> f64 {
        if let Device::Cuda(i) = self.device {
            tch::Cuda::synchronize(i as i64);
        }
        start.elapsed().as_secs_f64()
    }
}
