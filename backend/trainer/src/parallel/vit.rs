//! The whole parallel ViT. Patch embedding, position embedding, final norm and head are
//! replicated on every rank; the blocks are tensor-parallel, and with cp > 1 the tokens are
//! scattered over cp after the position embedding and gathered back before the head.
//!
//! Two deliberate differences from dl4sci25: the block norms keep the serial model's eps
//! (1e-6, where its DistributedLayerNorm uses 1e-5), so the parallel model computes the serial
//! one; and the final norm's gradients are summed over cp like the blocks' (dl4sci25 forgets
//! it, letting its cp replicas drift apart; sc25 fixes it). [`ParallelVit::is_cp_shared`]
//! names the parameters whose gradients need that sum.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use super::linear::serial;
use super::{Parallel, ParallelAttention, ParallelMlp};
use crate::Error;
use crate::ffi::{Recomputable, Region, recompute, shared_part};
use crate::model::{Forward, Part, PartHooks, VitSpec, patch_embed, unpatchify};

struct Norm {
    weight: Tensor,
    bias: Tensor,
}

impl Norm {
    fn cut(path: &nn::Path<'_>, vars: &HashMap<String, Tensor>, prefix: &str) -> Result<Norm, Error> {
        Ok(Norm {
            weight: path.var_copy("weight", serial(vars, &format!("{prefix}.weight"))?),
            bias: path.var_copy("bias", serial(vars, &format!("{prefix}.bias"))?),
        })
    }

    fn forward(&self, x: &Tensor, eps: f64) -> Tensor {
        x.layer_norm([self.weight.size()[0]], Some(&self.weight), Some(&self.bias), eps, true)
    }
}

struct Block {
    norm1: Norm,
    attn: ParallelAttention,
    norm2: Norm,
    mlp: ParallelMlp,
    eps: f64,
}

impl Block {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        let x = x + self.attn.forward(&self.norm1.forward(x, self.eps), train)?;
        Ok(&x + self.mlp.forward(&self.norm2.forward(&x, self.eps), train)?)
    }
}

/// Recomputed in backward, a block runs its tp collectives again (as Megatron's does).
impl Recomputable for Block {
    fn run(&self, x: &Tensor) -> Result<Tensor, Error> {
        self.forward(x, true)
    }
}

/// The first chunk's patch and position embedding.
struct Embedding {
    patch_weight: Tensor,
    patch_bias: Tensor,
    pos_embed: Tensor,
}

/// The last chunk's final norm and head.
struct Head {
    norm: Norm,
    head: Tensor,
}

/// This rank's shard of the whole model, or of one chunk of it ([`Part`]).
pub struct ParallelVit {
    spec: VitSpec,
    embedding: Option<Embedding>,
    blocks: Vec<Arc<Block>>,
    /// Block `first_block` of the whole model is `blocks[0]`.
    first_block: usize,
    head: Option<Head>,
    par: Parallel,
    /// Run around the blocks (ZeRO-3's gathers), once set.
    hooks: Option<Rc<dyn PartHooks>>,
}

impl ParallelVit {
    /// This rank's shard of `part` of the serial model whose parameters are `vars` (named as
    /// `VisionTransformer` names them); the new parameters get the same names under `path`.
    pub fn cut(
        path: &nn::Path<'_>,
        spec: &VitSpec,
        vars: &HashMap<String, Tensor>,
        par: Parallel,
        part: &Part,
    ) -> Result<ParallelVit, Error> {
        let embedding = match part.embed {
            true => {
                let pe = path / "patch_embed" / "proj";
                Some(Embedding {
                    patch_weight: pe.var_copy("weight", serial(vars, "patch_embed.proj.weight")?),
                    patch_bias: pe.var_copy("bias", serial(vars, "patch_embed.proj.bias")?),
                    pos_embed: path.var_copy("pos_embed", serial(vars, "pos_embed")?),
                })
            }
            false => None,
        };
        let mut blocks = Vec::with_capacity(part.blocks.len());
        for i in part.blocks.clone() {
            let p = path / "blocks" / i as i64;
            let prefix = format!("blocks.{i}");
            blocks.push(shared_part(Block {
                norm1: Norm::cut(&(&p / "norm1"), vars, &format!("{prefix}.norm1"))?,
                attn: ParallelAttention::cut(&(&p / "attn"), vars, &format!("{prefix}.attn"), &par, spec.num_heads, spec.dropout)?,
                norm2: Norm::cut(&(&p / "norm2"), vars, &format!("{prefix}.norm2"))?,
                mlp: ParallelMlp::cut(&(&p / "mlp"), vars, &format!("{prefix}.mlp"), &par, spec.dropout)?,
                eps: spec.norm_eps,
            }));
        }
        let head = match part.head {
            true => Some(Head {
                norm: Norm::cut(&(path / "norm"), vars, "norm")?,
                head: (path / "head").var_copy("weight", serial(vars, "head.weight")?),
            }),
            false => None,
        };
        Ok(ParallelVit { spec: spec.clone(), embedding, blocks, first_block: part.blocks.start, head, par, hooks: None })
    }

    /// Parameters used on this rank's tokens only, whose gradients are summed over cp: the
    /// blocks and the final norm.
    pub fn is_cp_shared(name: &str) -> bool {
        name.starts_with("blocks.") || name.starts_with("norm.")
    }
}

impl Forward for ParallelVit {
    /// From the fields (or, after the first chunk, this rank's tokens of the previous chunk's
    /// output) to the prediction (or, before the last chunk, this rank's tokens).
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        let eps = self.spec.norm_eps;
        let hooks = self.hooks.as_deref();
        if let Some(hooks) = hooks {
            hooks.enter()?;
        }
        let cp = (self.par.cp_sizes.len() > 1).then(|| self.par.comm.group(Token::CP));
        let mut x = match &self.embedding {
            Some(e) => {
                let tokens = patch_embed(x, &e.patch_weight, &e.patch_bias, &self.spec);
                let x = (tokens + &e.pos_embed).dropout(self.spec.dropout, train);
                match cp {
                    Some(cp) => cp.region(Region::ScatterTo, &x, 1, &self.par.cp_sizes)?,
                    None => x,
                }
            }
            None => x.shallow_clone(),
        };
        for (i, block) in self.blocks.iter().enumerate() {
            let i = self.first_block + i;
            if let Some(hooks) = hooks {
                hooks.before_block(i)?;
            }
            x = if train && self.spec.recompute { recompute(block, &x)? } else { block.forward(&x, train)? };
            if let Some(hooks) = hooks {
                x = hooks.after_block(i, x, train)?;
            }
        }
        let y = match &self.head {
            Some(h) => {
                let mut x = h.norm.forward(&x, eps);
                if let Some(cp) = cp {
                    x = cp.region(Region::GatherFrom, &x, 1, &self.par.cp_sizes)?;
                }
                unpatchify(&x.linear::<Tensor>(&h.head, None), &self.spec)
            }
            None => x,
        };
        if let Some(hooks) = hooks {
            hooks.exit(train)?;
        }
        Ok(y)
    }

    fn set_part_hooks(&mut self, hooks: Rc<dyn PartHooks>) -> Result<(), Error> {
        self.hooks = Some(hooks);
        Ok(())
    }
}
