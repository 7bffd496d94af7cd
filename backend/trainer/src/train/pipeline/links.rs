//! The messages between pipeline ranks: a chunk's output to the rank of the next chunk, and
//! the gradient of a chunk's input back to the rank of the one before, each tagged with the
//! boundary it crosses, its micro-batch and its direction, so a receive takes exactly the
//! message it waits for whatever else is under way between the two ranks.

use std::rc::Rc;

use tch::{Device, Kind, Tensor};

use crate::Error;
use crate::ffi::{ProcessGroup, Sent};

pub(super) struct Links {
    group: Rc<ProcessGroup>,
    /// Chunks in the whole pipeline (pp·v).
    chunks: usize,
    micro_batches: usize,
    /// An activation's shape per sample: this rank's tokens (its cp share) by the width.
    sample: [i64; 2],
    device: Device,
}

impl Links {
    pub fn new(group: Rc<ProcessGroup>, chunks: usize, micro_batches: usize, sample: [i64; 2], device: Device) -> Links {
        Links { group, chunks, micro_batches, sample, device }
    }

    pub fn group(&self) -> &ProcessGroup {
        &self.group
    }

    pub fn is_last(&self, chunk: usize) -> bool {
        chunk + 1 == self.chunks
    }

    /// The pipeline rank that runs `chunk`.
    fn rank_of(&self, chunk: usize) -> usize {
        chunk % self.group.size()
    }

    /// The shape of the activations of `batch` samples between two chunks.
    pub fn activation(&self, batch: i64) -> [i64; 3] {
        [batch, self.sample[0], self.sample[1]]
    }

    /// The tag of what crosses into chunk `boundary` (its input) for `micro_batch`, or with
    /// `backward` back out of it (its input's gradient).
    fn tag(&self, boundary: usize, micro_batch: usize, backward: bool) -> usize {
        (boundary * self.micro_batches + micro_batch) * 2 + usize::from(backward)
    }

    /// The rank at the other end of `boundary` (the input of chunk `boundary`) from the sender's
    /// side: forward to the chunk itself, backward to the chunk before it.
    fn sender_peer(&self, boundary: usize, backward: bool) -> usize {
        self.rank_of(if backward { boundary - 1 } else { boundary })
    }

    /// Sends `t`: chunk `boundary`'s input for `micro_batch` to its rank, or with `backward`
    /// that input's gradient to the rank of the chunk before. In float32 (the residual stream
    /// is, under autocast too), without waiting for it.
    pub fn send(&self, t: &Tensor, boundary: usize, micro_batch: usize, backward: bool) -> Result<Sent, Error> {
        let t = t.detach().to_kind(Kind::Float).contiguous();
        self.group.send(&t, self.sender_peer(boundary, backward), self.tag(boundary, micro_batch, backward))
    }

    /// Receives what [`Links::send`] sent across `boundary` for `micro_batch`, of `shape`.
    pub fn recv(&self, shape: &[i64], boundary: usize, micro_batch: usize, backward: bool) -> Result<Tensor, Error> {
        let peer = self.rank_of(if backward { boundary } else { boundary - 1 });
        let mut t = Tensor::empty(shape, (Kind::Float, self.device));
        self.group.recv(&mut t, peer, self.tag(boundary, micro_batch, backward))?;
        Ok(t)
    }

    /// `value` as the last chunk's rank has it, on every rank of the pipeline (the others pass
    /// a tensor of its shape): a scalar loss, or a validation batch's loss and RMSE.
    pub fn share_from_last(&self, value: Tensor) -> Result<Tensor, Error> {
        let mut t = value.detach().to_kind(Kind::Float).contiguous();
        self.group.broadcast(&mut t, self.rank_of(self.chunks - 1))?;
        Ok(t)
    }
}
