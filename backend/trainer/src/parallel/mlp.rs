//! The tutorial's `DistributedMLP`: fc1 column-parallel (the 4·D hidden features split over
//! tp), GELU on each shard, fc2 row-parallel.

use std::collections::HashMap;

use tch::{Tensor, nn};

use super::{ColumnLinear, Parallel, RowLinear};
use crate::Error;

pub struct ParallelMlp {
    fc1: ColumnLinear,
    fc2: RowLinear,
    dropout: f64,
}

impl ParallelMlp {
    pub fn cut(
        path: &nn::Path<'_>,
        vars: &HashMap<String, Tensor>,
        prefix: &str,
        par: &Parallel,
        dropout: f64,
    ) -> Result<ParallelMlp, Error> {
        Ok(ParallelMlp {
            fc1: ColumnLinear::cut(&(path / "fc1"), vars, &format!("{prefix}.fc1"), par)?,
            fc2: RowLinear::cut(&(path / "fc2"), vars, &format!("{prefix}.fc2"), par)?,
            dropout,
        })
    }

    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        let h = self.fc1.forward(x)?.gelu("none").dropout(self.dropout, train);
        Ok(self.fc2.forward(&h)?.dropout(self.dropout, train))
    }
}
