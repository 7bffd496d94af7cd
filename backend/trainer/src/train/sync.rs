//! What happens to gradients between backward and the optimizer step in a distributed run,
//! as the tutorial's DDP plus comm hook does it: with context parallelism, the gradients of the
//! parameters each cp rank applied to its own tokens only are summed over cp; then every
//! gradient is averaged over dp (in large buckets, like DDP). SC22's DDP knobs apply: the
//! bucket size, the per-step broadcast of buffers, and no DDP at all (`noddp`).

use std::rc::Rc;

use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use crate::Error;
use crate::dist::{Comm, GradReducer};
use crate::ffi::ReduceOp;
use crate::parallel::ParallelVit;

/// SC22's DDP flags, from the config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdpKnobs {
    pub bucket_bytes: usize,
    /// Broadcast dp-rank 0's buffers before every forward pass, as DDP does by default.
    pub broadcast_buffers: bool,
    /// Average the gradients over dp; off with `noddp`, to measure what that costs.
    pub all_reduce: bool,
}

impl DdpKnobs {
    pub fn new(c: &TrainConfig) -> DdpKnobs {
        DdpKnobs {
            bucket_bytes: (c.bucket_cap_mb * 1024.0 * 1024.0) as usize,
            broadcast_buffers: !c.disable_broadcast_buffers,
            all_reduce: !c.noddp,
        }
    }
}

pub struct GradSync {
    pub comm: Rc<Comm>,
    /// Every trainable parameter, sorted by name (the same order on every rank).
    params: Vec<Tensor>,
    /// The variables that are not trained (running statistics, as BatchNorm keeps; the ViT
    /// has none, which is why SC22 could switch their broadcast off).
    buffers: Vec<Tensor>,
    knobs: DdpKnobs,
    reducer: GradReducer,
    /// The blocks' and final norm's parameters, summed over cp when cp > 1.
    cp_params: Vec<Tensor>,
    cp_reducer: GradReducer,
}

impl GradSync {
    pub fn new(comm: Rc<Comm>, vs: &nn::VarStore, knobs: DdpKnobs) -> GradSync {
        let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let (named, buffers): (Vec<_>, Vec<_>) = named.into_iter().partition(|(_, t)| t.requires_grad());
        let cp_params: Vec<Tensor> = named.iter().filter(|(n, _)| ParallelVit::is_cp_shared(n)).map(|(_, t)| t.shallow_clone()).collect();
        let params: Vec<Tensor> = named.into_iter().map(|(_, t)| t).collect();
        GradSync {
            reducer: GradReducer::new(&params, knobs.bucket_bytes),
            cp_reducer: GradReducer::new(&cp_params, knobs.bucket_bytes),
            comm,
            params,
            buffers: buffers.into_iter().map(|(_, t)| t).collect(),
            knobs,
            cp_params,
        }
    }

    /// How many all-reduces one step's dp gradient averaging makes (SC22 counted 8 NCCL calls
    /// per step at 25 MB buckets and 5 at 100 MB).
    pub fn dp_all_reduces(&self) -> usize {
        if self.knobs.all_reduce { self.reducer.bucket_count() } else { 0 }
    }

    /// Makes every data-parallel replica start from dp-rank 0's parameters (DDP does this when
    /// it wraps the model).
    pub fn broadcast_parameters(&self) -> Result<(), Error> {
        let group = self.comm.group(Token::DP);
        tch::no_grad(|| {
            for p in &self.params {
                group.broadcast(&mut p.shallow_clone(), 0)?;
            }
            Ok(())
        })
    }

    /// DDP's broadcast of dp-rank 0's buffers before a forward pass, unless switched off.
    pub fn broadcast_buffers(&self) -> Result<(), Error> {
        if !self.knobs.broadcast_buffers {
            return Ok(());
        }
        let group = self.comm.group(Token::DP);
        tch::no_grad(|| self.buffers.iter().try_for_each(|b| group.broadcast(&mut b.shallow_clone(), 0)))
    }

    /// The cp sum is part of the model's maths and always runs; the dp average is DDP's, and
    /// `noddp` skips it (the replicas then train apart, which is the point of measuring it).
    pub fn reduce_gradients(&self) -> Result<(), Error> {
        self.cp_reducer.reduce(&self.cp_params, self.comm.group(Token::CP), ReduceOp::Sum)?;
        if !self.knobs.all_reduce {
            return Ok(());
        }
        self.reducer.reduce(&self.params, self.comm.group(Token::DP), ReduceOp::Avg)
    }
}
