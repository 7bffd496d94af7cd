//! The tutorial's initialisation, expressed with tch's initialisers.

use tch::nn::{self, Init};

/// `trunc_normal_(std=0.02)` with the bounds a=-2, b=2 given in absolute units: at 100 standard
/// deviations the truncation never bites, so a plain normal draw is the same distribution.
pub(crate) const TRUNC_NORMAL_002: Init = Init::Randn { mean: 0.0, stdev: 0.02 };

/// `nn.Linear` as the tutorial's `_init_weights` leaves it: weights N(0, 0.02²), bias 0.
pub(crate) fn linear(path: nn::Path<'_>, inp: i64, out: i64, bias: bool) -> nn::Linear {
    let config = nn::LinearConfig { ws_init: TRUNC_NORMAL_002, bs_init: Some(Init::Const(0.0)), bias };
    nn::linear(path, inp, out, config)
}

/// `nn.LayerNorm(eps)` with weight 1 and bias 0 (the tutorial's serial model uses eps 1e-6).
pub(crate) fn layer_norm(path: nn::Path<'_>, dim: i64, eps: f64) -> nn::LayerNorm {
    let config = nn::LayerNormConfig { eps, ..Default::default() };
    nn::layer_norm(path, vec![dim], config)
}
