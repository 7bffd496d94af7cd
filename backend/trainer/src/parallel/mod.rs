//! The tutorial's model parallelism (`distributed/layers.py`, the parallel branch of
//! `networks/vit.py`): tensor parallelism over `tp` (column-parallel q, k, v and fc1,
//! row-parallel proj and fc2, heads split over tp) and context parallelism over `cp` (the token
//! sequence split with uneven chunks, K and V all-gathered). The parallel model is cut from a
//! serial one, so every rank starts from the same weights, as the tutorial's
//! `init_params_for_shared_weights` ensures.

mod attention;
mod linear;
mod mlp;
mod vit;

use std::rc::Rc;

use scalebook_shared::config::compute_split_shapes;
use scalebook_shared::layout::Token;

use crate::dist::Comm;

pub use attention::ParallelAttention;
pub use linear::{ColumnLinear, RowLinear};
pub use mlp::ParallelMlp;
pub use vit::ParallelVit;

/// What every parallel layer needs: the groups and the sequence split.
#[derive(Clone)]
pub struct Parallel {
    pub comm: Rc<Comm>,
    /// Tokens per cp rank, the tutorial's `compute_split_shapes(N, cp)`.
    pub cp_sizes: Vec<i64>,
}

impl Parallel {
    pub fn new(comm: Rc<Comm>, tokens: usize) -> Parallel {
        let cp = comm.size(Token::CP);
        let cp_sizes = compute_split_shapes(tokens, cp).into_iter().map(|s| s as i64).collect();
        Parallel { comm, cp_sizes }
    }

    pub fn tp(&self) -> (usize, usize) {
        (self.comm.rank(Token::TP), self.comm.size(Token::TP))
    }

    /// This rank's token range `(start, len)` of the sequence.
    pub fn my_tokens(&self) -> (i64, i64) {
        let r = self.comm.rank(Token::CP);
        (self.cp_sizes[..r].iter().sum(), self.cp_sizes[r])
    }
}
