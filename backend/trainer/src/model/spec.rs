//! The model's shape, separate from the training config so the model can be built (and
//! tested) from nothing but its dimensions.

use scalebook_shared::config::TrainConfig;

/// Every dimension the ViT needs. `mlp_ratio` is fixed at 4 by the tutorial's factory.
#[derive(Debug, Clone, PartialEq)]
pub struct VitSpec {
    /// Height and width of the input crop.
    pub img_size: [i64; 2],
    pub patch_size: i64,
    pub in_chans: i64,
    pub out_chans: i64,
    pub embed_dim: i64,
    pub depth: i64,
    pub num_heads: i64,
    pub mlp_ratio: i64,
    /// Used for dropout, attention dropout and (linearly rising over depth) stochastic depth.
    pub dropout: f64,
    /// LayerNorm epsilon of the serial model.
    pub norm_eps: f64,
    /// Recompute each block's activations in backward instead of keeping them
    /// (`activation_checkpointing`).
    pub recompute: bool,
    /// One matrix product for q, k and v together (`enable_jit`, the tutorial's switch for
    /// what compiling fuses): three weights concatenated in the forward pass, so the
    /// parameters and checkpoints keep their three names.
    pub fused_qkv: bool,
}

impl VitSpec {
    /// The patch grid (rows, columns); tokens are laid out row-major over it.
    pub fn grid(&self) -> (i64, i64) {
        (self.img_size[0] / self.patch_size, self.img_size[1] / self.patch_size)
    }

    pub fn num_tokens(&self) -> i64 {
        let (h, w) = self.grid();
        h * w
    }

    pub fn head_dim(&self) -> i64 {
        self.embed_dim / self.num_heads
    }
}

impl From<&TrainConfig> for VitSpec {
    fn from(c: &TrainConfig) -> Self {
        let dim = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        VitSpec {
            img_size: [dim(c.img_size[0]), dim(c.img_size[1])],
            patch_size: dim(c.patch_size),
            in_chans: dim(c.n_in_channels),
            out_chans: dim(c.n_out_channels),
            embed_dim: dim(c.embed_dim),
            depth: dim(c.depth),
            num_heads: dim(c.num_heads),
            mlp_ratio: 4,
            dropout: c.dropout,
            norm_eps: 1e-6,
            recompute: c.activation_checkpointing,
            fused_qkv: c.enable_jit,
        }
    }
}
