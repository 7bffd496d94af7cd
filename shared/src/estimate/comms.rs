//! Every collective one step runs, tutorial-faithful (reference §3.1 and §7), with its time
//! under the ring algorithm: an all-reduce of S bytes over n ranks moves `2(n−1)/n · S` bytes
//! through each rank's slowest link, an all-gather or a reduce-scatter (S = the gathered size)
//! `(n−1)/n · S`. Time = those bytes / the bus bandwidth of the link the group uses. Latency
//! (a few µs per hop) is left out: the tutorial's messages are megabytes.
//!
//! A group that stays inside a node uses NVLink. One that crosses nodes is limited by the
//! network: each GPU has its own NIC (Perlmutter: one Slingshot-11 NIC per GPU), and a ring
//! spread over as many NICs per node as the group has ranks there, so its bus bandwidth is
//! `ranks per node × NIC × network_efficiency`, at most the NVLink figure.
//!
//! A pipeline's stages pass each micro-batch's activation forward and its gradient back,
//! point to point between neighbouring stages: one GPU's link, NVLink when the two share a
//! node, the GPU's own NIC when they do not. Each transfer holds its stage up (the trainer
//! sends and receives between passes), so they count in full.
//!
//! ZeRO replaces DDP's gradient all-reduce over dp as the trainer runs it (`train/zero.rs`):
//! - stage 1: the same all-reduce, overlapped with backward, then the updated shards
//!   all-gathered after the optimizer step (blocking): 1.5 all-reduces' bytes;
//! - stage 2: each micro-batch's gradients reduce-scattered under its backward (overlapped,
//!   as DDP's buckets are), then the same all-gather: an all-reduce's bytes;
//! - stage 3: each block's parameters all-gathered before its forward and again before its
//!   backward (blocking: the trainer gathers when the block is reached, without prefetching),
//!   the unit outside the blocks once per micro-batch, and the gradients reduce-scattered
//!   under backward: about 1.5 all-reduces' bytes. Nothing is gathered after the step.
//!
//! At stages 2 and 3 the cp sum of the block gradients runs on the shards after backward.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::Shape;
use super::params::ParamSplit;
use crate::cluster::{EstimateFactors, Interconnect};
use crate::layout::{Dim, Layout, Placement, Token};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    AllReduce,
    AllGather,
    ReduceScatter,
    /// A pipeline stage's send to its neighbour (and the neighbour's receive).
    SendRecv,
}

impl Operation {
    pub const fn name(self) -> &'static str {
        match self {
            Operation::AllReduce => "all-reduce",
            Operation::AllGather => "all-gather",
            Operation::ReduceScatter => "reduce-scatter",
            Operation::SendRecv => "send/recv",
        }
    }

    /// Bytes through each rank's link per byte of the buffer, for a ring of n ranks (a
    /// point-to-point transfer sends its buffer once).
    pub(super) fn ring_factor(self, n: u32) -> f64 {
        let n = f64::from(n);
        let once = (n - 1.0) / n;
        match self {
            Operation::AllReduce => 2.0 * once,
            Operation::AllGather | Operation::ReduceScatter => once,
            Operation::SendRecv => 1.0,
        }
    }
}

/// When in the step a collective runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Forward,
    Backward,
    /// After the backward pass, with the optimizer step.
    Step,
}

impl Phase {
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Step => "step",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    Nvlink,
    Network,
}

impl Link {
    pub const fn name(self) -> &'static str {
        match self {
            Link::Nvlink => "nvlink",
            Link::Network => "network",
        }
    }
}

/// One kind of collective in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    /// The rank group it runs over (`tp`, `cp`, `pp`, `dp`).
    pub group: Token,
    pub group_size: u32,
    pub operation: Operation,
    pub phase: Phase,
    /// What it moves, in words (static: an estimate is made thousands of times a search).
    pub what: Cow<'static, str>,
    /// Size of one call's buffer (the gathered size for an all-gather).
    pub bytes: u64,
    /// Calls per step.
    pub count: u64,
    pub link: Link,
    pub bus_gb_per_s: f64,
    /// All calls of one step.
    pub seconds: f64,
    /// Runs while the backward pass computes (DDP's gradient buckets and its hook), rather
    /// than holding the computation up.
    pub overlapped: bool,
}

/// The bytes of one gradient element: fp32 (AMP keeps fp32 parameters, so gradients are fp32).
const GRAD_BYTES: u64 = 4;

/// The bytes of an fp32 element: a parameter, and the residual stream between blocks.
const FP32_BYTES: u64 = 4;

/// Bytes of a k or v element as cp gathers it, whatever the precision: the distributed layers
/// add their fp32 bias outside the matmul (`y = y + bias`), which promotes autocast's
/// half-precision product to fp32 before the all-gather.
const GATHERED_KV_BYTES: u64 = 4;

/// The links found for a search's layouts on one cluster, by how a dimension's groups lie in
/// the rank space (ring or neighbours, its size, its stride, the world): finding one walks
/// every group, and many layouts lay a dimension out alike.
#[derive(Debug, Default)]
pub(crate) struct FoundLinks(HashMap<(bool, u32, u32, u32), (Link, f64)>);

/// What every collective needs to know about the cluster.
pub(crate) struct Network<'a> {
    pub layout: &'a Layout,
    pub placement: Placement,
    pub links: Interconnect,
    pub factors: &'a EstimateFactors,
    /// Each group's link, found once: finding it walks every group, and an estimate asks for
    /// it once per stage and ZeRO stage (the layout search makes thousands of estimates).
    known: Vec<(Token, (Link, f64))>,
}

impl<'a> Network<'a> {
    pub fn new(layout: &'a Layout, placement: Placement, links: Interconnect, factors: &'a EstimateFactors) -> Network<'a> {
        Network::found(layout, placement, links, factors, &mut FoundLinks::default())
    }

    /// [`Network::new`], each dimension's link taken from `found` when a layout before laid
    /// that dimension out alike (on the same cluster: `found` serves one cluster only).
    pub fn found(
        layout: &'a Layout,
        placement: Placement,
        links: Interconnect,
        factors: &'a EstimateFactors,
        found: &mut FoundLinks,
    ) -> Network<'a> {
        let mut net = Network { layout, placement, links, factors, known: Vec::new() };
        let dims = [(Token::TP, Dim::Tp), (Token::CP, Dim::Cp), (Token::DP, Dim::Dp), (Token::PP, Dim::Pp)];
        for (token, dim) in dims.into_iter().filter(|&(t, _)| layout.group_size(t) > 1) {
            let key = (dim == Dim::Pp, layout.group_size(token), layout.stride(dim), layout.world());
            let link = match found.0.get(&key) {
                Some(&link) => link,
                None if dim == Dim::Pp => net.neighbour_link(),
                None => net.ring_link(token),
            };
            found.0.insert(key, link);
            net.known.push((token, link));
        }
        net
    }

    /// All an estimate reads of the layout beyond its sizes: each group's link and bandwidth
    /// (bits of the float). Two orders of one factorisation with the same links have the same
    /// estimate, which the layout search makes once.
    pub fn links(&self) -> Vec<(Token, Link, u64)> {
        self.known.iter().map(|&(token, (link, bus))| (token, link, bus.to_bits())).collect()
    }

    fn nvlink_bus(&self) -> f64 {
        self.links.nvlink_gb_per_s * self.factors.nvlink_efficiency
    }

    /// The link a token's collectives use and its bandwidth in GB/s.
    fn link(&self, token: Token) -> (Link, f64) {
        self.known.iter().find(|(t, _)| *t == token).map_or_else(|| self.ring_link(token), |(_, link)| *link)
    }

    /// The link a token's rings use and their bus bandwidth. The slowest group sets the pace,
    /// since every group of a token runs the same collective at the same time.
    fn ring_link(&self, token: Token) -> (Link, f64) {
        let groups = self.layout.groups(token);
        let per_node = groups.iter().filter(|g| self.placement.crosses_nodes(g)).map(|g| self.fewest_per_node(g)).min();
        match per_node {
            None => (Link::Nvlink, self.nvlink_bus()),
            Some(ranks) => {
                let network = f64::from(ranks) * self.links.network_gb_per_s * self.factors.network_efficiency;
                (Link::Network, network.min(self.nvlink_bus()))
            }
        }
    }

    /// The link between neighbouring pipeline stages: the network, through one GPU's NIC,
    /// when any two neighbours sit on different nodes.
    fn neighbour_link(&self) -> (Link, f64) {
        let node = |r: u32| self.placement.node_of(r);
        let crosses = self.layout.groups(Token::PP).iter().any(|g| g.windows(2).any(|pair| node(pair[0]) != node(pair[1])));
        match crosses {
            false => (Link::Nvlink, self.nvlink_bus()),
            true => (Link::Network, (self.links.network_gb_per_s * self.factors.network_efficiency).min(self.nvlink_bus())),
        }
    }

    /// The fewest ranks the group has on any node it touches (ranks ascend and nodes are
    /// contiguous rank ranges, so a node's ranks are one run).
    fn fewest_per_node(&self, group: &[u32]) -> u32 {
        let node = |r: u32| self.placement.node_of(r);
        group.chunk_by(|&a, &b| node(a) == node(b)).map(|run| run.len() as u32).min().unwrap_or(1)
    }

    /// A collective of `token`'s groups, timed on their link; none when the group is one rank.
    fn collective(&self, token: Token, call: Call) -> Option<Collective> {
        let size = self.layout.group_size(token);
        if size <= 1 || call.count == 0 {
            return None;
        }
        let (link, bus) = self.link(token);
        let one = operation_seconds(call.operation, size, call.bytes, bus) + self.factors.collective_latency_s;
        Some(Collective {
            group: token,
            group_size: size,
            operation: call.operation,
            phase: call.phase,
            what: Cow::Borrowed(call.what),
            bytes: call.bytes,
            count: call.count,
            link,
            bus_gb_per_s: bus,
            seconds: call.count as f64 * one,
            overlapped: call.overlapped,
        })
    }
}

/// One kind of call, before its group's link times it.
struct Call {
    operation: Operation,
    phase: Phase,
    what: &'static str,
    bytes: u64,
    count: u64,
    overlapped: bool,
}

const fn call(operation: Operation, phase: Phase, what: &'static str, bytes: u64, count: u64, overlapped: bool) -> Call {
    Call { operation, phase, what, bytes, count, overlapped }
}

/// The collectives of one step on one rank of its pipeline stage that do not depend on ZeRO:
/// tp's and cp's between layers, and the stages' transfers. Each micro-batch runs its own.
pub(super) fn model_collectives(shape: &Shape, params: &ParamSplit, net: &Network<'_>) -> Vec<Collective> {
    let Shape { embed_dim: d, depth, tokens: n, tokens_local: nl, micro_batch: b, micro_batches: m, tp, .. } = *shape;
    let a = shape.element_bytes() as u64;
    use Operation::*;
    use Phase::*;
    let tokens_local = b * nl * d;
    let kv = GATHERED_KV_BYTES * b * n * d / tp;
    let sequence = GRAD_BYTES * b * n * d;
    let (head, embedding) = (u64::from(shape.head), u64::from(shape.embedding));
    let transfers = m * shape.chunks_per_stage();
    let cp_hook_overlapped = shape.zero_stage < 2;
    let cp_hook = if cp_hook_overlapped { params.cp_reduced } else { params.cp_reduced.div_ceil(shape.dp) };
    let calls = [
        (Token::TP, call(AllReduce, Forward, "outputs of the row-parallel proj and fc2", a * tokens_local, 2 * depth * m, false)),
        (
            Token::TP,
            call(
                AllReduce,
                Backward,
                "input gradients of the column-parallel q, k, v and fc1 (fp32: taken before autocast's cast)",
                GRAD_BYTES * tokens_local,
                4 * depth * m,
                false,
            ),
        ),
        (
            Token::CP,
            call(AllGather, Forward, "k and v of this rank's heads, all tokens (fp32 after the bias add)", kv, 2 * depth * m, false),
        ),
        (Token::CP, call(ReduceScatter, Backward, "gradients of the gathered k and v (fp32)", kv, 2 * depth * m, false)),
        (Token::CP, call(AllGather, Forward, "tokens gathered before the head (fp32)", sequence, head * m, false)),
        (Token::CP, call(AllGather, Backward, "embedding gradients (backward of the token scatter)", sequence, embedding * m, false)),
        (
            Token::CP,
            match cp_hook_overlapped {
                true => call(AllReduce, Backward, "block gradients summed over cp (DDP comm hook)", GRAD_BYTES * cp_hook, 1, true),
                false => {
                    call(AllReduce, Step, "block gradients summed over cp, on this rank's ZeRO shards", GRAD_BYTES * cp_hook, 1, false)
                }
            },
        ),
        (
            Token::PP,
            call(
                SendRecv,
                Forward,
                "activations to the next stage (fp32 residual stream, one micro-batch)",
                FP32_BYTES * tokens_local,
                transfers,
                false,
            ),
        ),
        (
            Token::PP,
            call(SendRecv, Backward, "their gradients back to the stage before (fp32)", FP32_BYTES * tokens_local, transfers, false),
        ),
    ];
    calls.into_iter().filter_map(|(token, c)| net.collective(token, c)).collect()
}

/// The dp group's collectives under ZeRO stage `zero` (0 is DDP), and the loss's all-reduce.
pub(super) fn dp_collectives(shape: &Shape, params: &ParamSplit, net: &Network<'_>, zero: u8) -> Vec<Collective> {
    use Operation::*;
    use Phase::*;
    let m = shape.micro_batches;
    let grads = GRAD_BYTES * params.per_rank;
    let weights = FP32_BYTES * params.per_rank;
    let block_unit = FP32_BYTES * (params.cp_reduced / shape.depth.max(1));
    let gather_after_step = call(AllGather, Step, "updated parameter shards gathered after the optimizer step (fp32)", weights, 1, false);
    let calls = match zero {
        0 => vec![call(AllReduce, Backward, "gradients averaged over dp (DDP)", grads, 1, true)],
        1 => vec![
            call(AllReduce, Backward, "gradients averaged over dp (as DDP; ZeRO 1 keeps whole gradients)", grads, 1, true),
            gather_after_step,
        ],
        2 => {
            vec![call(ReduceScatter, Backward, "each micro-batch's gradients, to their shards (ZeRO 2)", grads, m, true), gather_after_step]
        }
        _ => vec![
            call(AllGather, Forward, "each block's parameters before its forward (ZeRO 3)", block_unit, shape.depth * m, false),
            call(
                AllGather,
                Forward,
                "parameters outside the blocks, kept to the end of backward",
                FP32_BYTES * params.outside_blocks,
                m,
                false,
            ),
            call(AllGather, Backward, "each block's parameters again before its backward", block_unit, shape.depth * m, false),
            call(ReduceScatter, Backward, "each micro-batch's gradients, to their shards (ZeRO 3)", grads, m, true),
        ],
    };
    let loss = call(AllReduce, Step, "training loss averaged for the log", 4, 1, false);
    calls.into_iter().chain([loss]).filter_map(|c| net.collective(Token::DP, c)).collect()
}

/// One rank group's share of a step's communication, for the rank grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupTraffic {
    pub group: Token,
    pub link: Link,
    /// Buffer bytes of all its collectives in one step.
    pub bytes_per_step: u64,
    pub seconds_per_step: f64,
    /// What it runs: each operation once, with its calls per step summed over what it moves
    /// (the dp group's gradient and loss all-reduces are `all-reduce` ×2).
    pub operations: Vec<(Operation, u64)>,
}

impl GroupTraffic {
    /// Its operations in words, e.g. `all-gather ×48, reduce-scatter ×48`.
    pub fn operations_text(&self) -> String {
        self.operations.iter().map(|(operation, count)| format!("{} ×{count}", operation.name())).collect::<Vec<_>>().join(", ")
    }
}

/// The collectives summed per group, in the order the groups first appear.
pub(super) fn by_group(collectives: &[Collective]) -> Vec<GroupTraffic> {
    let mut groups: Vec<GroupTraffic> = Vec::new();
    for c in collectives {
        let index = match groups.iter().position(|g| g.group == c.group) {
            Some(index) => index,
            None => {
                groups.push(GroupTraffic {
                    group: c.group,
                    link: c.link,
                    bytes_per_step: 0,
                    seconds_per_step: 0.0,
                    operations: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        group.bytes_per_step += c.bytes * c.count;
        group.seconds_per_step += c.seconds;
        match group.operations.iter_mut().find(|(operation, _)| *operation == c.operation) {
            Some((_, count)) => *count += c.count,
            None => group.operations.push((c.operation, c.count)),
        }
    }
    groups
}

fn operation_seconds(operation: Operation, size: u32, bytes: u64, bus_gb_per_s: f64) -> f64 {
    operation.ring_factor(size) * bytes as f64 / (bus_gb_per_s * 1e9)
}

/// How much of the overlapped collectives' time the backward pass cannot hide: whatever
/// exceeds the backward compute, and at least the last bucket's share (DDP's buckets of up to
/// `bucket_bytes`, 25 MB by default, are reduced as backward fills them, so only the last
/// necessarily waits for the end of the backward pass).
///
/// With micro-batches each one's backward hides the calls made under it: a collective called
/// once a step (DDP's all-reduce, skipped by `no_sync` until the last micro-batch) under the
/// last, one called every micro-batch (ZeRO 2 and 3's reduce-scatter) under each.
pub(super) fn exposed_overlapped(collectives: &[Collective], backward_s: f64, micro_batches: u64, bucket_bytes: f64) -> f64 {
    let m = micro_batches.max(1);
    let window = backward_s / m as f64;
    let exposed = |every_micro_batch: bool| {
        let calls = collectives.iter().filter(|c| c.overlapped && (!every_micro_batch || c.count >= m));
        let (total, tail) = calls.fold((0.0, 0.0), |(total, tail), c| {
            let one = c.seconds / c.count as f64;
            (total + one, tail + one * (bucket_bytes / c.bytes as f64).min(1.0))
        });
        (total - window).max(tail)
    };
    (m - 1) as f64 * exposed(true) + exposed(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_factors() {
        assert!((Operation::AllReduce.ring_factor(4) - 1.5).abs() < 1e-12);
        assert!((Operation::AllGather.ring_factor(4) - 0.75).abs() < 1e-12);
        assert!((Operation::ReduceScatter.ring_factor(2) - 0.5).abs() < 1e-12);
        // 100 MB all-reduced over 4 ranks at 200 GB/s: 1.5 · 0.1 / 200 s.
        assert!((operation_seconds(Operation::AllReduce, 4, 100_000_000, 200.0) - 0.00075).abs() < 1e-12);
    }

    fn collective(group: Token, operation: Operation, count: u64) -> Collective {
        Collective {
            group,
            group_size: 2,
            operation,
            phase: Phase::Backward,
            what: Cow::Borrowed(""),
            bytes: 4,
            count,
            link: Link::Nvlink,
            bus_gb_per_s: 1.0,
            seconds: 0.5,
            overlapped: false,
        }
    }

    #[test]
    fn a_group_counts_each_operation_once() {
        // dp's gradient all-reduce and its loss all-reduce: one operation, called twice a step.
        let collectives = [
            collective(Token::DP, Operation::AllReduce, 1),
            collective(Token::CP, Operation::AllGather, 3),
            collective(Token::DP, Operation::AllReduce, 1),
            collective(Token::CP, Operation::ReduceScatter, 2),
            collective(Token::CP, Operation::AllGather, 1),
        ];
        let groups = by_group(&collectives);
        let texts: Vec<(Token, String)> = groups.iter().map(|g| (g.group, g.operations_text())).collect();
        assert_eq!(texts, [(Token::DP, "all-reduce ×2".to_owned()), (Token::CP, "all-gather ×4, reduce-scatter ×2".to_owned())]);
        assert_eq!((groups[0].bytes_per_step, groups[0].seconds_per_step), (8, 1.0));
    }
}
