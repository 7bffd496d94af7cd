//! A run under way, epoch by epoch: the steps of an epoch (one function per benchy trial), the
//! epoch's report and validation, and its checkpoint, each a function of its own.

use std::rc::Rc;
use std::time::Instant;

use scalebook_shared::config::{BenchyTrial, TrainConfig, lr_at};
use scalebook_shared::layout::Token;
use scalebook_shared::metrics::tags;
use scalebook_shared::profile::ranges;
use tch::nn;

use super::checkpoint::{Checkpoints, Position};
use super::feed::Feed;
use super::maps::WeatherMaps;
use super::profile::StepProfile;
use super::report::{EpochReport, Reporter, StepReport, StepTrained, ValidReport};
use super::split::Split;
use super::{GIB, Learner, Loaders, MIB, Summary, amp, validate};
use crate::Error;
use crate::data::{Batch, Epoch};
use crate::dist::Comm;
use crate::ffi::Range;
use crate::output::{Logger, py_float};

/// Everything an epoch reads and moves on.
pub(super) struct Run<'a> {
    pub config: &'a TrainConfig,
    pub log: &'a Logger,
    pub comm: Rc<Comm>,
    pub vs: nn::VarStore,
    pub learner: Learner,
    pub loaders: Loaders,
    pub report: Reporter,
    pub profile: StepProfile,
    /// Rank 0 draws the maps; its tp-cp group (dp rank 0) joins the prediction's forward pass.
    pub maps: Option<WeatherMaps>,
    /// The one batch SC22's `synthetic` benchy steps on over and over.
    pub cached: Option<Batch>,
    pub checkpoints: Checkpoints,
    /// The seed and config a checkpoint records, to resume with the same data order.
    pub seed: u64,
    pub config_json: serde_json::Value,
    pub global_batch: f64,
    pub iters_per_epoch: u64,
    pub num_epochs: u64,
    /// Steps taken so far (a resumed run's count included).
    pub steps: u64,
    /// The next epoch's batches, their workers started when the last epoch's steps ended.
    pub ahead: Option<(u64, Epoch)>,
}

impl Run<'_> {
    /// Epoch `epoch` (from 0): its steps, then its report, validation, maps and checkpoint;
    /// the run's summary after it (none for a benchy trial that trains nothing).
    pub fn epoch(&mut self, epoch: u64) -> Result<Option<Summary>, Error> {
        let start = Instant::now();
        match self.config.benchy_trial {
            BenchyTrial::Io => {
                self.read_epoch(epoch)?;
                self.end_read_epoch(epoch + 1, start.elapsed().as_secs_f64())?;
                Ok(None)
            }
            BenchyTrial::Full | BenchyTrial::Synthetic => {
                let (losses, split) = self.train_epoch(epoch)?;
                self.read_ahead(epoch + 1);
                split.report(&self.comm, &mut self.report, self.steps, epoch + 1)?;
                self.end_train_epoch(epoch + 1, start.elapsed().as_secs_f64(), &losses).map(Some)
            }
        }
    }

    fn batches(&mut self, epoch: u64) -> Box<dyn Iterator<Item = Result<Batch, Error>>> {
        match (&self.cached, self.ahead.take()) {
            (Some(batch), _) => {
                let batch = batch.shallow_clone();
                Box::new((0..self.iters_per_epoch).map(move |_| Ok(batch.shallow_clone())))
            }
            (None, Some((ahead, batches))) if ahead == epoch => Box::new(batches),
            (None, _) => Box::new(self.loaders.train.epoch(epoch)),
        }
    }

    /// Starts the loader's workers on `epoch` while this one validates and saves, as
    /// PyTorch's `persistent_workers` with its prefetching keeps them busy: without it, each
    /// epoch's first step waited for a worker to read a whole batch (0.3 s on the H200 with
    /// `short_opt`, most of the gap between an epoch's speed and its steps'). A run stopped
    /// before that epoch has read at most each worker's prefetch for nothing.
    fn read_ahead(&mut self, epoch: u64) {
        if self.cached.is_none() && epoch < self.num_epochs && self.loaders.train.num_workers() > 0 {
            self.ahead = Some((epoch, self.loaders.train.epoch(epoch)));
        }
    }

    /// The next batch, and the seconds waited for it (`None` when the epoch has no more).
    fn next_batch(batches: &mut dyn Iterator<Item = Result<Batch, Error>>) -> Result<Option<(Batch, f64)>, Error> {
        let wait_start = Instant::now();
        let wait_range = Range::enter(ranges::DATA_WAIT);
        let batch = batches.next().transpose()?;
        drop(wait_range);
        Ok(batch.map(|b| (b, wait_start.elapsed().as_secs_f64())))
    }

    /// The `io` trial's epoch: batches read and dropped, each timed as a step.
    fn read_epoch(&mut self, epoch: u64) -> Result<(), Error> {
        let mut batches = self.batches(epoch);
        for _ in 0..self.iters_per_epoch {
            self.profile.before(self.steps + 1)?;
            let step_range = Range::enter(&format!("{}{}", ranges::STEP_PREFIX, self.steps + 1));
            let Some((_, data_wait)) = Self::next_batch(&mut batches)? else { break };
            self.steps += 1;
            let samples_per_sec = self.global_batch / data_wait.max(f64::MIN_POSITIVE);
            self.report.step(self.steps, epoch + 1, &StepReport { data_wait, samples_per_sec, trained: None })?;
            if let Some(bar) = self.log.progress() {
                bar.inc(1);
            }
            drop(step_range);
            self.profile.after(self.steps, self.log)?;
        }
        Ok(())
    }

    /// A training epoch's steps; their losses, and where their time went.
    fn train_epoch(&mut self, epoch: u64) -> Result<(Vec<f64>, Split), Error> {
        let e = epoch + 1;
        let mut losses = Vec::with_capacity(self.iters_per_epoch as usize);
        let mut split = Split::start(&self.comm);
        let mut feed = Feed::new(self.batches(epoch), self.iters_per_epoch as usize, self.learner.device);
        for i in 0..self.iters_per_epoch {
            self.profile.before(self.steps + 1)?;
            let step_range = Range::enter(&format!("{}{}", ranges::STEP_PREFIX, self.steps + 1));
            let Some((batch, data_wait)) = feed.next_batch()? else { break };
            let lr = lr_at(self.config, self.steps as usize);
            let step_start = Instant::now();
            // The tutorial reads the GPU's memory after the forward pass of each epoch's second step.
            self.learner.probe_memory = i == 1;
            let (loss, times) = self.learner.train_step(&batch, lr)?;
            if let Some(used) = times.memory_after_forward {
                self.log.info(&format!(" Memory usage after forward pass: {} GB.", py_float(used as f64 / GIB)));
            }
            let samples_per_sec = self.global_batch / (data_wait + step_start.elapsed().as_secs_f64());
            split.step(data_wait, &times);
            self.steps += 1;
            losses.push(loss);
            let trained = Some(StepTrained { loss, lr, times });
            self.report.step(self.steps, e, &StepReport { data_wait, samples_per_sec, trained })?;
            if let Some(bar) = self.log.progress() {
                bar.set_message(format!("epoch {e}/{} loss {loss:.4}", self.num_epochs));
                bar.inc(1);
            }
            drop(step_range);
            self.profile.after(self.steps, self.log)?;
        }
        Ok((losses, split))
    }

    /// The `io` trial's epoch line and speeds (no validation, no checkpoint).
    fn end_read_epoch(&mut self, e: u64, elapsed: f64) -> Result<(), Error> {
        let iters_per_sec = self.iters_per_epoch as f64 / elapsed;
        let samples_per_sec = iters_per_sec * self.global_batch;
        self.log.info(&format!("Time taken for epoch {e} is {elapsed:.6} sec, avg {samples_per_sec:.6} samples/sec"));
        self.report.epoch(self.steps, e, &EpochReport { iters_per_sec, samples_per_sec, trained: None })?;
        self.peak_memory(e)?;
        self.report.flush()
    }

    /// The most memory any rank has held so far, logged and reported: on a GPU the caching
    /// allocator's peak (the tensors, as `torch.cuda.max_memory_allocated` counts them), on
    /// the CPU the operating system's peak resident set (libtorch's caches and the loader's
    /// batches count too).
    fn peak_memory(&mut self, e: u64) -> Result<(), Error> {
        let (own, what) = match self.learner.device {
            tch::Device::Cuda(i) => (crate::ffi::gpu_peak_allocated(i)? as f64, "the GPU allocator's peak"),
            _ => {
                let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
                    .map_err(|errno| Error::Native { what: "peak memory (getrusage)".into(), message: errno.to_string() })?;
                // Linux counts ru_maxrss in KiB.
                (usage.max_rss() as f64 * 1024.0, "resident set")
            }
        };
        let peak = self.comm.max(own)? / GIB;
        let ranks = self.comm.layout().world();
        self.log.info(&format!("  Peak memory: {} GB ({what}, the largest of {ranks} rank(s))", py_float(peak)));
        self.report.scalar(self.steps, e, tags::run::PEAK_MEMORY, peak)?;
        self.state_held(e)
    }

    /// The training state the fullest rank holds, part by part (parameters, gradients,
    /// optimizer state): what ZeRO shards, reported so a sweep sets each stage beside the
    /// estimate's.
    fn state_held(&mut self, e: u64) -> Result<(), Error> {
        let held = self.learner.holdings();
        for (tag, bytes) in tags::run::STATE_HELD.into_iter().zip([held.params, held.grads, held.optimizer]) {
            let most = self.comm.max(bytes as f64)? / MIB;
            self.report.scalar(self.steps, e, tag, most)?;
        }
        Ok(())
    }

    /// A training epoch's end, as the tutorial logs it: its speed and loss, a validation pass,
    /// the maps, then a checkpoint.
    fn end_train_epoch(&mut self, e: u64, elapsed: f64, losses: &[f64]) -> Result<Summary, Error> {
        let iters_per_sec = losses.len() as f64 / elapsed;
        let samples_per_sec = iters_per_sec * self.global_batch;
        let train_loss = losses.iter().sum::<f64>() / losses.len().max(1) as f64;
        self.log.info(&format!("Time taken for epoch {e} is {elapsed:.6} sec, avg {samples_per_sec:.6} samples/sec"));
        self.log.info(&format!("  Avg train loss={train_loss:.6}"));
        let trained = Some((train_loss, lr_at(self.config, self.steps as usize)));
        self.report.epoch(self.steps, e, &EpochReport { iters_per_sec, samples_per_sec, trained })?;

        let val_start = Instant::now();
        let (loss, rmse_u10) = validate(&self.learner, &self.loaders.valid, e - 1)?;
        self.log.info(&format!("  Avg val loss={}", py_float(loss)));
        self.log.info(&format!("  Total validation time: {} sec", py_float(val_start.elapsed().as_secs_f64())));
        self.report.valid(self.steps, e, &ValidReport { loss, rmse_u10 })?;
        // Only dp rank 0 predicts for the maps: at ZeRO stage 3 every dp rank gathers the
        // parameters for it first, so that rank's forward passes need nobody else.
        let (learner, maps, report) = (&self.learner, &mut self.maps, &mut self.report);
        let (valid, steps, num_epochs, log) = (self.loaders.valid.dataset(), self.steps, self.num_epochs, self.log);
        learner.with_full_parameters(|| {
            if let Some(maps) = maps {
                maps.draw(learner, e, steps, report)?;
                if e == num_epochs {
                    maps.roll_out(learner, valid, e, steps, report.writes(), log)?;
                }
            }
            Ok(())
        })?;
        self.peak_memory(e)?;
        self.report.flush()?;
        self.checkpoint(e)?;
        let (steps, epochs) = (self.steps, self.num_epochs);
        Ok(Summary { steps, epochs, final_train_loss: train_loss, final_valid_loss: loss, final_rmse_u10: rmse_u10 })
    }

    /// The checkpoint after epoch `e`: each rank writes its part ([`Run::write_checkpoint`]),
    /// then, once every rank says its files are complete, rank 0 writes where the run stands,
    /// which names them. A rank that failed to write leaves the previous checkpoint standing.
    fn checkpoint(&self, e: u64) -> Result<(), Error> {
        let written = self.write_checkpoint();
        let failed = self.comm.max(if written.is_err() { 1.0 } else { 0.0 })?;
        written?;
        if failed > 0.0 {
            return Err(self.checkpoints.not_written(e));
        }
        if !self.comm.is_root() {
            return Ok(());
        }
        let dp_shards = self.learner.sync.as_ref().and_then(super::GradSync::shards).map(|_| self.comm.size(Token::DP));
        let position = Position { epochs_done: e, steps: self.steps, seed: self.seed, config: self.config_json.clone(), dp_shards };
        self.checkpoints.commit(&position)
    }

    /// This rank's part of the checkpoint. With ZeRO, every dp rank writes its own shards, all
    /// at once and nothing gathered. Without, one copy of each model-parallel shard (the dp
    /// replicas are identical; a pipeline's stages gathered on its first).
    fn write_checkpoint(&self) -> Result<(), Error> {
        let scaler = self.learner.scaler.iter().flat_map(amp::GradScaler::state);
        if let Some(shards) = self.learner.sync.as_ref().and_then(super::GradSync::shards) {
            let state = self.learner.optimizer.state();
            let layout = shards.layout(&state)?;
            // ZeRO shards only what is trained: the rest every rank holds whole.
            let untrained = self.vs.variables().into_iter().filter(|(_, v)| !v.requires_grad());
            let tensors: Vec<_> = shards.shard_tensors(state).into_iter().chain(untrained).chain(scaler).collect();
            return self.checkpoints.save_dp_shard(&tensors, &layout, self.comm.rank(Token::DP));
        }
        if self.comm.rank(Token::DP) != 0 {
            return Ok(());
        }
        let mut tensors: Vec<_> = self.vs.variables().into_iter().collect();
        tensors.extend(self.learner.optimizer.state());
        tensors.extend(scaler);
        let tensors = match &self.learner.pipeline {
            Some(pipeline) => match pipeline.gather_to_first(tensors)? {
                Some(all) => all,
                None => return Ok(()),
            },
            None => tensors,
        };
        self.checkpoints.save(&tensors)
    }
}
