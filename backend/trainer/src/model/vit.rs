//! The whole model. Parameter names follow the PyTorch module tree (`patch_embed.proj`,
//! `pos_embed`, `blocks.N.attn.q`, `norm`, `head`) so checkpoints read the same way.

use std::rc::Rc;
use std::sync::Arc;

use tch::nn::ModuleT;
use tch::{Tensor, nn};

use super::{Block, Part, PartHooks, VitSpec, init};
use crate::Error;
use crate::ffi::{recompute, shared_part};

/// The patch embedding's convolution weight (D, C, p, p) and bias (D), and the position
/// embedding: the first chunk's.
#[derive(Debug)]
struct Embedding {
    patch_weight: Tensor,
    patch_bias: Tensor,
    pos_embed: Tensor,
}

/// The final norm and the head: the last chunk's.
#[derive(Debug)]
struct Head {
    norm: nn::LayerNorm,
    head: nn::Linear,
}

/// The whole model, or one chunk of it ([`Part`]).
#[derive(Debug)]
pub struct VisionTransformer {
    spec: VitSpec,
    embedding: Option<Embedding>,
    /// The part's blocks, the first of them block `first_block` of the whole model. Shared with
    /// the autograd graph when their activations are recomputed.
    blocks: Vec<Arc<Block>>,
    first_block: usize,
    head: Option<Head>,
    /// Run around the blocks (ZeRO-3's gathers), once set.
    pub(super) hooks: Option<Rc<dyn PartHooks>>,
}

impl VisionTransformer {
    pub fn new(path: &nn::Path<'_>, spec: &VitSpec) -> Self {
        VisionTransformer::part(path, spec, &Part::whole(spec.depth as usize))
    }

    /// The parameters of `part` of the model, initialised in the order the whole model
    /// initialises them (so the whole model draws the same values from the same seed).
    pub fn part(path: &nn::Path<'_>, spec: &VitSpec, part: &Part) -> Self {
        let d = spec.embed_dim;
        let p = spec.patch_size;
        let embedding = part.embed.then(|| {
            // PyTorch's default Conv2d init (kaiming-uniform, a=√5) is U(±1/√fan_in) for
            // weight and bias; the tutorial keeps it for the patch embedding.
            let bound = 1.0 / ((spec.in_chans * p * p) as f64).sqrt();
            let uniform = nn::Init::Uniform { lo: -bound, up: bound };
            let pe = path / "patch_embed" / "proj";
            Embedding {
                patch_weight: pe.var("weight", &[d, spec.in_chans, p, p], uniform),
                patch_bias: pe.var("bias", &[d], uniform),
                pos_embed: path.var("pos_embed", &[1, spec.num_tokens(), d], init::TRUNC_NORMAL_002),
            }
        });
        let blocks = part
            .blocks
            .clone()
            .map(|i| {
                let i = i as i64;
                let rate = drop_path_rate(spec.dropout, i, spec.depth);
                shared_part(Block::new(&(path / "blocks" / i), spec, rate))
            })
            .collect();
        let head = part.head.then(|| Head {
            norm: init::layer_norm(path / "norm", d, spec.norm_eps),
            head: init::linear(path / "head", d, spec.out_chans * p * p, false),
        });
        VisionTransformer { spec: spec.clone(), embedding, blocks, first_block: part.blocks.start, head, hooks: None }
    }

    pub fn spec(&self) -> &VitSpec {
        &self.spec
    }
}

/// Stochastic-depth rate of block `i`: `linspace(0, rate, depth)[i]`, as timm's ViT does.
fn drop_path_rate(rate: f64, i: i64, depth: i64) -> f64 {
    if depth <= 1 { 0.0 } else { rate * i as f64 / (depth - 1) as f64 }
}

/// Fields (B, C, H, W) to tokens (B, h·w, D) through the patch embedding, whose weight is a
/// convolution's (D, C, p, p) and bias (D). A convolution whose stride is its kernel size is a
/// matrix product over non-overlapping patches, and is computed as one: on the CPU that skips
/// the layout reorders libtorch's convolution makes on every call (about 3% of a `cpu_short`
/// step). The parameters are the convolution's, so checkpoints are unchanged. Tokens are in
/// row-major order over the patch grid, as the convolution's `flatten(2).transpose(1, 2)` has
/// them, and each patch's vector is (channel, row, column), as the weight's.
pub fn patch_embed(x: &Tensor, weight: &Tensor, bias: &Tensor, spec: &VitSpec) -> Tensor {
    let (b, c) = (x.size()[0], x.size()[1]);
    let (h, w) = spec.grid();
    let p = spec.patch_size;
    let patches = x.view([b, c, h, p, w, p]).permute([0, 2, 4, 1, 3, 5]).reshape([b, h * w, c * p * p]);
    patches.linear(&weight.view([weight.size()[0], -1]), Some(bias))
}

/// Tokens (B, h·w, out·p·p) back to fields (B, out, h·p, w·p). Each token's vector is laid
/// out (patch row, patch column, channel) with the channel fastest, which is what the
/// tutorial's `einsum("nhwpqc->nchpwq")` reads.
pub fn unpatchify(tokens: &Tensor, spec: &VitSpec) -> Tensor {
    let b = tokens.size()[0];
    let (h, w) = spec.grid();
    let (p, c) = (spec.patch_size, spec.out_chans);
    tokens.view([b, h, w, p, p, c]).permute([0, 5, 1, 3, 2, 4]).reshape([b, c, h * p, w * p])
}

impl VisionTransformer {
    /// The forward pass of the part: from the fields (or, after the first chunk, the previous
    /// chunk's tokens) to the prediction (or, before the last chunk, this chunk's tokens). In
    /// training with `spec.recompute`, each block's activations are recomputed in backward
    /// instead of kept (which can only fail inside libtorch).
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        let hooks = self.hooks.as_deref();
        if let Some(hooks) = hooks {
            hooks.enter()?;
        }
        let mut x = match &self.embedding {
            Some(e) => patch_embed(x, &e.patch_weight, &e.patch_bias, &self.spec).g_add(&e.pos_embed).dropout(self.spec.dropout, train),
            None => x.shallow_clone(),
        };
        for (i, block) in self.blocks.iter().enumerate() {
            let i = self.first_block + i;
            if let Some(hooks) = hooks {
                hooks.before_block(i)?;
            }
            x = if train && self.spec.recompute { recompute(block, &x)? } else { block.forward_t(&x, train) };
            if let Some(hooks) = hooks {
                x = hooks.after_block(i, x, train)?;
            }
        }
        let y = match &self.head {
            Some(h) => unpatchify(&x.apply(&h.norm).apply(&h.head), &self.spec),
            None => x,
        };
        if let Some(hooks) = hooks {
            hooks.exit(train)?;
        }
        Ok(y)
    }
}
