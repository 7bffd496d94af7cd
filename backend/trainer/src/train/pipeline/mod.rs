//! Pipeline parallelism (`pipeline_parallel`): the ViT cut into `pp·v` chunks of consecutive
//! blocks, chunk `c` on pipeline rank `c mod pp` ([`stage`]), each step's batch cut into
//! `num_micro_batches` micro-batches that go through the chunks in the order the config's
//! schedule gives each rank ([`runner`]: the order `shared::pipeline` simulates for the page's
//! picture, so the picture and the run are one schedule), activations and their gradients
//! passed between ranks point to point ([`links`]).
//!
//! Only the rank of the last chunk computes the loss; it shares it (one scalar a step, a few
//! for a validation batch) with the rest of its pipeline, so every rank returns what one rank
//! would, and world rank 0 (the first stage) reports it as it does without a pipeline.

mod checkpoint;
mod links;
mod runner;
mod stage;

use std::collections::HashMap;
use std::rc::Rc;

use scalebook_shared::config::{AmpMode, TrainConfig};
use scalebook_shared::pipeline::Schedule;
use tch::{Device, Kind, Tensor, nn};

use crate::Error;
use crate::ffi::{ProcessGroup, Sent};
use crate::model::{Forward, VitSpec};
use crate::parallel::Parallel;
use crate::train::loss::{l2_loss, weighted_rmse};
use links::Links;
use stage::Chunk;

/// This rank's stage of the pipeline: its chunks, its schedule and its links to the others.
/// Cheap to clone (the learner holds it as its model too).
#[derive(Clone)]
pub struct Pipeline(Rc<Inner>);

struct Inner {
    /// This rank's chunks, in the order of their index (the schedule's local chunk order).
    chunks: Vec<Chunk>,
    schedule: Schedule,
    micro_batches: usize,
    links: Links,
    spec: VitSpec,
    device: Device,
    amp: AmpMode,
}

impl Pipeline {
    /// This rank's stage of `config`'s pipeline over `group` (the pp group), its chunks built in
    /// `vs` from the serial model's parameters `serial` (the same on every rank), each cut over
    /// tp and cp with `parallel`.
    pub fn new(
        vs: &nn::VarStore,
        config: &TrainConfig,
        serial: &HashMap<String, Tensor>,
        parallel: Option<Parallel>,
        group: Rc<ProcessGroup>,
        device: Device,
    ) -> Result<Pipeline, Error> {
        let spec = VitSpec::from(config);
        let schedule = config.schedule();
        let total = group.size() * schedule.virtual_stages();
        let tokens = parallel.as_ref().map_or(spec.num_tokens(), |p| p.my_tokens().1);
        let chunks = stage::build_chunks(vs, &spec, serial, parallel, (group.rank(), group.size()), schedule.virtual_stages())?;
        let micro_batches = config.num_micro_batches.max(1);
        let links = Links::new(group, total, micro_batches, [tokens, spec.embed_dim], device);
        Ok(Pipeline(Rc::new(Inner { chunks, schedule, micro_batches, links, spec, device, amp: config.amp_mode })))
    }

    /// The forward pass of a whole batch through every chunk, without micro-batches: each rank
    /// runs its chunks in turn, receiving each one's input from the rank before and sending its
    /// output on. The prediction, on the rank of the last chunk (none elsewhere).
    fn forward_through(&self, x: &Tensor) -> Result<Option<Tensor>, Error> {
        let (links, batch) = (&self.0.links, x.size()[0]);
        let mut sent: Vec<Sent> = Vec::new();
        let mut prediction = None;
        for chunk in &self.0.chunks {
            let input = match chunk.index {
                0 => x.shallow_clone(),
                c => links.recv(&links.activation(batch), c, 0, false)?,
            };
            let y = chunk.model.forward(&input, false)?;
            match links.is_last(chunk.index) {
                true => prediction = Some(y),
                false => sent.push(links.send(&y, chunk.index + 1, 0, false)?),
            }
        }
        sent.into_iter().try_for_each(Sent::wait)?;
        Ok(prediction)
    }

    /// Loss and per-channel RMSE of a batch (the last chunk's rank computes them and shares
    /// them with every stage), without gradients.
    pub fn evaluate(&self, input: &Tensor, target: &Tensor) -> Result<(Tensor, Tensor), Error> {
        let channels = self.0.spec.out_chans;
        let local = match self.forward_through(input)? {
            Some(pred) => Tensor::cat(&[l2_loss(&pred, target).view([1]), weighted_rmse(&pred, target)], 0),
            None => Tensor::zeros([1 + channels], (Kind::Float, self.0.device)),
        };
        let shared = self.0.links.share_from_last(local)?;
        Ok((shared.get(0), shared.narrow(0, 1, channels)))
    }
}

/// As a model, the pipeline predicts: a batch through every chunk without gradients (it trains
/// only through its schedule, [`Pipeline::train`]), the prediction shared from the last
/// chunk's rank with every stage, so the maps and roll-outs run unchanged.
impl Forward for Pipeline {
    fn forward(&self, x: &Tensor, _train: bool) -> Result<Tensor, Error> {
        let (size, spec) = (x.size(), &self.0.spec);
        let shape = [size[0], spec.out_chans, spec.img_size[0], spec.img_size[1]];
        let local = self.forward_through(x)?.unwrap_or_else(|| Tensor::zeros(shape, (Kind::Float, self.0.device)));
        self.0.links.share_from_last(local)
    }
}
