//! The tutorial's ViT weather model (reference §3): patch embedding, learned position
//! embedding, pre-norm transformer blocks with separate q/k/v, a bias-free linear head and the
//! unpatchify that turns tokens back into the 20 output fields.

mod attention;
mod block;
mod init;
mod mlp;
mod spec;
mod vit;

pub use attention::{Attention, kernel as attention_kernel};
pub use block::Block;
pub use mlp::Mlp;
pub use spec::VitSpec;
pub use vit::{VisionTransformer, patch_embed, unpatchify};

use tch::Tensor;

use crate::Error;

/// A model the training loop can run: the serial ViT, or this rank's part of the parallel one
/// (whose forward runs collectives, which can fail).
pub trait Forward {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error>;
}

impl Forward for VisionTransformer {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        VisionTransformer::forward(self, x, train)
    }
}
