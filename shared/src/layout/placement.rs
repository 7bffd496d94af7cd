//! Ranks on nodes: launchers fill nodes in rank order, so rank `r` runs on node `r / G` with G
//! GPUs per node. A group inside one node talks over NVLink; one that crosses nodes goes over
//! the (much slower) network, which is what makes the order string matter.

use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use super::Groups;
use crate::{Error, Problem, Problems};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    gpus_per_node: NonZeroU32,
}

/// Perlmutter's 4 A100s per node, where the tutorial ran.
impl Default for Placement {
    fn default() -> Self {
        Self { gpus_per_node: NonZeroU32::MIN.saturating_add(3) }
    }
}

impl Placement {
    pub fn new(gpus_per_node: u32) -> Result<Placement, Error> {
        NonZeroU32::new(gpus_per_node)
            .map(|gpus_per_node| Placement { gpus_per_node })
            .ok_or_else(|| Error::Invalid(Problems(vec![Problem::new("gpus_per_node", "must be at least 1, got 0")])))
    }

    pub fn gpus_per_node(&self) -> u32 {
        self.gpus_per_node.get()
    }

    pub fn node_of(&self, rank: u32) -> u32 {
        rank / self.gpus_per_node
    }

    /// The ranks on each node a world of `world` ranks occupies; the last node may be partly
    /// filled.
    pub fn nodes(&self, world: u32) -> Vec<Vec<u32>> {
        let ranks: Vec<u32> = (0..world).collect();
        ranks.chunks(self.gpus_per_node.get() as usize).map(<[u32]>::to_vec).collect()
    }

    /// Whether `group` spans more than one node.
    pub fn crosses_nodes(&self, group: &[u32]) -> bool {
        group.split_first().is_some_and(|(first, rest)| {
            let node = self.node_of(*first);
            rest.iter().any(|&r| self.node_of(r) != node)
        })
    }

    /// Whether any group of a token crosses nodes, i.e. whether its collective touches the
    /// network anywhere.
    pub fn any_crosses_nodes(&self, groups: &Groups) -> bool {
        groups.iter().any(|group| self.crosses_nodes(group))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Sizes, Token};
    use super::*;

    #[test]
    fn fills_nodes_in_rank_order() {
        let placement = Placement::new(4).unwrap();
        assert_eq!(placement.nodes(10), [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
        assert_eq!(placement.node_of(7), 1);
        assert!(placement.nodes(0).is_empty());
        assert_eq!(Placement::default(), placement);
        assert_eq!(placement.gpus_per_node(), 4);
    }

    #[test]
    fn detects_groups_leaving_a_node() {
        let placement = Placement::new(4).unwrap();
        assert!(!placement.crosses_nodes(&[4, 5, 6, 7]));
        assert!(placement.crosses_nodes(&[3, 4]));
        assert!(placement.crosses_nodes(&[1, 5, 9]));
        assert!(!placement.crosses_nodes(&[9]));
        assert!(!placement.crosses_nodes(&[]));
    }

    #[test]
    fn tp_cp_stays_on_nvlink_in_the_worked_example() {
        // Tutorial §6.2: world 16, tp=cp=2, dp=4, tp-cp-dp: tp-cp groups are one node each.
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        let placement = Placement::new(4).unwrap();
        for (token, crosses) in [(Token::TP, false), (Token::CP, false), (Token::TP_CP, false), (Token::DP, true)] {
            assert_eq!(placement.any_crosses_nodes(&layout.groups(token)), crosses, "{token}");
        }
        let one_gpu_nodes = Placement::new(1).unwrap();
        assert!(one_gpu_nodes.any_crosses_nodes(&layout.groups(Token::TP)));
        assert!(!one_gpu_nodes.any_crosses_nodes(&layout.groups(Token::PP)));
    }

    #[test]
    fn rejects_zero_gpus_per_node() {
        let err = Placement::new(0).unwrap_err();
        assert_eq!(err.problems().0[0].field, "gpus_per_node");
        assert!(serde_json::from_str::<Placement>(r#"{"gpus_per_node": 0}"#).is_err());
        let read: Placement = serde_json::from_str(r#"{"gpus_per_node": 8}"#).unwrap();
        assert_eq!(read.gpus_per_node(), 8);
    }
}
