//! One pre-norm transformer block: `x + attn(norm1(x))`, then `x + mlp(norm2(x))`, each branch
//! behind stochastic depth.

use tch::nn::ModuleT;
use tch::{Tensor, nn};

use super::{Attention, Mlp, VitSpec, init};
use crate::Error;
use crate::ffi::Recomputable;

#[derive(Debug)]
pub struct Block {
    norm1: nn::LayerNorm,
    attn: Attention,
    norm2: nn::LayerNorm,
    mlp: Mlp,
    drop_path: f64,
}

impl Block {
    /// A block of `spec`'s model whose residual branches are dropped at rate `drop_path`.
    pub fn new(path: &nn::Path<'_>, spec: &VitSpec, drop_path: f64) -> Self {
        let (dim, eps) = (spec.embed_dim, spec.norm_eps);
        Block {
            norm1: init::layer_norm(path / "norm1", dim, eps),
            attn: Attention::new(&(path / "attn"), spec),
            norm2: init::layer_norm(path / "norm2", dim, eps),
            mlp: Mlp::new(&(path / "mlp"), dim, dim * spec.mlp_ratio, spec.dropout),
            drop_path,
        }
    }
}

/// Per-sample stochastic depth: drop a residual branch for whole samples, rescaling the kept
/// ones so the expectation is unchanged. The identity at rate 0 (every tutorial config).
fn drop_path(x: Tensor, rate: f64, train: bool) -> Tensor {
    if rate == 0.0 || !train {
        return x;
    }
    let keep = 1.0 - rate;
    let size = x.size();
    let mut mask_shape = vec![size[0]];
    mask_shape.resize(size.len(), 1);
    let mask = Tensor::empty(mask_shape.as_slice(), (x.kind(), x.device())).bernoulli_float_(keep);
    x * mask / keep
}

impl ModuleT for Block {
    fn forward_t(&self, x: &Tensor, train: bool) -> Tensor {
        let x = x + drop_path(self.attn.forward_t(&x.apply(&self.norm1), train), self.drop_path, train);
        &x + drop_path(self.mlp.forward_t(&x.apply(&self.norm2), train), self.drop_path, train)
    }
}

impl Recomputable for Block {
    fn run(&self, x: &Tensor) -> Result<Tensor, Error> {
        Ok(self.forward_t(x, true))
    }
}
