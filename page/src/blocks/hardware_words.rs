//! The words an estimate and its rank grid name the hardware with. A layout on a cluster's GPUs
//! has nodes of GPUs, their groups joined by NVLink inside a node and by the network across
//! nodes. A layout on this machine's CPU cores has ranks, a process each, all on this machine,
//! their collectives over its loopback (Gloo): there, the words speak of ranks, never of GPUs,
//! nodes or NVLink.

use scalebook_shared::estimate::Link;

/// What a layout's ranks run on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Hardware {
    /// A cluster's GPUs, a rank each, so many to a node.
    #[default]
    Gpus,
    /// This machine's CPU cores, shared out among its rank processes.
    CpuCores,
}

impl Hardware {
    /// What one rank holds and computes on: what the estimate's figures are "per".
    pub fn unit(self) -> &'static str {
        match self {
            Hardware::Gpus => "GPU",
            Hardware::CpuCores => "rank",
        }
    }

    /// `per GPU`, or `per rank`.
    pub fn per_unit(self) -> String {
        format!("per {}", self.unit())
    }

    /// The link a group of `size` ranks talks over, `crosses` telling whether it spans nodes.
    pub fn group_link(self, size: usize, crosses: bool) -> &'static str {
        match (self, size, crosses) {
            (_, 0..=1, _) => "none (one rank)",
            (Hardware::CpuCores, _, _) => "loopback (this machine)",
            (Hardware::Gpus, _, true) => "network (across nodes)",
            (Hardware::Gpus, _, false) => "NVLink (one node)",
        }
    }

    /// The link a collective of the estimate runs over, as its table names it.
    pub fn link(self, link: Link) -> &'static str {
        match self {
            Hardware::Gpus => link.name(),
            Hardware::CpuCores => "loopback",
        }
    }

    /// The grid's `world` ranks, placed `per_node` to a node, in words.
    pub fn ranks_placed(self, world: u32, per_node: u32) -> String {
        match self {
            Hardware::Gpus => format!("{world} ranks on {} nodes of {per_node} GPUs", world.div_ceil(per_node.max(1))),
            Hardware::CpuCores => format!("{world} ranks, a process each, on this machine's cores"),
        }
    }

    /// Where rank `rank` is, placed `per_node` to a node.
    pub fn rank_place(self, rank: u32, per_node: u32) -> String {
        match self {
            Hardware::Gpus => format!("node {}, GPU {} of it", rank / per_node.max(1), rank % per_node.max(1)),
            Hardware::CpuCores => format!("process {rank} on this machine"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every phrase `hardware` has for a layout of 8 ranks, 4 to a node, and its links.
    fn phrases(hardware: Hardware) -> Vec<String> {
        let mut all = vec![hardware.unit().to_owned(), hardware.per_unit(), hardware.ranks_placed(8, 4), hardware.rank_place(5, 4)];
        all.extend([(2, false), (2, true), (1, false)].map(|(size, crosses)| hardware.group_link(size, crosses).to_owned()));
        all.extend([Link::Nvlink, Link::Network].map(|link| hardware.link(link).to_owned()));
        all
    }

    #[test]
    fn this_machines_cores_are_ranks_never_gpus_nodes_or_nvlink() {
        for phrase in phrases(Hardware::CpuCores) {
            let lower = phrase.to_lowercase();
            assert!(!lower.contains("gpu") && !lower.contains("nvlink") && !lower.contains("node"), "{phrase}");
        }
        assert_eq!(Hardware::CpuCores.per_unit(), "per rank");
        assert_eq!(Hardware::CpuCores.group_link(2, true), "loopback (this machine)");
    }

    #[test]
    fn a_clusters_gpus_keep_their_nodes_and_links() {
        assert_eq!(Hardware::Gpus.per_unit(), "per GPU");
        assert_eq!(Hardware::Gpus.ranks_placed(8, 4), "8 ranks on 2 nodes of 4 GPUs");
        assert_eq!(Hardware::Gpus.rank_place(5, 4), "node 1, GPU 1 of it");
        assert_eq!(
            [(2, false), (2, true), (1, true)].map(|(size, crosses)| Hardware::Gpus.group_link(size, crosses)),
            ["NVLink (one node)", "network (across nodes)", "none (one rank)"]
        );
        assert_eq!(Hardware::Gpus.link(Link::Nvlink), "nvlink");
    }
}
