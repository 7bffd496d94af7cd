//! What happens to gradients between backward and the optimizer step in a distributed run,
//! as the tutorial's DDP plus comm hook does it: with context parallelism, the gradients of the
//! parameters each cp rank applied to its own tokens only are summed over cp; then every
//! gradient is averaged over dp (in large buckets, like DDP). SC22's DDP knobs apply: the
//! bucket size, the per-step broadcast of buffers, and no DDP at all (`noddp`); and, as DDP
//! does by default, each bucket's all-reduce can be issued during backward, as soon as its
//! gradients are ready (`overlap_grad_reduce`).
//!
//! The buckets are filled in the reverse of the forward order (head first, patch embedding
//! last), the order backward produces the gradients in. The dp average and the cp sum are
//! both linear, so doing the average first (during backward) gives the same gradients.

use std::cell::Cell;
use std::rc::Rc;

use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use crate::Error;
use crate::dist::{Comm, GradReducer};
use crate::ffi::{OverlappedReducer, ReduceOp};
use crate::parallel::ParallelVit;

/// SC22's DDP flags, from the config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdpKnobs {
    pub bucket_bytes: usize,
    /// Broadcast dp-rank 0's buffers before every forward pass, as DDP does by default.
    pub broadcast_buffers: bool,
    /// Average the gradients over dp; off with `noddp`, to measure what that costs.
    pub all_reduce: bool,
    /// Issue each bucket's all-reduce during backward, as soon as it is full.
    pub overlap: bool,
}

impl DdpKnobs {
    pub fn new(c: &TrainConfig) -> DdpKnobs {
        DdpKnobs {
            bucket_bytes: (c.bucket_cap_mb * 1024.0 * 1024.0) as usize,
            broadcast_buffers: !c.disable_broadcast_buffers,
            all_reduce: !c.noddp,
            overlap: c.overlap_grad_reduce,
        }
    }
}

pub struct GradSync {
    /// Declared first, dropped first: its hooks stop before anything else goes.
    overlapped: Option<OverlappedReducer>,
    /// How many buckets the last backward pass issued before it ended.
    issued_in_backward: Cell<usize>,
    pub comm: Rc<Comm>,
    /// Every trainable parameter, in the reverse of the forward order (the same on every rank).
    params: Vec<Tensor>,
    /// The variables that are not trained (running statistics, as BatchNorm keeps; the ViT
    /// has none, which is why SC22 could switch their broadcast off).
    buffers: Vec<Tensor>,
    knobs: DdpKnobs,
    reducer: GradReducer,
    /// The blocks' and final norm's parameters, summed over cp when cp > 1.
    cp_params: Vec<Tensor>,
    cp_reducer: GradReducer,
}

impl GradSync {
    pub fn new(comm: Rc<Comm>, vs: &nn::VarStore, knobs: DdpKnobs) -> Result<GradSync, Error> {
        let (named, buffers) = in_backward_order(vs);
        let cp_params: Vec<Tensor> = named.iter().filter(|(n, _)| ParallelVit::is_cp_shared(n)).map(|(_, t)| t.shallow_clone()).collect();
        let params: Vec<Tensor> = named.into_iter().map(|(_, t)| t).collect();
        let reducer = GradReducer::new(&params, knobs.bucket_bytes);
        let dp = comm.shared_group(Token::DP);
        let overlapped = if knobs.overlap && knobs.all_reduce && dp.size() > 1 {
            Some(OverlappedReducer::new(dp, &params, reducer.buckets())?)
        } else {
            None
        };
        Ok(GradSync {
            overlapped,
            issued_in_backward: Cell::new(0),
            reducer,
            cp_reducer: GradReducer::new(&cp_params, knobs.bucket_bytes),
            comm,
            params,
            buffers: buffers.into_iter().map(|(_, t)| t).collect(),
            knobs,
            cp_params,
        })
    }

    /// How many all-reduces one step's dp gradient averaging makes (SC22 counted 8 NCCL calls
    /// per step at 25 MB buckets and 5 at 100 MB).
    pub fn dp_all_reduces(&self) -> usize {
        if self.knobs.all_reduce { self.reducer.bucket_count() } else { 0 }
    }

    /// The log's line about the gradient all-reduces (SC22 counted NCCL calls per step in its
    /// profiles; here the trainer says how many it makes, and when).
    pub fn describe(&self) -> String {
        let calls = self.dp_all_reduces();
        let mb = (self.knobs.bucket_bytes as f64 / (1024.0 * 1024.0) * 100.0).round() / 100.0;
        match (calls, self.overlapped.is_some()) {
            (0, _) => "DDP: no gradient all-reduce (noddp)".to_owned(),
            (n, true) => {
                format!("DDP: {n} gradient all-reduce(s) per step, buckets of up to {mb} MB, each issued during backward as it fills")
            }
            (n, false) => format!("DDP: {n} gradient all-reduce(s) per step, buckets of up to {mb} MB, issued after backward"),
        }
    }

    /// Makes every data-parallel replica start from dp-rank 0's parameters (DDP does this when
    /// it wraps the model).
    pub fn broadcast_parameters(&self) -> Result<(), Error> {
        let group = self.comm.group(Token::DP);
        tch::no_grad(|| {
            for p in &self.params {
                group.broadcast(&mut p.shallow_clone(), 0)?;
            }
            Ok(())
        })
    }

    /// DDP's broadcast of dp-rank 0's buffers before a forward pass, unless switched off.
    pub fn broadcast_buffers(&self) -> Result<(), Error> {
        if !self.knobs.broadcast_buffers {
            return Ok(());
        }
        let group = self.comm.group(Token::DP);
        tch::no_grad(|| self.buffers.iter().try_for_each(|b| group.broadcast(&mut b.shallow_clone(), 0)))
    }

    /// Called before the backward pass that completes the step's gradients (the last
    /// micro-batch's), in which each gradient is accumulated `firings` times (once per lane):
    /// from then on, a full bucket's all-reduce is issued at once.
    pub fn before_last_backward(&self, firings: usize) {
        if let Some(overlapped) = &self.overlapped {
            overlapped.arm(firings);
        }
    }

    /// After the last backward pass. The cp sum is part of the model's maths and always runs;
    /// the dp average is DDP's, and `noddp` skips it (the replicas then train apart, which is
    /// the point of measuring it). With overlap, this waits for what backward issued.
    pub fn reduce_gradients(&self) -> Result<(), Error> {
        if let Some(overlapped) = &self.overlapped {
            self.issued_in_backward.set(overlapped.finish(true)?);
        } else if self.knobs.all_reduce {
            self.reducer.reduce(&self.params, self.comm.group(Token::DP), ReduceOp::Avg)?;
        }
        self.cp_reducer.reduce(&self.cp_params, self.comm.group(Token::CP), ReduceOp::Sum)
    }

    /// How many of the dp all-reduces the last step issued during backward (0 without overlap).
    pub fn issued_in_backward(&self) -> usize {
        self.issued_in_backward.get()
    }
}

/// Variables by name.
type Named = Vec<(String, Tensor)>;

/// The trained variables of `vs` in the order backward reaches them, and the rest.
fn in_backward_order(vs: &nn::VarStore) -> (Named, Named) {
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| backward_order(&a.0).cmp(&backward_order(&b.0)));
    named.into_iter().partition(|(_, t)| t.requires_grad())
}

/// A parameter's place in the backward pass: the reverse of the forward order (patch
/// embedding, position embedding, blocks 0 to depth-1, final norm, head), as a sort key.
fn backward_order(name: &str) -> std::cmp::Reverse<(u8, usize, &str)> {
    let key = match name.strip_prefix("blocks.").and_then(|rest| rest.split_once('.')) {
        Some((block, rest)) => (2, block.parse().unwrap_or(usize::MAX), rest),
        None => {
            let stage = ["patch_embed", "pos_embed", "", "norm", "head"].iter().position(|s| name.starts_with(s) && !s.is_empty());
            (stage.map_or(5, |s| s as u8), 0, name)
        }
    };
    std::cmp::Reverse(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{VisionTransformer, VitSpec};

    /// The all-reduces a step of `config` makes at `bucket_cap_mb`, as its run's `DDP:` line says.
    fn all_reduces(config: &str, bucket_cap_mb: f64) -> usize {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/ViT.yaml");
        let file = scalebook_shared::config::ConfigFile::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut config = file.get(config).unwrap();
        config.bucket_cap_mb = bucket_cap_mb;
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let _model = VisionTransformer::new(&vs.root(), &VitSpec::from(&config));
        let params: Vec<Tensor> = in_backward_order(&vs).0.into_iter().map(|(_, t)| t).collect();
        GradReducer::new(&params, DdpKnobs::new(&config).bucket_bytes).bucket_count()
    }

    /// The counts the data-parallel chapter quotes (its sweep's `DDP:` lines and its text).
    #[test]
    fn the_bucket_counts_are_the_ones_the_chapter_quotes() {
        assert_eq!([25.0, 100.0, 1.0].map(|mb| all_reduces("cpu_short", mb)), [1, 1, 5]);
        assert_eq!([25.0, 100.0].map(|mb| all_reduces("base", mb)), [4, 1]);
    }

    #[test]
    fn parameters_go_in_the_order_backward_reaches_them() {
        let mut names =
            vec!["blocks.2.mlp.fc1.weight", "head.weight", "pos_embed", "blocks.10.norm1.bias", "norm.weight", "patch_embed.proj.weight"];
        names.sort_by_key(|n| backward_order(n));
        assert_eq!(
            names,
            ["head.weight", "norm.weight", "blocks.10.norm1.bias", "blocks.2.mlp.fc1.weight", "pos_embed", "patch_embed.proj.weight"]
        );
    }
}
