//! ZeRO over the data-parallel group (`zero_stage`), as DeepSpeed's stages and PyTorch's FSDP
//! shard the training state: 1 shards Adam's moments, 2 also the gradients, 3 also the
//! parameters.
//!
//! The parameters are grouped in units, and each unit's parameters live in one flat buffer
//! (each parameter a view of it), padded to a multiple of dp and cut into dp equal chunks:
//! dp rank r owns chunk r of every unit, its shard. At stages 1 and 2 the units are DDP's
//! gradient buckets (so a bucket's reduce-scatter lands exactly on the shards); at stage 3
//! they are FSDP's: one per block, in the order backward finishes them, then everything
//! outside the blocks (patch and position embedding, final norm, head), FSDP's root unit.
//!
//! The optimizer updates only this rank's shards (Adam and SGD act element by element, so a
//! shard's update is the update of its elements), with state of the shards' size only. Then:
//! - stage 1: the gradients were all-reduced as DDP does (overlapped, bucketed); the shard's
//!   gradient is a view of its bucket's averaged gradient; after the step the updated shards
//!   are all-gathered into every unit's buffer, so every rank holds every parameter again.
//! - stage 2: each unit's gradient is reduce-scattered instead (during backward as it fills,
//!   with `overlap_grad_reduce`), each rank keeping only its shard's average; the parameters'
//!   own gradients are let go; after the step, the same all-gather as stage 1.
//! - stage 3: a unit's buffer holds memory only while the unit is in use: gathered before
//!   its block's forward and released after it, gathered again before its backward (a node
//!   on the block's output) and released once its gradients are issued. The root unit stays
//!   gathered from the start of the forward pass to the end of backward. Nothing is gathered
//!   after the step: the next forward pass gathers the updated shards.
//!
//! With micro-batches, stages 2 and 3 reduce-scatter every micro-batch's gradients (their
//! point is that no rank keeps a whole gradient), where stage 1 accumulates whole gradients
//! and all-reduces once, as DDP's `no_sync` does. With cp > 1 the gradients of the parameters
//! each cp rank applied to its own tokens are summed over cp after the dp reduction: at
//! stages 2 and 3 on the shards, through a mask of their elements.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use scalebook_shared::config::Optimizer as Choice;
use tch::{Kind, Tensor};

use crate::Error;
use crate::ffi::{self, ProcessGroup, ReduceOp, Unit};
use crate::model::PartHooks;
use crate::train::optim::Optimizer;
use crate::train::reshard::{MemberLayout, Saved, ShardLayout, Slot, UnitLayout, shard_name};

/// Bytes one rank holds of the training state, between steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holdings {
    pub params: u64,
    pub grads: u64,
    pub optimizer: u64,
}

/// One parameter's place in its unit.
struct Member {
    name: String,
    param: Tensor,
    offset: i64,
}

/// This rank's shards of every unit, and what it needs to gather, reduce and release them.
pub struct Shards {
    stage: usize,
    dp: Rc<ProcessGroup>,
    units: Vec<Unit>,
    /// Per unit, its parameters, in the order backward reaches them.
    members: Vec<Vec<Member>>,
    /// Per unit, the gradient of this rank's shard.
    grads: Vec<Tensor>,
    /// Stage 1: per unit, the buffer the parameters' gradients are views of.
    grad_buffers: Vec<Tensor>,
    /// Stage 3: block i's unit, and the unit outside the blocks.
    block_units: Vec<usize>,
    root_unit: Option<usize>,
    /// At stages 2 and 3 with cp > 1: the cp group, and per unit which elements of this rank's
    /// gradient shard belong to parameters whose gradients are summed over cp.
    cp: Option<(Rc<ProcessGroup>, Vec<Tensor>)>,
    /// Every unit held gathered (by [`Shards::with_full_parameters`]): the model's hooks gather
    /// and release nothing, so a forward pass on one rank alone (the maps') needs no other.
    pinned: Cell<bool>,
}

/// FSDP's units of `names` (in backward order): one per block, in the order backward reaches
/// the blocks, then the rest. Also block i's unit and the rest's.
pub fn block_units(names: &[&str]) -> (Vec<Vec<usize>>, Vec<usize>, usize) {
    let block_of =
        |name: &str| name.strip_prefix("blocks.").and_then(|rest| rest.split_once('.')).and_then(|(b, _)| b.parse::<usize>().ok());
    let mut units: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut root = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match block_of(name) {
            Some(b) => match units.iter_mut().find(|(block, _)| *block == b) {
                Some((_, members)) => members.push(i),
                None => units.push((b, vec![i])),
            },
            None => root.push(i),
        }
    }
    let depth = units.iter().map(|(b, _)| b + 1).max().unwrap_or(0);
    let mut of_block = vec![usize::MAX; depth];
    for (u, (b, _)) in units.iter().enumerate() {
        of_block[*b] = u;
    }
    let root_unit = units.len();
    let mut out: Vec<Vec<usize>> = units.into_iter().map(|(_, members)| members).collect();
    out.push(root);
    (out, of_block, root_unit)
}

impl Shards {
    /// Shards `named` (every trained parameter, in backward order) over `dp` at `stage`, in
    /// `units` (lists of indices into `named`, in the order backward completes them). Each
    /// parameter becomes a view of its unit's buffer, which at stage 3 stays gathered (with
    /// this rank's values) until [`Shards::broadcast`]. The parameters `cp.1` names have their
    /// gradients summed over the cp group `cp.0` (when it has more than one rank).
    pub fn new(
        stage: usize,
        dp: Rc<ProcessGroup>,
        named: &[(String, Tensor)],
        units: Vec<Vec<usize>>,
        blocks: Option<(Vec<usize>, usize)>,
        cp: (Rc<ProcessGroup>, fn(&str) -> bool),
    ) -> Result<Shards, Error> {
        let (size, rank) = (dp.size() as i64, dp.rank() as i64);
        let (mut out_units, mut members, mut grads, mut grad_buffers, mut masks) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        tch::no_grad(|| -> Result<(), Error> {
            for unit in &units {
                let first = &named[unit[0]].1;
                let options = (first.kind(), first.device());
                let n: i64 = unit.iter().map(|&i| named[i].1.numel() as i64).sum();
                let chunk = (n + size - 1) / size;
                let full = Tensor::zeros([chunk * size], options);
                let cp_shared = Tensor::zeros([chunk * size], (Kind::Bool, first.device()));
                let mut grad_buffer = (stage == 1).then(|| Tensor::zeros([chunk * size], options));
                let mut placed = Vec::with_capacity(unit.len());
                let mut offset = 0;
                for &i in unit {
                    let (name, param) = &named[i];
                    let numel = param.numel() as i64;
                    let place = full.narrow(0, offset, numel);
                    place.view_as(param).copy_(param);
                    ffi::set_data(param, &place.view_as(param))?;
                    match &mut grad_buffer {
                        Some(buffer) => ffi::set_grad(param, Some(&buffer.narrow(0, offset, numel).view_as(param)))?,
                        None => ffi::set_grad(param, None)?,
                    }
                    if (cp.1)(name) {
                        let _ = cp_shared.narrow(0, offset, numel).fill_(1);
                    }
                    placed.push(Member { name: name.clone(), param: param.shallow_clone(), offset });
                    offset += numel;
                }
                let mine = full.narrow(0, rank * chunk, chunk);
                // At stage 3 the shard outlives the buffer, which is released between uses.
                let shard = if stage == 3 { mine.copy() } else { mine };
                let grad = match &grad_buffer {
                    Some(buffer) => buffer.narrow(0, rank * chunk, chunk),
                    None => Tensor::zeros([chunk], options),
                };
                masks.push(cp_shared.narrow(0, rank * chunk, chunk).copy());
                grad_buffers.extend(grad_buffer.take());
                grads.push(grad);
                members.push(placed);
                out_units.push(Unit::new(dp.clone(), full, shard));
            }
            Ok(())
        })?;
        let (block_units, root_unit) = blocks.map_or((Vec::new(), None), |(b, r)| (b, Some(r)));
        let cp = (cp.0.size() > 1 && stage >= 2).then_some((cp.0, masks));
        Ok(Shards { stage, dp, units: out_units, members, grads, grad_buffers, block_units, root_unit, cp, pinned: Cell::new(false) })
    }

    pub fn stage(&self) -> usize {
        self.stage
    }

    pub fn unit_count(&self) -> usize {
        self.units.len()
    }

    /// Each unit's gradient shard, in unit order (what the reducer reduce-scatters into).
    pub fn grad_shards(&self) -> &[Tensor] {
        &self.grads
    }

    /// Each unit's buffer, in unit order (what stage 3's reducer releases).
    pub fn buffers(&self) -> Vec<Tensor> {
        self.units.iter().map(|u| u.full.shallow_clone()).collect()
    }

    /// The optimizer over this rank's shards.
    pub fn optimizer(&self, choice: Choice, fused: bool) -> Optimizer {
        let shards = self.units.iter().zip(&self.grads).enumerate();
        Optimizer::over_shards(
            choice,
            shards.map(|(u, (unit, g))| (shard_name(u), unit.shard.shallow_clone(), g.shallow_clone())).collect(),
            fused,
        )
    }

    fn each_unit(&self, f: impl Fn(&Unit) -> Result<(), Error>) -> Result<(), Error> {
        self.units.iter().try_for_each(f)
    }

    /// Copies every gathered unit's chunk into this rank's shard (stage 3, whose shards are
    /// tensors of their own), after the buffers were written.
    fn reshard(&self) {
        if self.stage == 3 {
            let rank = self.dp.rank() as i64;
            tch::no_grad(|| {
                for unit in &self.units {
                    let chunk = unit.shard.numel() as i64;
                    let mut shard = unit.shard.shallow_clone();
                    shard.copy_(&unit.full.narrow(0, rank * chunk, chunk));
                }
            });
        }
    }

    /// Every rank starts from dp-rank 0's parameters (DDP's broadcast), each unit's buffer at
    /// once; at stage 3 the buffers are then released, each rank keeping its shard.
    pub fn broadcast(&self) -> Result<(), Error> {
        self.each_unit(Unit::gather)?;
        self.each_unit(|unit| self.dp.broadcast(&mut unit.full.shallow_clone(), 0))?;
        self.reshard();
        self.release_all()
    }

    /// Runs `f` with every parameter gathered (stage 3 releases them after, keeping what `f`
    /// wrote in the shards): to save or load a checkpoint.
    pub fn with_full_parameters<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.each_unit(Unit::gather)?;
        let was = self.pinned.replace(true);
        let out = f();
        self.pinned.set(was);
        let out = out?;
        if !was {
            self.reshard();
            self.release_all()?;
        }
        Ok(out)
    }

    fn release_all(&self) -> Result<(), Error> {
        match self.stage {
            3 => self.each_unit(Unit::release),
            _ => Ok(()),
        }
    }

    /// Zeroes the gradients the step accumulates into: the shards' (and at stage 1 the
    /// buffers the parameters' gradients are views of).
    pub fn zero_grad(&self) {
        tch::no_grad(|| {
            for g in self.grad_buffers.iter().chain(&self.grads) {
                let _ = g.shallow_clone().zero_();
            }
        });
    }

    /// Stages 2 and 3 with cp > 1: the cp sum of the shards' elements that need it.
    pub fn cp_sum(&self) -> Result<(), Error> {
        let Some((cp, masks)) = &self.cp else { return Ok(()) };
        tch::no_grad(|| {
            let picked: Vec<Tensor> = self.grads.iter().zip(masks).map(|(g, m)| g.masked_select(m)).collect();
            let mut flat = Tensor::cat(&picked, 0);
            cp.all_reduce(&mut flat, ReduceOp::Sum)?;
            let mut offset = 0;
            for ((g, m), p) in self.grads.iter().zip(masks).zip(&picked) {
                let n = p.numel() as i64;
                let _ = g.shallow_clone().masked_scatter_(m, &flat.narrow(0, offset, n));
                offset += n;
            }
            Ok(())
        })
    }

    /// After the optimizer step (stages 1 and 2): every rank's updated shards gathered into
    /// every unit's buffer, so every rank holds every updated parameter.
    pub fn gather_updated(&self) -> Result<(), Error> {
        if self.stage == 3 {
            return Ok(());
        }
        self.each_unit(|unit| {
            let updated = unit.shard.copy();
            self.dp.all_gather_into(&mut unit.full.shallow_clone(), &updated)
        })
    }

    /// How many all-gathers a step makes after its optimizer step.
    pub fn gathers_after_step(&self) -> usize {
        if self.stage == 3 { 0 } else { self.units.len() }
    }

    /// What this rank holds between steps, and what it would hold unsharded (DDP), given the
    /// optimizer over its shards.
    pub fn holdings(&self, optimizer: &Optimizer) -> (Holdings, Holdings) {
        let bytes = |t: &Tensor| (t.numel() * t.kind().elt_size_in_bytes()) as u64;
        let mut held = Holdings::default();
        for unit in &self.units {
            held.params += ffi::storage_bytes(&unit.full);
            if self.stage == 3 {
                held.params += bytes(&unit.shard);
            }
        }
        let own: u64 = self.members.iter().flatten().map(|m| m.param.grad()).filter(Tensor::defined).map(|g| bytes(&g)).sum();
        held.grads = match self.stage {
            1 => self.grad_buffers.iter().map(ffi::storage_bytes).sum(),
            _ => self.grads.iter().map(bytes).sum::<u64>() + own,
        };
        held.optimizer = optimizer.state_bytes();
        let params: u64 = self.members.iter().flatten().map(|m| bytes(&m.param)).sum();
        // Unsharded, each state tensor of a shard is one per parameter, of the parameter's
        // size for the moments (the shard's size times dp, less the padding) and of its own
        // size for the step counters.
        let mut optimizer_unsharded = 0;
        for (name, t) in optimizer.state() {
            let Some(u) = name.rsplit('.').next().and_then(|u| u.parse::<usize>().ok()).filter(|&u| u < self.units.len()) else { continue };
            let elements: usize = self.members[u].iter().map(|m| m.param.numel()).sum();
            optimizer_unsharded += if t.numel() == self.units[u].shard.numel() {
                (elements * t.kind().elt_size_in_bytes()) as u64
            } else {
                bytes(&t) * self.members[u].len() as u64
            };
        }
        (held, Holdings { params, grads: params, optimizer: optimizer_unsharded })
    }

    /// How the units are cut, for a checkpoint, given the optimizer's `state` of this rank's
    /// shards: any later layout reads the shards back by the parameters' names.
    pub fn layout(&self, state: &[(String, Tensor)]) -> Result<ShardLayout, Error> {
        let mut slots: Vec<Slot> = Vec::new();
        for (key, t) in state {
            let (prefix, u) = split_state_name(key, self.units.len())?;
            if !slots.iter().any(|s| s.prefix == prefix) {
                slots.push(Slot { prefix: prefix.to_owned(), per_element: t.numel() == self.units[u].shard.numel() });
            }
        }
        let dp = self.dp.size();
        let units = self.units.iter().zip(&self.members).map(|(unit, members)| {
            let chunk = unit.shard.numel() as i64;
            let used: i64 = members.iter().map(|m| m.param.numel() as i64).sum();
            let members = members.iter().map(|m| MemberLayout { name: m.name.clone(), shape: m.param.size(), offset: m.offset });
            UnitLayout { chunk, padding: chunk * dp as i64 - used, members: members.collect() }
        });
        Ok(ShardLayout { dp, stage: self.stage, slots, units: units.collect() })
    }

    /// This rank's part of a checkpoint: its shard of every unit's parameters (`zero.0003`),
    /// each a tensor of its own (a view would save its unit's whole buffer), then the
    /// optimizer's `state` of them.
    pub fn shard_tensors(&self, state: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
        self.units.iter().enumerate().map(|(u, unit)| (shard_name(u), unit.shard.copy())).chain(state).collect()
    }

    /// This rank's parameters and optimizer state from a checkpoint of any layout, resharded
    /// as DCP does at load: each unit's shard filled in place from the saved parameters, then
    /// gathered into its buffer at stages 1 and 2 (stage 3 gathers at its next use). Returns
    /// the optimizer's state of the shards, by the names `state` (the optimizer's own) gives.
    /// Every dp rank must call it.
    pub fn restore(&self, saved: &Saved, state: &[(String, Tensor)]) -> Result<HashMap<String, Tensor>, Error> {
        for (u, unit) in self.units.iter().enumerate() {
            let values = self.read_shard(saved, "", u)?;
            tch::no_grad(|| unit.shard.shallow_clone().f_copy_(&values))?;
        }
        tch::no_grad(|| self.gather_updated())?;
        let mut out = HashMap::new();
        for (key, t) in state {
            let (prefix, u) = split_state_name(key, self.units.len())?;
            let value = if t.numel() == self.units[u].shard.numel() {
                self.read_shard(saved, prefix, u)?
            } else {
                // One value per unit (Adam's step): every parameter of the unit has the same.
                saved.required(&format!("{prefix}{}", self.members[u][0].name))?
            };
            out.insert(key.clone(), value);
        }
        Ok(out)
    }

    /// This rank's shard of unit `u` of the saved tensors `prefix` + a parameter's name (the
    /// parameters themselves with no prefix): the elements of its members that fall in this
    /// rank's chunk, read from whatever layout saved them, then the padding's zeros.
    fn read_shard(&self, saved: &Saved, prefix: &str, u: usize) -> Result<Tensor, Error> {
        let shard = &self.units[u].shard;
        let chunk = shard.numel() as i64;
        let (lo, hi) = (self.dp.rank() as i64 * chunk, (self.dp.rank() as i64 + 1) * chunk);
        let mut pieces = Vec::new();
        for m in &self.members[u] {
            let (start, end) = (m.offset.max(lo), (m.offset + m.param.numel() as i64).min(hi));
            if start < end {
                let piece = saved.elements(&format!("{prefix}{}", m.name), start - m.offset, end - start)?;
                pieces.push(piece.f_to_kind(shard.kind())?.to_device(shard.device()));
            }
        }
        let filled: i64 = pieces.iter().map(|p| p.numel() as i64).sum();
        pieces.push(Tensor::zeros([chunk - filled], (shard.kind(), shard.device())));
        Ok(Tensor::f_cat(&pieces, 0)?)
    }
}

/// `adam.exp_avg.zero.0003` as (`adam.exp_avg.`, 3).
fn split_state_name(key: &str, units: usize) -> Result<(&str, usize), Error> {
    let bad = || Error::Internal { what: "ZeRO's optimizer state".into(), message: format!("{key} names no unit's shard") };
    let at = key.find("zero.").ok_or_else(bad)?;
    let u = key[at + 5..].parse::<usize>().ok().filter(|&u| u < units).ok_or_else(bad)?;
    Ok((&key[..at], u))
}

/// Stage 3's gathers and releases around the model's parts.
pub struct ZeroHooks(pub Rc<Shards>);

impl ZeroHooks {
    fn block(&self, block: usize) -> Result<&Unit, Error> {
        self.0
            .block_units
            .get(block)
            .and_then(|&u| self.0.units.get(u))
            .ok_or_else(|| Error::Internal { what: "ZeRO stage 3".into(), message: format!("block {block} has no unit") })
    }

    fn root(&self) -> Option<&Unit> {
        self.0.root_unit.and_then(|u| self.0.units.get(u))
    }
}

impl PartHooks for ZeroHooks {
    fn enter(&self) -> Result<(), Error> {
        match self.0.pinned.get() {
            true => Ok(()),
            false => self.root().map_or(Ok(()), Unit::gather),
        }
    }

    fn before_block(&self, block: usize) -> Result<(), Error> {
        match self.0.pinned.get() {
            true => Ok(()),
            false => self.block(block)?.gather(),
        }
    }

    fn after_block(&self, block: usize, y: Tensor, train: bool) -> Result<Tensor, Error> {
        if self.0.pinned.get() {
            return Ok(y);
        }
        let unit = self.block(block)?;
        let y = if train { unit.gather_on_backward(&y)? } else { y };
        unit.release()?;
        Ok(y)
    }

    /// In training the root unit stays gathered until its gradients are issued, at the end of
    /// backward.
    fn exit(&self, train: bool) -> Result<(), Error> {
        match (train || self.0.pinned.get(), self.root()) {
            (false, Some(root)) => root.release(),
            _ => Ok(()),
        }
    }
}

/// A size in bytes in MB to two decimals, as the `DDP:` line gives sizes.
fn megabytes(bytes: u64) -> f64 {
    (bytes as f64 / (1024.0 * 1024.0) * 100.0).round() / 100.0
}

/// The `ZeRO:` line: the stage, what each rank holds against what it would hold unsharded, and
/// the collectives of a step (`units` of them, reduce-scatters issued during backward when
/// `overlapped`).
pub fn zero_line(stage: usize, dp: usize, units: usize, held: Holdings, unsharded: Holdings, overlapped: bool) -> String {
    let part = |what: &str, h: u64, u: u64| format!("{what} {} MB of {} MB", megabytes(h), megabytes(u));
    let holds = [
        part("parameters", held.params, unsharded.params),
        part("gradients", held.grads, unsharded.grads),
        part("optimizer state", held.optimizer, unsharded.optimizer),
    ]
    .join(", ");
    let when = if overlapped { "each issued during backward as it fills" } else { "issued after backward" };
    let step = match stage {
        1 => format!("gradients all-reduced as DDP does, then {units} all-gather(s) of the updated shards after the optimizer step"),
        2 => format!(
            "{units} gradient reduce-scatter(s) per micro-batch, {when}, then {units} all-gather(s) of the updated shards after the optimizer step"
        ),
        _ => format!(
            "{units} units (one per block, then the rest) each gathered before its forward and again before its backward, \
             {units} gradient reduce-scatter(s) per micro-batch, {when}"
        ),
    };
    format!("ZeRO: stage {stage} over dp {dp}, each rank holds {holds}; per step {step}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_of_stage_3_are_the_blocks_from_the_last_then_the_rest() {
        let names = [
            "head.weight",
            "norm.weight",
            "blocks.1.mlp.fc2.bias",
            "blocks.1.norm1.bias",
            "blocks.0.mlp.fc2.bias",
            "blocks.0.norm1.weight",
            "pos_embed",
        ];
        let (units, of_block, root) = block_units(&names);
        assert_eq!(units, vec![vec![2, 3], vec![4, 5], vec![0, 1, 6]]);
        assert_eq!(of_block, vec![1, 0]);
        assert_eq!(root, 2);
    }

    #[test]
    fn state_names_find_their_unit() {
        assert_eq!(split_state_name("adam.exp_avg.zero.0003", 4).unwrap(), ("adam.exp_avg.", 3));
        assert_eq!(split_state_name(&format!("sgd.momentum.{}", shard_name(12)), 13).unwrap(), ("sgd.momentum.", 12));
        assert!(split_state_name("adam.exp_avg.zero.0004", 4).is_err());
        assert!(split_state_name("adam.exp_avg.head.weight", 4).is_err());
    }

    /// The `ZeRO:` line states what each rank holds against DDP and what a step does.
    #[test]
    fn the_zero_line_states_the_holdings_and_the_collectives() {
        let mb = 1024 * 1024;
        let unsharded = Holdings { params: 8 * mb, grads: 8 * mb, optimizer: 16 * mb };
        let held = Holdings { params: 8 * mb, grads: 4 * mb, optimizer: 8 * mb };
        assert_eq!(
            zero_line(2, 2, 5, held, unsharded, true),
            "ZeRO: stage 2 over dp 2, each rank holds parameters 8 MB of 8 MB, gradients 4 MB of 8 MB, optimizer state 8 MB of 16 MB; \
             per step 5 gradient reduce-scatter(s) per micro-batch, each issued during backward as it fills, then 5 all-gather(s) of \
             the updated shards after the optimizer step"
        );
        assert!(zero_line(1, 2, 5, held, unsharded, true).contains("gradients all-reduced as DDP does, then 5 all-gather(s)"));
        assert!(zero_line(3, 4, 6, held, unsharded, false).starts_with("ZeRO: stage 3 over dp 4"));
        assert!(zero_line(3, 4, 6, held, unsharded, false).contains("6 units (one per block, then the rest)"));
    }
}
