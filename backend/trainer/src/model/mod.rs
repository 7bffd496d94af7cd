//! The tutorial's ViT weather model (reference §3): patch embedding, learned position
//! embedding, pre-norm transformer blocks with separate q/k/v, a bias-free linear head and the
//! unpatchify that turns tokens back into the 20 output fields.

mod attention;
mod block;
mod init;
mod mlp;
mod spec;
mod vit;

pub use attention::Attention;
pub use block::Block;
pub use mlp::Mlp;
pub use spec::VitSpec;
pub use vit::{VisionTransformer, unpatchify};
