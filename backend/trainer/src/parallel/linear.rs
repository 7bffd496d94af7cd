//! The tutorial's `DistributedMatmul` in its two uses: column-parallel (output features split
//! over tp; the input enters through copy-to-parallel-region, whose backward sums the input
//! gradient over tp) and row-parallel (input features split over tp; partial outputs summed
//! over tp by reduce-from-parallel-region, then the full bias added once).

use std::collections::HashMap;

use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use super::Parallel;
use crate::Error;
use crate::ffi::Region;

/// The serial parameter `name`, which the parallel model is cut from.
pub(crate) fn serial<'a>(vars: &'a HashMap<String, Tensor>, name: &str) -> Result<&'a Tensor, Error> {
    vars.get(name).ok_or_else(|| Error::Internal { what: "parallel model".into(), message: format!("the serial model has no {name}") })
}

pub struct ColumnLinear {
    weight: Tensor,
    bias: Tensor,
    par: Parallel,
}

impl ColumnLinear {
    /// Rows `[r·out/tp, (r+1)·out/tp)` of the serial layer `prefix` (weight and bias).
    pub fn cut(path: &nn::Path<'_>, vars: &HashMap<String, Tensor>, prefix: &str, par: &Parallel) -> Result<ColumnLinear, Error> {
        let (r, tp) = par.tp();
        let w = serial(vars, &format!("{prefix}.weight"))?;
        let b = serial(vars, &format!("{prefix}.bias"))?;
        let rows = w.size()[0] / tp as i64;
        let start = r as i64 * rows;
        Ok(ColumnLinear {
            weight: path.var_copy("weight", &w.narrow(0, start, rows)),
            bias: path.var_copy("bias", &b.narrow(0, start, rows)),
            par: par.clone(),
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        let x = match self.par.tp().1 {
            1 => x.shallow_clone(),
            _ => self.par.comm.group(Token::TP).region(Region::CopyTo, x, 0, &[])?,
        };
        Ok(x.linear(&self.weight, Some(&self.bias)))
    }
}

pub struct RowLinear {
    weight: Tensor,
    bias: Tensor,
    par: Parallel,
}

impl RowLinear {
    /// Columns `[r·in/tp, (r+1)·in/tp)` of the serial layer `prefix`; the bias whole.
    pub fn cut(path: &nn::Path<'_>, vars: &HashMap<String, Tensor>, prefix: &str, par: &Parallel) -> Result<RowLinear, Error> {
        let (r, tp) = par.tp();
        let w = serial(vars, &format!("{prefix}.weight"))?;
        let b = serial(vars, &format!("{prefix}.bias"))?;
        let cols = w.size()[1] / tp as i64;
        Ok(RowLinear {
            weight: path.var_copy("weight", &w.narrow(1, r as i64 * cols, cols)),
            bias: path.var_copy("bias", b),
            par: par.clone(),
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        let partial = x.linear::<Tensor>(&self.weight, None);
        let y = match self.par.tp().1 {
            1 => partial,
            _ => self.par.comm.group(Token::TP).region(Region::ReduceFrom, &partial, 0, &[])?,
        };
        Ok(y + &self.bias)
    }
}
