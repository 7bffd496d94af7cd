//! A training step's passes on one pipeline rank, in its schedule's order
//! (`Schedule::order`: GPipe, 1F1B or interleaved 1F1B). A forward pass takes its input from
//! the micro-batch (chunk 0) or from the rank of the chunk before, and sends its output on; a
//! backward pass starts from the loss (last chunk) or from the gradient the next chunk's rank
//! sent back, and sends its input's gradient back. Sends do not wait: the order only ever
//! blocks on receives, which is what the schedules' simulation assumes (and why no order
//! deadlocks). Each pass is a profile range of its own (`forward mb 3 chunk 1`), inside the
//! step's `forward` or `backward` range, so a rank's trace lane shows its passes and the
//! bubble between them: the wait for a pass's input is outside its range, so the bubble
//! measured from the ranges is the time a rank had nothing to compute.

use std::collections::HashMap;

use scalebook_shared::profile::ranges;
use tch::{Kind, Tensor};

use super::Pipeline;
use super::stage::Chunk;
use crate::Error;
use crate::ffi::{Range, Sent, backward_with};
use crate::train::GradSync;
use crate::train::amp::{Autocast, GradScaler};
use crate::train::clock::{Mark, Phase};
use crate::train::loss::l2_loss;

/// What a forward pass leaves for its backward pass: its input (a leaf whose gradient goes
/// back, after chunk 0) and its output (the loss, on the last chunk).
struct Held {
    input: Tensor,
    output: Tensor,
}

/// Where a pass runs: its chunk (and the chunk's place among this rank's), its micro-batch.
#[derive(Clone, Copy)]
struct At<'c> {
    chunk: &'c Chunk,
    local: usize,
    micro_batch: usize,
}

impl At<'_> {
    fn key(self) -> (usize, usize) {
        (self.local, self.micro_batch)
    }

    /// A backward pass whose forward pass this rank has not run: a schedule's order is wrong.
    fn out_of_order(self) -> Error {
        Error::Internal {
            what: "the pipeline's schedule".into(),
            message: format!(
                "the backward pass of micro-batch {} on chunk {} comes before its forward pass",
                self.micro_batch, self.chunk.index
            ),
        }
    }
}

/// A step's batch and what its passes share.
struct Step<'a> {
    input: &'a Tensor,
    target: &'a Tensor,
    scaler: Option<&'a GradScaler>,
    /// Every micro-batch's (start, length) in the batch.
    slices: Vec<(i64, i64)>,
    held: HashMap<(usize, usize), Held>,
    sent: Vec<Sent>,
    loss: Tensor,
}

impl Pipeline {
    /// One step's forward and backward passes on this rank, their times added to `forward`
    /// and `backward`; the gradients of this rank's chunks accumulate into their parameters.
    /// Each micro-batch's loss is weighted by its share of the batch, so the sum over them is
    /// the batch's mean loss, which every rank returns. `sync` is told before each backward
    /// pass whether it is this rank's last (DDP's overlapped all-reduce issues from then on).
    pub fn train(
        &self,
        input: &Tensor,
        target: &Tensor,
        scaler: Option<&GradScaler>,
        sync: Option<&GradSync>,
        (forward, backward): (&mut Phase, &mut Phase),
    ) -> Result<Tensor, Error> {
        let inner = &self.0;
        let (stage, stages) = (inner.links.group().rank(), inner.links.group().size());
        let order = inner.schedule.order(stages, inner.micro_batches, stage);
        let slices = crate::train::slices(input.size()[0], inner.micro_batches).collect();
        let loss = Tensor::zeros([], (Kind::Float, inner.device));
        let mut step = Step { input, target, scaler, slices, held: HashMap::new(), sent: Vec::new(), loss };
        for (i, &(local, micro_batch, is_backward)) in order.iter().enumerate() {
            let chunk = inner.chunks.get(local).ok_or_else(|| Error::Internal {
                what: "the pipeline's schedule".into(),
                message: format!("rank {stage} holds no local chunk {local}"),
            })?;
            let start = Mark::now(inner.device)?;
            let phase = if is_backward { ranges::BACKWARD } else { ranges::FORWARD };
            let phase_range = Range::enter(phase);
            let at = At { chunk, local, micro_batch };
            let received = self.receive(&step, at, is_backward)?;
            let pass_range = Range::enter(&ranges::pipeline_pass(is_backward, micro_batch, chunk.index));
            if is_backward {
                if let Some(sync) = sync {
                    sync.before_backward(i + 1 == order.len(), 1);
                }
                self.backward_pass(&mut step, at, received)?;
            } else {
                self.forward_pass(&mut step, at, received)?;
            }
            drop(pass_range);
            drop(phase_range);
            let spent = if is_backward { &mut *backward } else { &mut *forward };
            spent.add(start, Mark::now(inner.device)?);
        }
        step.sent.into_iter().try_for_each(Sent::wait)?;
        inner.links.share_from_last(step.loss)
    }

    /// What a pass waits for from another rank: a forward's input from the chunk before (all
    /// but chunk 0), a backward's output gradient from the chunk after (all but the last).
    fn receive(&self, step: &Step<'_>, at: At<'_>, backward: bool) -> Result<Option<Tensor>, Error> {
        let (chunk, micro_batch) = (at.chunk, at.micro_batch);
        let links = &self.0.links;
        if !backward {
            let (_, len) = step.slices[micro_batch];
            return (chunk.index > 0).then(|| links.recv(&links.activation(len), chunk.index, micro_batch, false)).transpose();
        }
        if links.is_last(chunk.index) {
            return Ok(None);
        }
        let held = step.held.get(&at.key()).ok_or_else(|| at.out_of_order())?;
        links.recv(&held.output.size(), chunk.index + 1, micro_batch, true).map(Some)
    }

    fn forward_pass(&self, step: &mut Step<'_>, at: At<'_>, received: Option<Tensor>) -> Result<(), Error> {
        let (chunk, micro_batch) = (at.chunk, at.micro_batch);
        let links = &self.0.links;
        let (start, len) = step.slices[micro_batch];
        let input = match received {
            None => step.input.narrow(0, start, len),
            Some(activation) => activation.set_requires_grad(true),
        };
        let _autocast = Autocast::enter(self.0.device, self.0.amp)?;
        let y = chunk.model.forward(&input, true)?;
        let output = match links.is_last(chunk.index) {
            true => {
                let batch = step.input.size()[0];
                let loss = l2_loss(&y, &step.target.narrow(0, start, len)) * (len as f64 / batch as f64);
                step.loss += loss.detach();
                loss
            }
            false => {
                step.sent.push(links.send(&y, chunk.index + 1, micro_batch, false)?);
                y
            }
        };
        step.held.insert(at.key(), Held { input, output });
        Ok(())
    }

    fn backward_pass(&self, step: &mut Step<'_>, at: At<'_>, received: Option<Tensor>) -> Result<(), Error> {
        let (chunk, micro_batch) = (at.chunk, at.micro_batch);
        let links = &self.0.links;
        let held = step.held.remove(&at.key()).ok_or_else(|| at.out_of_order())?;
        match received {
            None => match step.scaler {
                Some(scaler) => scaler.scale(&held.output).backward(),
                None => held.output.backward(),
            },
            Some(grad) => backward_with(&held.output, &grad.to_kind(held.output.kind()))?,
        }
        if chunk.index > 0 {
            step.sent.push(links.send(&held.input.grad(), chunk.index, micro_batch, true)?);
        }
        Ok(())
    }
}
