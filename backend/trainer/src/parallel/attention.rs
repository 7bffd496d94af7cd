//! The tutorial's `DistributedAttention`: q, k, v column-parallel, so tp rank r owns heads
//! `[r·H/tp, (r+1)·H/tp)`; with context parallelism each rank holds the queries of its own
//! tokens and all-gathers the keys and values of every token over cp (whose backward
//! reduce-scatters their gradients); proj row-parallel.

use std::collections::HashMap;

use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use super::{ColumnLinear, Parallel, RowLinear};
use crate::Error;
use crate::ffi::Region;

pub struct ParallelAttention {
    q: ColumnLinear,
    k: ColumnLinear,
    v: ColumnLinear,
    proj: RowLinear,
    local_heads: i64,
    dropout: f64,
    par: Parallel,
}

impl ParallelAttention {
    pub fn cut(
        path: &nn::Path<'_>,
        vars: &HashMap<String, Tensor>,
        prefix: &str,
        par: &Parallel,
        heads: i64,
        dropout: f64,
    ) -> Result<ParallelAttention, Error> {
        let cut = |name: &str| ColumnLinear::cut(&(path / name), vars, &format!("{prefix}.{name}"), par);
        Ok(ParallelAttention {
            q: cut("q")?,
            k: cut("k")?,
            v: cut("v")?,
            proj: RowLinear::cut(&(path / "proj"), vars, &format!("{prefix}.proj"), par)?,
            local_heads: heads / par.tp().1 as i64,
            dropout,
            par: par.clone(),
        })
    }

    /// `x` is this rank's tokens, (B, N_local, D).
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        let size = x.size();
        let (b, n) = (size[0], size[1]);
        let local_width = self.q.forward(x)?;
        let head_dim = local_width.size()[2] / self.local_heads;
        let heads = |t: Tensor| t.view([b, n, self.local_heads, head_dim]).transpose(1, 2);
        let q = heads(local_width);
        let (mut k, mut v) = (heads(self.k.forward(x)?), heads(self.v.forward(x)?));
        if self.par.cp_sizes.len() > 1 {
            let cp = self.par.comm.group(Token::CP);
            k = cp.region(Region::AllGatherFrom, &k.contiguous(), 2, &self.par.cp_sizes)?;
            v = cp.region(Region::AllGatherFrom, &v.contiguous(), 2, &self.par.cp_sizes)?;
        }
        let p = if train { self.dropout } else { 0.0 };
        let y = Tensor::scaled_dot_product_attention(&q, &k, &v, None::<&Tensor>, p, false, None, false);
        let y = y.transpose(1, 2).reshape([b, n, self.local_heads * head_dim]);
        Ok(self.proj.forward(&y)?.dropout(self.dropout, train))
    }
}
