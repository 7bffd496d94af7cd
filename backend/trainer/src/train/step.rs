//! One training step and one evaluation pass, with the time of each phase measured.

use scalebook_shared::config::{AmpMode, TrainConfig};
use scalebook_shared::layout::Token;
use scalebook_shared::profile::ranges;
use std::rc::Rc;

use tch::{Device, Tensor, nn};

use crate::Error;
use crate::data::Batch;
use crate::ffi::{ProcessGroup, Range, ReduceOp};
use crate::model::{Forward, Part, VisionTransformer, VitSpec};
use crate::parallel::{Parallel, ParallelVit};
use crate::train::amp::{Autocast, GradScaler};
use crate::train::clock::{Mark, Phase};
use crate::train::lanes::{Lanes, slices};
use crate::train::loss::{l2_loss, training_loss, weighted_rmse};
use crate::train::optim::Optimizer;
use crate::train::pipeline::Pipeline;
use crate::train::sync::GradSync;
use crate::train::zero::Holdings;

/// Where one step's time went, in seconds (data wait is measured by the caller).
#[derive(Debug, Clone, Copy, Default)]
pub struct StepTimes {
    pub forward: f64,
    pub backward: f64,
    pub optimizer: f64,
    /// Whole-GPU used memory after the forward pass, in bytes, when probed on a GPU.
    pub memory_after_forward: Option<u64>,
}

/// The times of a step's phases, as they are measured.
#[derive(Default)]
struct Phases {
    forward: Phase,
    backward: Phase,
    optimizer: Phase,
}

/// The model and everything that updates it.
pub struct Learner {
    pub model: Box<dyn Forward>,
    pub optimizer: Optimizer,
    pub scaler: Option<GradScaler>,
    pub amp: AmpMode,
    pub device: Device,
    /// Gradient averaging over the data-parallel group, when there is one.
    pub sync: Option<GradSync>,
    /// Set before a step to read the GPU's memory right after its forward pass (the
    /// tutorial logs it at the second step); the step leaves the reading in [`StepTimes`].
    pub probe_memory: bool,
    /// The batch split over the CPU's cores, where that cannot change a result.
    pub lanes: Option<Lanes>,
    /// Micro-batches per step (`gradient_accumulation_steps`).
    pub micro_batches: usize,
    /// This rank's stage of the pipeline (pp > 1), which runs the step's passes in its
    /// schedule's order; `model` is the same pipeline, predicting.
    pub pipeline: Option<Pipeline>,
}

impl Learner {
    /// The model of `config` on `device`, with its optimizer (Adam fused when `enable_jit` or
    /// `enable_fused` asks) and, for fp16, a loss scaler. The VarStore owns the parameters.
    /// With `parallel` (tp·cp > 1), this rank's part of the model, cut from a serial model
    /// initialised from the current seed, which must be the same on every rank.
    pub fn build(config: &TrainConfig, device: Device, parallel: Option<Parallel>) -> Result<(nn::VarStore, Learner), Error> {
        Learner::build_stage(config, device, parallel, None)
    }

    /// As [`Learner::build`]; with `stages` (the pipeline's group, pp > 1), this rank's stage
    /// of the pipeline: its chunks of the model only.
    pub fn build_stage(
        config: &TrainConfig,
        device: Device,
        parallel: Option<Parallel>,
        stages: Option<Rc<ProcessGroup>>,
    ) -> Result<(nn::VarStore, Learner), Error> {
        let serial_model = parallel.is_none() && stages.is_none();
        let lanes = Lanes::for_run(device, serial_model, config.dropout, tch::get_num_threads(), config.global_batch_size);
        // Ranks that hold different shards of the model see different gradients, so one may
        // overflow alone: the scaler's overflow flag is shared over their tp-cp group, and
        // over the pipeline's stages.
        let shards = parallel.as_ref().map(|p| p.comm.shared_group(Token::TP_CP)).into_iter().chain(stages.clone());
        let spec = VitSpec::from(config);
        let serial_vs = nn::VarStore::new(device);
        let serial = VisionTransformer::new(&serial_vs.root(), &spec);
        let (vs, model, pipeline): (nn::VarStore, Box<dyn Forward>, _) = match (stages, parallel) {
            (None, None) => (serial_vs, Box::new(serial), None),
            (None, Some(par)) => {
                let vs = nn::VarStore::new(device);
                let model = ParallelVit::cut(&vs.root(), &spec, &serial_vs.variables(), par, &Part::whole(config.depth))?;
                (vs, Box::new(model), None)
            }
            (Some(group), par) => {
                let vs = nn::VarStore::new(device);
                let pipeline = Pipeline::new(&vs, config, &serial_vs.variables(), par, group, device)?;
                (vs, Box::new(pipeline.clone()), Some(pipeline))
            }
        };
        let fused = config.enable_jit || config.enable_fused;
        let optimizer = Optimizer::new(config.optimizer, vs.variables().into_iter().collect(), fused);
        let scaler = (config.amp_mode == AmpMode::Fp16).then(|| {
            let mut scaler = GradScaler::new(device, None);
            shards.for_each(|group| scaler.share_with(group));
            scaler
        });
        let micro_batches = config.gradient_accumulation_steps.max(1);
        let amp = config.amp_mode;
        Ok((vs, Learner { model, optimizer, scaler, amp, device, sync: None, probe_memory: false, lanes, micro_batches, pipeline }))
    }

    /// Takes over `sync` as this learner's gradient sync. With ZeRO, the optimizer becomes the
    /// one over this rank's shards (`config`'s choice; its state so far, none in a new run, is
    /// dropped), the fp16 scaler's overflow check is shared over dp too (each rank unscales
    /// only its shard), and at stage 3 the model gathers its blocks around their use, on one
    /// lane (lanes would gather and release the same blocks from several threads).
    pub fn attach(&mut self, sync: GradSync, config: &TrainConfig) -> Result<(), Error> {
        if let Some(optimizer) = sync.sharded_optimizer(config.optimizer, config.enable_jit || config.enable_fused) {
            self.optimizer = optimizer;
            if let Some(scaler) = &mut self.scaler {
                scaler.share_with(sync.comm.shared_group(Token::DP));
            }
        }
        if let Some(hooks) = sync.part_hooks() {
            self.model.set_part_hooks(hooks)?;
            self.lanes = None;
        }
        self.sync = Some(sync);
        Ok(())
    }

    /// Runs `f` with every parameter in memory (ZeRO-3 keeps only shards between steps):
    /// to save or restore a checkpoint.
    pub fn with_full_parameters<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        match &self.sync {
            Some(sync) => sync.with_full_parameters(f),
            None => f(),
        }
    }

    /// The log's `ZeRO:` line, when ZeRO shards this learner's state.
    pub fn describe_zero(&self) -> Option<String> {
        self.sync.as_ref().and_then(|sync| sync.describe_zero(&self.optimizer))
    }

    /// The training state this rank holds between steps: its ZeRO shards' (and what it
    /// gathers), or, without ZeRO, every parameter it trains with its gradient and optimizer
    /// state (a tp, cp or pipeline rank's own part).
    pub fn holdings(&self) -> Holdings {
        if let Some((held, _)) = self.sync.as_ref().and_then(|sync| sync.holdings(&self.optimizer)) {
            return held;
        }
        let (params, grads) = self.optimizer.param_and_grad_bytes();
        Holdings { params, grads, optimizer: self.optimizer.state_bytes() }
    }

    /// zero_grad, forward and loss under autocast, backward (scaled for fp16) with gradients
    /// averaged over dp, optimizer step at `lr`. Returns the loss averaged over dp (as the tutorial
    /// logs it) and the phase times (the all-reduce counts as backward, where DDP overlaps it).
    ///
    /// With micro-batches, each slice of the batch runs forward and backward in turn, its loss
    /// weighted by its share of the batch so the accumulated gradients are the whole batch's;
    /// only the last backward pass issues all-reduces (DDP's `no_sync` on the others), where
    /// ZeRO's stages 2 and 3 reduce-scatter each micro-batch's gradients. A pipeline's stage
    /// runs its passes of the micro-batches instead, in its schedule's order.
    pub fn train_step(&mut self, batch: &Batch, lr: f64) -> Result<(f64, StepTimes), Error> {
        let (input, target) = (batch.input.to_device(self.device), batch.target.to_device(self.device));
        self.optimizer.zero_grad();
        if let Some(sync) = &self.sync {
            sync.zero_grad();
            sync.broadcast_buffers()?;
        }
        let mut phases = Phases::default();
        let (loss, memory_after_forward) = match &self.pipeline {
            Some(pipeline) => {
                let spent = (&mut phases.forward, &mut phases.backward);
                (pipeline.train(&input, &target, self.scaler.as_ref(), self.sync.as_ref(), spent)?, None)
            }
            None => self.accumulate(&input, &target, &mut phases)?,
        };
        let reduce_start = Mark::now(self.device)?;
        if let Some(sync) = &self.sync {
            let _range = Range::enter(ranges::GRAD_ALLREDUCE);
            sync.reduce_gradients()?;
        }
        phases.backward.add(reduce_start, Mark::now(self.device)?);
        let optimizer_start = Mark::now(self.device)?;
        let optimizer_range = Range::enter(ranges::OPTIMIZER);
        self.optimizer.step(lr, self.scaler.as_mut())?;
        if let Some(sync) = &self.sync {
            sync.after_step()?;
        }
        if let Some(scaler) = &mut self.scaler {
            scaler.update();
        }
        phases.optimizer.add(optimizer_start, Mark::now(self.device)?);
        drop(optimizer_range);
        // Reading the loss waits for the step; the phases' marks are passed by then.
        let loss = self.dp_mean(loss.detach())?;
        let (forward, backward, optimizer) = (phases.forward.seconds()?, phases.backward.seconds()?, phases.optimizer.seconds()?);
        Ok((loss, StepTimes { forward, backward, optimizer, memory_after_forward }))
    }

    /// The micro-batches of one step (`gradient_accumulation_steps`), forward and backward
    /// each in turn, on the CPU's lanes where there are: their gradients accumulated, and
    /// the batch's loss (with the GPU memory after the first forward pass when probed).
    fn accumulate(&self, input: &Tensor, target: &Tensor, phases: &mut Phases) -> Result<(Tensor, Option<u64>), Error> {
        let size = input.size()[0];
        let micro = self.micro_batches.min(size.max(1) as usize);
        let (mut loss, mut memory_after_forward) = (Tensor::zeros([], (tch::Kind::Float, self.device)), None);
        for (k, (start, len)) in slices(size, micro).enumerate() {
            let (x, y) = (input.narrow(0, start, len), target.narrow(0, start, len));
            let weight = len as f64 / size as f64;
            if let Some(sync) = &self.sync {
                sync.before_backward(k + 1 == micro, self.lanes.map_or(1, |lanes| lanes.count_for(len)));
            }
            let part = match self.lanes {
                Some(lanes) => {
                    let outcome = lanes.forward_backward(self.model.as_ref(), &x, &y, self.amp, weight)?;
                    phases.forward.add_seconds(outcome.forward.as_secs_f64());
                    phases.backward.add_seconds(outcome.backward.as_secs_f64());
                    outcome.loss
                }
                None => {
                    let (part, memory) = self.forward_backward(&x, &y, weight, phases, k == 0)?;
                    memory_after_forward = memory_after_forward.or(memory);
                    part
                }
            };
            loss += part;
            if let Some(sync) = self.sync.as_ref().filter(|sync| sync.zero_stage() >= 2) {
                let reduce_start = Mark::now(self.device)?;
                let _range = Range::enter(ranges::GRAD_ALLREDUCE);
                sync.after_backward()?;
                phases.backward.add(reduce_start, Mark::now(self.device)?);
            }
        }
        Ok((loss, memory_after_forward))
    }

    /// Forward, loss (weighted by `weight`) and backward on one lane, their times added to
    /// `phases`: the loss, and the GPU memory after the forward pass when `probe` asks.
    fn forward_backward(
        &self,
        input: &Tensor,
        target: &Tensor,
        weight: f64,
        phases: &mut Phases,
        probe: bool,
    ) -> Result<(Tensor, Option<u64>), Error> {
        let forward_start = Mark::now(self.device)?;
        let loss = training_loss(self.model.as_ref(), self.device, self.amp, input, target)? * weight;
        phases.forward.add(forward_start, Mark::now(self.device)?);
        let memory_after_forward = match self.device {
            Device::Cuda(i) if self.probe_memory && probe => crate::ffi::gpu_memory_used(i).ok(),
            _ => None,
        };
        let backward_start = Mark::now(self.device)?;
        let backward_range = Range::enter(ranges::BACKWARD);
        match &self.scaler {
            Some(scaler) => scaler.scale(&loss).backward(),
            None => loss.backward(),
        }
        drop(backward_range);
        phases.backward.add(backward_start, Mark::now(self.device)?);
        Ok((loss.detach(), memory_after_forward))
    }

    /// A scalar averaged over the data-parallel group.
    pub fn dp_mean(&self, value: Tensor) -> Result<f64, Error> {
        let mut value = value.to_kind(tch::Kind::Float).contiguous();
        if let Some(sync) = &self.sync {
            sync.comm.group(Token::DP).all_reduce(&mut value, ReduceOp::Avg)?;
        }
        Ok(f64::try_from(&value)?)
    }

    /// Loss and per-channel RMSE of one batch, without gradients.
    pub fn evaluate(&self, batch: &Batch) -> Result<(Tensor, Tensor), Error> {
        let (input, target) = (batch.input.to_device(self.device), batch.target.to_device(self.device));
        let _autocast = Autocast::enter(self.device, self.amp)?;
        tch::no_grad(|| {
            if let Some(pipeline) = &self.pipeline {
                return pipeline.evaluate(&input, &target);
            }
            let pred = self.model.forward(&input, false)?;
            Ok((l2_loss(&pred, &target), weighted_rmse(&pred, &target)))
        })
    }

    /// The model's prediction for `input`, without gradients (what the weather maps show).
    pub fn predict(&self, input: &Tensor) -> Result<Tensor, Error> {
        let input = input.to_device(self.device);
        let _autocast = Autocast::enter(self.device, self.amp)?;
        tch::no_grad(|| self.model.forward(&input, false))
    }
}
