//! The transformer MLP: fc1 to `mlp_ratio`·D, exact (erf) GELU, fc2 back to D.

use tch::{Tensor, nn};

use super::init;

#[derive(Debug)]
pub struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
    dropout: f64,
}

impl Mlp {
    pub fn new(path: &nn::Path<'_>, dim: i64, hidden: i64, dropout: f64) -> Self {
        Mlp { fc1: init::linear(path / "fc1", dim, hidden, true), fc2: init::linear(path / "fc2", hidden, dim, true), dropout }
    }
}

impl nn::ModuleT for Mlp {
    fn forward_t(&self, x: &Tensor, train: bool) -> Tensor {
        x.apply(&self.fc1).gelu("none").dropout(self.dropout, train).apply(&self.fc2).dropout(self.dropout, train)
    }
}
