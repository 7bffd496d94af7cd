//! What happens to gradients between backward and the optimizer step in a distributed run,
//! as the tutorial's DDP plus comm hook does it: with context parallelism, the gradients of the
//! parameters each cp rank applied to its own tokens only are summed over cp; then every
//! gradient is averaged over dp (in large buckets, like DDP).

use std::rc::Rc;

use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use crate::Error;
use crate::dist::{BUCKET_BYTES, Comm, GradReducer};
use crate::ffi::ReduceOp;
use crate::parallel::ParallelVit;

pub struct GradSync {
    pub comm: Rc<Comm>,
    /// Every trainable parameter, sorted by name (the same order on every rank).
    params: Vec<Tensor>,
    reducer: GradReducer,
    /// The blocks' and final norm's parameters, summed over cp when cp > 1.
    cp_params: Vec<Tensor>,
    cp_reducer: GradReducer,
}

impl GradSync {
    pub fn new(comm: Rc<Comm>, vs: &nn::VarStore) -> GradSync {
        let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let cp_params: Vec<Tensor> = named.iter().filter(|(n, _)| ParallelVit::is_cp_shared(n)).map(|(_, t)| t.shallow_clone()).collect();
        let params: Vec<Tensor> = named.into_iter().map(|(_, t)| t).collect();
        GradSync {
            reducer: GradReducer::new(&params, BUCKET_BYTES),
            cp_reducer: GradReducer::new(&cp_params, BUCKET_BYTES),
            comm,
            params,
            cp_params,
        }
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

    pub fn reduce_gradients(&self) -> Result<(), Error> {
        self.cp_reducer.reduce(&self.cp_params, self.comm.group(Token::CP), ReduceOp::Sum)?;
        self.reducer.reduce(&self.params, self.comm.group(Token::DP), ReduceOp::Avg)
    }
}
