//! Multi-head self-attention with the tutorial's three separate q, k, v projections (the
//! tensor-parallel version splits each of them by heads). With `fused_qkv` the three run as
//! one matrix product of their concatenated weights: one wider GEMM, one cast of the input
//! under autocast and one input gradient instead of three, the same function.

use tch::{Device, Kind, Tensor, nn};

use super::{VitSpec, init};

#[derive(Debug)]
pub struct Attention {
    q: nn::Linear,
    k: nn::Linear,
    v: nn::Linear,
    proj: nn::Linear,
    num_heads: i64,
    dropout: f64,
    fused_qkv: bool,
}

impl Attention {
    pub fn new(path: &nn::Path<'_>, spec: &VitSpec) -> Self {
        let dim = spec.embed_dim;
        Attention {
            q: init::linear(path / "q", dim, dim, true),
            k: init::linear(path / "k", dim, dim, true),
            v: init::linear(path / "v", dim, dim, true),
            proj: init::linear(path / "proj", dim, dim, true),
            num_heads: spec.num_heads,
            dropout: spec.dropout,
            fused_qkv: spec.fused_qkv,
        }
    }
}

impl Attention {
    /// The q, k and v projections of `x`, as three products or one.
    fn qkv(&self, x: &Tensor) -> (Tensor, Tensor, Tensor) {
        if !self.fused_qkv {
            return (x.apply(&self.q), x.apply(&self.k), x.apply(&self.v));
        }
        let weight = Tensor::cat(&[&self.q.ws, &self.k.ws, &self.v.ws], 0);
        let biases: Option<Vec<&Tensor>> = [&self.q.bs, &self.k.bs, &self.v.bs].into_iter().map(Option::as_ref).collect();
        let qkv = x.linear(&weight, biases.map(|b| Tensor::cat(&b, 0)));
        let dim = self.q.ws.size()[0];
        (qkv.narrow(-1, 0, dim), qkv.narrow(-1, dim, dim), qkv.narrow(-1, 2 * dim, dim))
    }
}

impl nn::ModuleT for Attention {
    fn forward_t(&self, x: &Tensor, train: bool) -> Tensor {
        let size = x.size();
        let (b, n, d) = (size[0], size[1], size[2]);
        let heads = |t: Tensor| t.view([b, n, self.num_heads, d / self.num_heads]).transpose(1, 2);
        let (q, k, v) = self.qkv(x);
        let (q, k, v) = (heads(q), heads(k), heads(v));
        // The tutorial passes its dropout to SDPA even in eval mode (harmless at p = 0);
        // here attention dropout is only active while training.
        let p = if train { self.dropout } else { 0.0 };
        let y = Tensor::scaled_dot_product_attention(&q, &k, &v, None::<&Tensor>, p, false, None, false);
        y.transpose(1, 2).reshape([b, n, d]).apply(&self.proj).dropout(self.dropout, train)
    }
}

/// The attention kernel libtorch picks for `spec`'s heads in `kind` on `device` (its
/// `_fused_sdp_choice`, the same choice every forward pass makes), by name.
pub fn kernel(spec: &VitSpec, kind: Kind, device: Device) -> &'static str {
    let shape = [1, spec.num_heads, spec.num_tokens(), spec.head_dim()];
    let q = Tensor::zeros(shape, (kind, device));
    // PyTorch's `SDPBackend` numbering.
    match Tensor::internal_fused_sdp_choice(&q, &q, &q, None::<&Tensor>, 0.0, false, None, false) {
        0 => "the unfused math (matrix products and a softmax)",
        1 => "FlashAttention-2",
        2 => "memory-efficient attention (CUTLASS)",
        3 => "cuDNN's fused attention",
        _ => "a backend this trainer does not know",
    }
}
