//! Multi-head self-attention with the tutorial's three separate q, k, v projections (not a
//! fused qkv: the tensor-parallel version splits each of them by heads).

use tch::{Tensor, nn};

use super::init;

#[derive(Debug)]
pub struct Attention {
    q: nn::Linear,
    k: nn::Linear,
    v: nn::Linear,
    proj: nn::Linear,
    num_heads: i64,
    dropout: f64,
}

impl Attention {
    pub fn new(path: &nn::Path<'_>, dim: i64, num_heads: i64, dropout: f64) -> Self {
        Attention {
            q: init::linear(path / "q", dim, dim, true),
            k: init::linear(path / "k", dim, dim, true),
            v: init::linear(path / "v", dim, dim, true),
            proj: init::linear(path / "proj", dim, dim, true),
            num_heads,
            dropout,
        }
    }
}

impl nn::ModuleT for Attention {
    fn forward_t(&self, x: &Tensor, train: bool) -> Tensor {
        let size = x.size();
        let (b, n, d) = (size[0], size[1], size[2]);
        let heads = |t: Tensor| t.view([b, n, self.num_heads, d / self.num_heads]).transpose(1, 2);
        let (q, k, v) = (heads(x.apply(&self.q)), heads(x.apply(&self.k)), heads(x.apply(&self.v)));
        // The tutorial passes its dropout to SDPA even in eval mode (harmless at p = 0);
        // here attention dropout is only active while training.
        let p = if train { self.dropout } else { 0.0 };
        let y = Tensor::scaled_dot_product_attention(&q, &k, &v, None::<&Tensor>, p, false, None, false);
        y.transpose(1, 2).reshape([b, n, d]).apply(&self.proj).dropout(self.dropout, train)
    }
}
