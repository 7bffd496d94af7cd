//! A pipeline rank's chunks of the model. The whole model is initialised first, identically
//! on every rank (from the seed every rank agreed on), and each rank keeps copies of its
//! chunks' parameters, under the whole model's names: so a pipeline starts where one rank
//! starts, and a checkpoint's keys do not depend on the layout.

use std::collections::HashMap;

use tch::{Tensor, nn};

use crate::Error;
use crate::model::{Forward, Part, VisionTransformer, VitSpec};
use crate::parallel::{Parallel, ParallelVit};

/// One chunk of the model on this rank.
pub(super) struct Chunk {
    /// Its index in the whole pipeline: block order, chunk 0 first.
    pub index: usize,
    pub model: Box<dyn Forward>,
}

/// Pipeline rank `rank`'s chunks of `stages · v` (`rank`, `rank + stages`, ...), built in `vs`
/// from the serial model's parameters `serial`, each cut over tp and cp with `parallel`.
pub(super) fn build_chunks(
    vs: &nn::VarStore,
    spec: &VitSpec,
    serial: &HashMap<String, Tensor>,
    parallel: Option<Parallel>,
    (rank, stages): (usize, usize),
    v: usize,
) -> Result<Vec<Chunk>, Error> {
    let total = stages * v;
    let depth = usize::try_from(spec.depth).unwrap_or(0);
    let mut chunks = Vec::new();
    for index in (0..v).map(|local| local * stages + rank) {
        let part = Part::chunk(depth, total, index)?;
        let model: Box<dyn Forward> = match &parallel {
            Some(par) => Box::new(ParallelVit::cut(&vs.root(), spec, serial, par.clone(), &part)?),
            None => Box::new(VisionTransformer::part(&vs.root(), spec, &part)),
        };
        chunks.push(Chunk { index, model });
    }
    if parallel.is_none() {
        copy_from(vs, serial)?;
    }
    Ok(chunks)
}

/// Gives every variable of `vs` the value of the serial model's variable of its name.
fn copy_from(vs: &nn::VarStore, serial: &HashMap<String, Tensor>) -> Result<(), Error> {
    tch::no_grad(|| {
        for (name, mut var) in vs.variables() {
            let value = serial.get(&name).ok_or_else(|| Error::Internal {
                what: "the pipeline's stages".into(),
                message: format!("the serial model has no {name}"),
            })?;
            var.copy_(value);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VitSpec {
        VitSpec {
            img_size: [12, 24],
            patch_size: 6,
            in_chans: 3,
            out_chans: 2,
            embed_dim: 16,
            depth: 4,
            num_heads: 2,
            mlp_ratio: 4,
            dropout: 0.0,
            norm_eps: 1e-6,
            recompute: false,
            fused_qkv: false,
        }
    }

    /// Two ranks of two chunks each (interleaved): every parameter of the whole model on
    /// exactly one rank under its own name and value, and the chunks in the pipeline's order
    /// compute the whole model.
    #[test]
    fn the_chunks_cut_the_whole_model_and_compute_it() {
        let spec = spec();
        tch::manual_seed(3);
        let whole_vs = nn::VarStore::new(tch::Device::Cpu);
        let whole = VisionTransformer::new(&whole_vs.root(), &spec);
        let serial = whole_vs.variables();
        let stores: Vec<nn::VarStore> = (0..2).map(|_| nn::VarStore::new(tch::Device::Cpu)).collect();
        let ranks: Vec<Vec<Chunk>> = (0..2).map(|r| build_chunks(&stores[r], &spec, &serial, None, (r, 2), 2).unwrap()).collect();
        assert_eq!(ranks.iter().map(|c| c.iter().map(|c| c.index).collect::<Vec<_>>()).collect::<Vec<_>>(), [[0, 2], [1, 3]]);
        let mut names: Vec<String> = stores.iter().flat_map(|vs| vs.variables().into_keys()).collect();
        names.sort();
        let mut expected: Vec<String> = serial.keys().cloned().collect();
        expected.sort();
        assert_eq!(names, expected);
        for vs in &stores {
            for (name, value) in vs.variables() {
                assert!(value.equal(&serial[&name]), "{name}");
            }
        }
        assert!(stores[0].variables().contains_key("pos_embed") && stores[1].variables().contains_key("head.weight"));
        assert!(
            stores[1].variables().contains_key("blocks.3.attn.q.weight") && stores[0].variables().contains_key("blocks.2.mlp.fc1.weight")
        );
        let x = Tensor::randn([2, 3, 12, 24], (tch::Kind::Float, tch::Device::Cpu));
        let mut y = x.shallow_clone();
        for chunk in 0..4 {
            y = ranks[chunk % 2][chunk / 2].model.forward(&y, false).unwrap();
        }
        assert!(y.allclose(&whole.forward(&x, false).unwrap(), 1e-6, 1e-6, false));
    }
}
