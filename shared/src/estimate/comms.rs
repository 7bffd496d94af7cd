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

use serde::{Deserialize, Serialize};

use super::Shape;
use super::params::ParamSplit;
use crate::cluster::{EstimateFactors, Interconnect};
use crate::layout::{Layout, Placement, Token};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    AllReduce,
    AllGather,
    ReduceScatter,
}

impl Operation {
    pub const fn name(self) -> &'static str {
        match self {
            Operation::AllReduce => "all-reduce",
            Operation::AllGather => "all-gather",
            Operation::ReduceScatter => "reduce-scatter",
        }
    }

    /// Bytes through each rank's link per byte of the buffer, for a ring of n ranks.
    fn ring_factor(self, n: u32) -> f64 {
        let n = f64::from(n);
        let once = (n - 1.0) / n;
        if self == Operation::AllReduce { 2.0 * once } else { once }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The rank group it runs over (`tp`, `cp`, `dp`).
    pub group: Token,
    pub group_size: u32,
    pub operation: Operation,
    pub phase: Phase,
    /// What it moves, in words.
    pub what: String,
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

/// Bytes of a k or v element as cp gathers it, whatever the precision: the distributed layers
/// add their fp32 bias outside the matmul (`y = y + bias`), which promotes autocast's
/// half-precision product to fp32 before the all-gather.
const GATHERED_KV_BYTES: u64 = 4;

/// What every collective needs to know about the cluster.
pub(super) struct Network<'a> {
    pub layout: &'a Layout,
    pub placement: Placement,
    pub links: Interconnect,
    pub factors: &'a EstimateFactors,
}

impl Network<'_> {
    fn nvlink_bus(&self) -> f64 {
        self.links.nvlink_gb_per_s * self.factors.nvlink_efficiency
    }

    /// The link a token's groups use and its bus bandwidth in GB/s. The slowest group sets
    /// the pace, since every group of a token runs the same collective at the same time.
    fn link(&self, token: Token) -> (Link, f64) {
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

    /// The fewest ranks the group has on any node it touches (ranks ascend and nodes are
    /// contiguous rank ranges, so a node's ranks are one run).
    fn fewest_per_node(&self, group: &[u32]) -> u32 {
        let node = |r: u32| self.placement.node_of(r);
        group.chunk_by(|&a, &b| node(a) == node(b)).map(|run| run.len() as u32).min().unwrap_or(1)
    }
}

/// Every collective of one step on one rank.
pub(super) fn collectives(shape: &Shape, params: &ParamSplit, net: &Network<'_>) -> Vec<Collective> {
    let Shape { embed_dim: d, depth, tokens: n, tokens_local: nl, local_batch: b, tp, .. } = *shape;
    let a = shape.element_bytes() as u64;
    let mut out = Vec::new();
    // Each token's link once: finding it walks every group (the layout search makes thousands
    // of estimates).
    let links = [Token::TP, Token::CP, Token::DP].map(|token| (token, (net.layout.group_size(token) > 1).then(|| net.link(token))));
    let mut add = |token: Token, operation, phase, what: &str, bytes: u64, count: u64, overlapped| {
        let size = net.layout.group_size(token);
        if size <= 1 {
            return;
        }
        let known = links.iter().find(|(t, _)| *t == token).and_then(|(_, link)| *link);
        let (link, bus) = known.unwrap_or_else(|| net.link(token));
        let seconds = count as f64 * (operation_seconds(operation, size, bytes, bus) + net.factors.collective_latency_s);
        out.push(Collective {
            group: token,
            group_size: size,
            operation,
            phase,
            what: what.to_owned(),
            bytes,
            count,
            link,
            bus_gb_per_s: bus,
            seconds,
            overlapped,
        });
    };
    use Operation::*;
    use Phase::*;
    let tokens_local = b * nl * d;
    add(Token::TP, AllReduce, Forward, "outputs of the row-parallel proj and fc2", a * tokens_local, 2 * depth, false);
    add(
        Token::TP,
        AllReduce,
        Backward,
        "input gradients of the column-parallel q, k, v and fc1 (fp32: taken before autocast's cast)",
        GRAD_BYTES * tokens_local,
        4 * depth,
        false,
    );
    let kv = GATHERED_KV_BYTES * b * n * d / tp;
    add(Token::CP, AllGather, Forward, "k and v of this rank's heads, all tokens (fp32 after the bias add)", kv, 2 * depth, false);
    add(Token::CP, ReduceScatter, Backward, "gradients of the gathered k and v (fp32)", kv, 2 * depth, false);
    let sequence = GRAD_BYTES * b * n * d;
    add(Token::CP, AllGather, Forward, "tokens gathered before the head (fp32)", sequence, 1, false);
    add(Token::CP, AllGather, Backward, "embedding gradients (backward of the token scatter)", sequence, 1, false);
    add(Token::CP, AllReduce, Backward, "block gradients summed over cp (DDP comm hook)", GRAD_BYTES * params.cp_reduced, 1, true);
    add(Token::DP, AllReduce, Backward, "gradients averaged over dp (DDP)", GRAD_BYTES * params.per_rank, 1, true);
    add(Token::DP, AllReduce, Step, "training loss averaged for the log", 4, 1, false);
    out
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
/// `bucket_bytes`, 25 MB by default, are all-reduced as backward fills them, so only the last
/// necessarily waits for the end of the backward pass).
pub(super) fn exposed_overlapped(collectives: &[Collective], backward_s: f64, bucket_bytes: f64) -> f64 {
    let overlapped = collectives.iter().filter(|c| c.overlapped);
    let total = overlapped.clone().fold(0.0, |sum, c| sum + c.seconds);
    let tail = overlapped.fold(0.0, |sum, c| sum + c.seconds * (bucket_bytes / c.bytes as f64).min(1.0));
    (total - backward_s).max(tail)
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
            what: String::new(),
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
