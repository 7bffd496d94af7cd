//! The tutorial's ViT weather model (reference §3): patch embedding, learned position
//! embedding, pre-norm transformer blocks with separate q/k/v, a bias-free linear head and the
//! unpatchify that turns tokens back into the 20 output fields.

mod attention;
mod block;
mod init;
mod mlp;
mod part;
mod spec;
mod vit;

pub use attention::{Attention, kernel as attention_kernel};
pub use block::Block;
pub use mlp::Mlp;
pub use part::Part;
pub use spec::VitSpec;
pub use vit::{VisionTransformer, patch_embed, unpatchify};

use std::rc::Rc;

use tch::Tensor;

use crate::Error;

/// A model the training loop can run: the serial ViT, or this rank's part of the parallel one
/// (whose forward runs collectives, which can fail).
pub trait Forward {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error>;

    /// Runs `hooks` around the model's parts from now on (ZeRO-3's gathers); a model whose
    /// forward pass has no blocks to hook refuses.
    fn set_part_hooks(&mut self, _hooks: Rc<dyn PartHooks>) -> Result<(), Error> {
        Err(Error::Internal { what: "ZeRO stage 3".into(), message: "this model's forward pass cannot gather its blocks".into() })
    }
}

/// What a model runs around its parts: ZeRO-3 gathers each block's parameters before the block
/// and releases them after, and the parameters outside the blocks (patch and position
/// embedding, final norm, head) for the whole pass (FSDP's root unit).
pub trait PartHooks {
    /// Before the forward pass.
    fn enter(&self) -> Result<(), Error>;
    /// Before block `block`'s forward.
    fn before_block(&self, block: usize) -> Result<(), Error>;
    /// After block `block`'s forward: its output `y`, through whatever backward must do before
    /// it reaches the block again (in training, `train`).
    fn after_block(&self, block: usize, y: Tensor, train: bool) -> Result<Tensor, Error>;
    /// After the forward pass.
    fn exit(&self, train: bool) -> Result<(), Error>;
}

impl std::fmt::Debug for dyn PartHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PartHooks")
    }
}

impl Forward for VisionTransformer {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        VisionTransformer::forward(self, x, train)
    }

    fn set_part_hooks(&mut self, hooks: Rc<dyn PartHooks>) -> Result<(), Error> {
        self.hooks = Some(hooks);
        Ok(())
    }
}
