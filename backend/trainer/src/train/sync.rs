//! What happens to gradients between backward and the optimizer step in a distributed run,
//! as the tutorial's DDP plus comm hook does it: with context parallelism, the gradients of the
//! parameters each cp rank applied to its own tokens only are summed over cp; then every
//! gradient is averaged over dp (in large buckets, like DDP). SC22's DDP knobs apply: the
//! bucket size, the per-step broadcast of buffers, and no DDP at all (`noddp`); and, as DDP
//! does by default, each bucket's all-reduce can be issued during backward, as soon as its
//! gradients are ready (`overlap_grad_reduce`).
//!
//! The buckets are filled in the reverse of the forward order (head first, patch embedding
//! last), the order backward produces the gradients in, and the first of them is closed at
//! `first_bucket_cap_mb` (1 MiB), as DDP's is once it has seen that order. The dp average and
//! the cp sum are both linear, so doing the average first (during backward) gives the same
//! gradients.
//!
//! With `zero_stage` 1-3 the dp group shares the training state instead of repeating it
//! ([`super::zero`]): the optimizer updates only this rank's shards, stage 2 reduce-scatters
//! the gradients in place of the all-reduce, and stage 3 gathers each block's parameters
//! around its use.

use std::cell::Cell;
use std::rc::Rc;

use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::Token;
use tch::{Tensor, nn};

use super::optim::Optimizer;
use super::zero::{self, Holdings, Shards, ZeroHooks};
use crate::Error;
use crate::dist::{BucketCaps, Comm, GradReducer};
use crate::ffi::{OverlappedReducer, ReduceOp};
use crate::model::PartHooks;
use crate::parallel::ParallelVit;

/// SC22's DDP flags, from the config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdpKnobs {
    pub buckets: BucketCaps,
    /// Broadcast dp-rank 0's buffers before every forward pass, as DDP does by default.
    pub broadcast_buffers: bool,
    /// Average the gradients over dp; off with `noddp`, to measure what that costs.
    pub all_reduce: bool,
    /// Issue each bucket's all-reduce during backward, as soon as it is full.
    pub overlap: bool,
    /// ZeRO's stage over dp (0: DDP).
    pub zero_stage: usize,
}

impl DdpKnobs {
    pub fn new(c: &TrainConfig) -> DdpKnobs {
        DdpKnobs {
            buckets: BucketCaps { first: bytes(c.first_bucket_cap_mb), rest: bytes(c.bucket_cap_mb) },
            broadcast_buffers: !c.disable_broadcast_buffers,
            all_reduce: !c.noddp,
            overlap: c.overlap_grad_reduce,
            zero_stage: c.zero_stage,
        }
    }
}

/// A size in MB as DDP reads `bucket_cap_mb`: MiB, so 1 is `_DEFAULT_FIRST_BUCKET_BYTES`.
fn bytes(mb: f64) -> usize {
    (mb * 1024.0 * 1024.0) as usize
}

/// A size in bytes as the `DDP:` line gives it, in MB to two decimals.
fn megabytes(bytes: usize) -> f64 {
    (bytes as f64 / (1024.0 * 1024.0) * 100.0).round() / 100.0
}

/// The `DDP:` line for `calls` all-reduces of buckets cut at `caps`, issued during backward
/// when `overlapped`.
fn ddp_line(calls: usize, caps: BucketCaps, overlapped: bool) -> String {
    let (first, rest) = (megabytes(caps.first), megabytes(caps.rest));
    let when = if overlapped { "each issued during backward as it fills" } else { "issued after backward" };
    match calls {
        0 => "DDP: no gradient all-reduce (noddp)".to_owned(),
        n => format!("DDP: {n} gradient all-reduce(s) per step, the first bucket closed at {first} MB and the rest at {rest} MB, {when}"),
    }
}

pub struct GradSync {
    /// Declared first, dropped first: its hooks stop before anything else goes.
    overlapped: Option<OverlappedReducer>,
    /// ZeRO stages 2 and 3: the reduce-scatter of each unit's gradients (during backward when
    /// overlapped, else after it).
    scatter: Option<OverlappedReducer>,
    /// ZeRO's shards, when `zero_stage` > 0 and dp > 1 (shared with the model's hooks at stage 3).
    shards: Option<Rc<Shards>>,
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
    /// The gradient sync of `vs`'s trained variables over `comm`'s groups. With ZeRO, the
    /// parameters are moved into their units' buffers here (stage 3 keeps them gathered until
    /// [`GradSync::broadcast_parameters`], which every run calls once first).
    pub fn new(comm: Rc<Comm>, vs: &nn::VarStore, knobs: DdpKnobs) -> Result<GradSync, Error> {
        let (named, buffers) = in_backward_order(vs);
        let cp_params: Vec<Tensor> = named.iter().filter(|(n, _)| ParallelVit::is_cp_shared(n)).map(|(_, t)| t.shallow_clone()).collect();
        let reducer = GradReducer::new(&named.iter().map(|(_, t)| t.shallow_clone()).collect::<Vec<_>>(), knobs.buckets);
        let dp = comm.shared_group(Token::DP);
        let stage = if dp.size() > 1 && knobs.all_reduce { knobs.zero_stage } else { 0 };
        // ZeRO's units: DDP's buckets at stages 1 and 2, FSDP's blocks at stage 3.
        let (units, blocks) = match stage {
            3 => {
                let (units, of_block, root) = zero::block_units(&named.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>());
                (units, Some((of_block, root)))
            }
            _ => (reducer.buckets().to_vec(), None),
        };
        let shards = match stage {
            0 => None,
            _ => {
                let cp = (comm.shared_group(Token::CP), ParallelVit::is_cp_shared as fn(&str) -> bool);
                Some(Rc::new(Shards::new(stage, dp.clone(), &named, units.clone(), blocks, cp)?))
            }
        };
        let params: Vec<Tensor> = named.into_iter().map(|(_, t)| t).collect();
        let overlapped = if knobs.overlap && knobs.all_reduce && dp.size() > 1 && stage < 2 {
            Some(OverlappedReducer::new(dp.clone(), &params, reducer.buckets())?)
        } else {
            None
        };
        let scatter = match &shards {
            Some(shards) if stage >= 2 => {
                let scatter = OverlappedReducer::new(dp.clone(), &params, &units)?;
                let release = (stage == 3).then(|| shards.buffers());
                scatter.scatter(shards.grad_shards(), release.as_deref())?;
                Some(scatter)
            }
            _ => None,
        };
        Ok(GradSync {
            overlapped,
            scatter,
            shards,
            issued_in_backward: Cell::new(0),
            reducer,
            cp_reducer: GradReducer::new(&cp_params, knobs.buckets),
            comm,
            params,
            buffers: buffers.into_iter().map(|(_, t)| t).collect(),
            knobs,
            cp_params,
        })
    }

    /// ZeRO's stage this sync runs (0: DDP, also where dp is 1).
    pub fn zero_stage(&self) -> usize {
        self.shards.as_ref().map_or(0, |s| s.stage())
    }

    /// The optimizer over this rank's shards, when ZeRO shards the optimizer state.
    pub fn sharded_optimizer(&self, choice: scalebook_shared::config::Optimizer, fused: bool) -> Option<Optimizer> {
        self.shards.as_ref().map(|s| s.optimizer(choice, fused))
    }

    /// Stage 3's gathers and releases, for the model to run around its blocks.
    pub fn part_hooks(&self) -> Option<Rc<dyn PartHooks>> {
        self.shards.as_ref().filter(|s| s.stage() == 3).map(|s| Rc::new(ZeroHooks(s.clone())) as Rc<dyn PartHooks>)
    }

    /// Runs `f` with every parameter gathered (stage 3 releases them after, keeping what `f`
    /// wrote): to save or load a checkpoint.
    pub fn with_full_parameters<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        match &self.shards {
            Some(shards) => shards.with_full_parameters(f),
            None => f(),
        }
    }

    /// The shards, for checkpoints of their optimizer state.
    pub fn shards(&self) -> Option<&Shards> {
        self.shards.as_deref()
    }

    /// What this rank holds between steps and what it would hold unsharded, given its
    /// optimizer; `None` without ZeRO.
    pub fn holdings(&self, optimizer: &Optimizer) -> Option<(Holdings, Holdings)> {
        self.shards.as_ref().map(|s| s.holdings(optimizer))
    }

    /// The log's `ZeRO:` line (none without ZeRO), given the optimizer over the shards.
    pub fn describe_zero(&self, optimizer: &Optimizer) -> Option<String> {
        let shards = self.shards.as_ref()?;
        let (held, unsharded) = shards.holdings(optimizer);
        let dp = self.comm.size(Token::DP);
        Some(zero::zero_line(shards.stage(), dp, shards.unit_count(), held, unsharded, self.knobs.overlap))
    }

    /// How many all-reduces one step's dp gradient averaging makes (SC22 counted 8 NCCL calls
    /// per step at 25 MB buckets and 5 at 100 MB).
    pub fn dp_all_reduces(&self) -> usize {
        if self.knobs.all_reduce && self.zero_stage() < 2 { self.reducer.bucket_count() } else { 0 }
    }

    /// The log's line about the gradient all-reduces (SC22 counted NCCL calls per step in its
    /// profiles; here the trainer says how many it makes, how its buckets are cut, and when).
    pub fn describe(&self) -> String {
        match self.zero_stage() {
            0 | 1 => ddp_line(self.dp_all_reduces(), self.knobs.buckets, self.overlapped.is_some()),
            stage => format!("DDP: none, ZeRO stage {stage} reduce-scatters the gradients in its place (the ZeRO: line)"),
        }
    }

    /// Makes every data-parallel replica start from dp-rank 0's parameters (DDP does this when
    /// it wraps the model).
    pub fn broadcast_parameters(&self) -> Result<(), Error> {
        if let Some(shards) = &self.shards {
            return tch::no_grad(|| shards.broadcast());
        }
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

    /// Zeroes what a step's gradients accumulate into, where ZeRO keeps it (the optimizer
    /// zeroes its own: the parameters' gradients without ZeRO).
    pub fn zero_grad(&self) {
        if let Some(shards) = &self.shards {
            shards.zero_grad();
        }
    }

    /// Called before each micro-batch's backward pass (`last`: the one that completes the
    /// step's gradients), in which each gradient is accumulated `firings` times (once per
    /// lane). DDP issues all-reduces only in the last (its `no_sync` on the others); ZeRO's
    /// stages 2 and 3 reduce-scatter in every one. With overlap, a full bucket's collective is
    /// issued at once from then on.
    pub fn before_backward(&self, last: bool, firings: usize) {
        if let Some(overlapped) = self.overlapped.as_ref().filter(|_| last) {
            overlapped.arm(firings);
        }
        if let Some(scatter) = self.scatter.as_ref().filter(|_| self.knobs.overlap) {
            scatter.arm(firings);
        }
    }

    /// After each micro-batch's backward pass: ZeRO's stages 2 and 3 reduce-scatter its
    /// gradients into the shards (what backward did not issue, then waiting for all of it).
    pub fn after_backward(&self) -> Result<(), Error> {
        if let Some(scatter) = &self.scatter {
            self.issued_in_backward.set(scatter.finish(true)?);
        }
        Ok(())
    }

    /// After the last backward pass. The cp sum is part of the model's maths and always runs;
    /// the dp average is DDP's, and `noddp` skips it (the replicas then train apart, which is
    /// the point of measuring it). With overlap, this waits for what backward issued. At
    /// ZeRO's stages 2 and 3 the dp reduction is done (after each backward) and the cp sum
    /// runs on the shards.
    pub fn reduce_gradients(&self) -> Result<(), Error> {
        if let Some(shards) = self.shards.as_ref().filter(|s| s.stage() >= 2) {
            return shards.cp_sum();
        }
        if let Some(overlapped) = &self.overlapped {
            self.issued_in_backward.set(overlapped.finish(true)?);
        } else if self.knobs.all_reduce {
            self.reducer.reduce(&self.params, self.comm.group(Token::DP), ReduceOp::Avg)?;
        }
        self.cp_reducer.reduce(&self.cp_params, self.comm.group(Token::CP), ReduceOp::Sum)
    }

    /// After the optimizer step: ZeRO's stages 1 and 2 gather every rank's updated shards.
    pub fn after_step(&self) -> Result<(), Error> {
        match &self.shards {
            Some(shards) => tch::no_grad(|| shards.gather_updated()),
            None => Ok(()),
        }
    }

    /// How many of the dp all-reduces (reduce-scatters, at ZeRO's stages 2 and 3: of the last
    /// micro-batch) the last step issued during backward (0 without overlap).
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

/// The parts of a block in the order its forward pass uses them: `x + attn(norm1(x))` with
/// q, k and v made in that order, then `x + mlp(norm2(x))`.
const BLOCK_PARTS: [&str; 8] = ["norm1.", "attn.q.", "attn.k.", "attn.v.", "attn.proj.", "norm2.", "mlp.fc1.", "mlp.fc2."];

/// A parameter's place in the backward pass: the reverse of the forward order (patch
/// embedding, position embedding, blocks 0 to depth-1 part by part, final norm, head), as a
/// sort key.
fn backward_order(name: &str) -> std::cmp::Reverse<(u8, usize, usize, &str)> {
    let key = match name.strip_prefix("blocks.").and_then(|rest| rest.split_once('.')) {
        Some((block, rest)) => {
            let part = BLOCK_PARTS.iter().position(|p| rest.starts_with(p)).unwrap_or(BLOCK_PARTS.len());
            (2, block.parse().unwrap_or(usize::MAX), part, rest)
        }
        None => {
            let stage = ["patch_embed", "pos_embed", "", "norm", "head"].iter().position(|s| name.starts_with(s) && !s.is_empty());
            (stage.map_or(5, |s| s as u8), 0, 0, name)
        }
    };
    std::cmp::Reverse(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{VisionTransformer, VitSpec};

    /// `name` from the shipped `config/ViT.yaml`.
    fn shipped(name: &str) -> TrainConfig {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/ViT.yaml");
        scalebook_shared::config::ConfigFile::parse(&std::fs::read_to_string(path).unwrap()).unwrap().get(name).unwrap()
    }

    /// The trainer's own model for `config`, its trained variables named, in backward order.
    fn model_params(config: &TrainConfig) -> Named {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let _model = VisionTransformer::new(&vs.root(), &VitSpec::from(config));
        in_backward_order(&vs).0
    }

    /// The all-reduces a step of `config` makes at each `bucket_cap_mb`, first bucket as the
    /// config says, as its run's `DDP:` line counts them.
    fn all_reduces<const N: usize>(config: &str, caps_mb: [f64; N]) -> [usize; N] {
        let mut config = shipped(config);
        let params: Vec<Tensor> = model_params(&config).into_iter().map(|(_, t)| t).collect();
        caps_mb.map(|mb| {
            config.bucket_cap_mb = mb;
            GradReducer::new(&params, DdpKnobs::new(&config).buckets).bucket_count()
        })
    }

    /// The counts the data-parallel chapter quotes (its sweep's `DDP:` lines and its text), with
    /// DDP's 1 MiB first bucket.
    #[test]
    fn the_bucket_counts_are_the_ones_the_chapter_quotes() {
        assert_eq!(shipped("base").first_bucket_cap_mb, 1.0);
        let counts = (all_reduces("cpu_short", [25.0, 100.0, 1.0]), all_reduces("base", [25.0, 100.0]), all_reduces("mp", [25.0, 100.0]));
        assert_eq!(counts, ([2, 2, 4], [5, 2], [39, 14]));
    }

    /// The `DDP:` line states the count and both caps, as the data-parallel chapter quotes it.
    #[test]
    fn the_ddp_line_states_the_count_and_the_caps() {
        let knobs = DdpKnobs::new(&shipped("base"));
        let [calls] = all_reduces("base", [25.0]);
        assert_eq!(
            ddp_line(calls, knobs.buckets, true),
            "DDP: 5 gradient all-reduce(s) per step, the first bucket closed at 1 MB and the rest at 25 MB, each issued during backward as it fills"
        );
        assert_eq!(ddp_line(0, knobs.buckets, true), "DDP: no gradient all-reduce (noddp)");
    }

    #[test]
    fn parameters_go_in_the_order_backward_reaches_them() {
        let mut names = vec![
            "blocks.2.mlp.fc1.weight",
            "head.weight",
            "pos_embed",
            "blocks.10.norm1.bias",
            "blocks.10.attn.proj.weight",
            "blocks.10.mlp.fc2.bias",
            "blocks.10.attn.q.weight",
            "blocks.10.norm2.weight",
            "norm.weight",
            "patch_embed.proj.weight",
        ];
        names.sort_by_key(|n| backward_order(n));
        let expected = [
            "head.weight",
            "norm.weight",
            "blocks.10.mlp.fc2.bias",
            "blocks.10.norm2.weight",
            "blocks.10.attn.proj.weight",
            "blocks.10.attn.q.weight",
            "blocks.10.norm1.bias",
            "blocks.2.mlp.fc1.weight",
            "pos_embed",
            "patch_embed.proj.weight",
        ];
        assert_eq!(names, expected);
    }

    /// Every part of a block has its place: a part added to the block without one would be
    /// sorted as if it came after all the others.
    #[test]
    fn every_block_parameter_is_a_known_part() {
        for (name, _) in model_params(&shipped("cpu_short")) {
            if let Some(rest) = name.strip_prefix("blocks.").and_then(|rest| rest.split_once('.')).map(|(_, rest)| rest) {
                assert!(BLOCK_PARTS.iter().any(|p| rest.starts_with(p)), "{name} is in no part of BLOCK_PARTS");
            }
        }
    }
}
