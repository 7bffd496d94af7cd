//! Where a run's ranks ran beside where its layout places them: each node's ranks as the ranks
//! recorded them (`rundir::RankPlacement`), whether that is the layout's placement (consecutive
//! ranks filling the nodes), and for each parallel dimension how many of its groups cross
//! nodes, since a group that does talks over the network instead of NVLink.

use scalebook_shared::layout::{Layout, Token};
use scalebook_shared::rundir::RankPlacement;

/// What the ranks recorded, read against the layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Each node with its ranks, in the order of their first rank.
    pub nodes: Vec<(String, Vec<u32>)>,
    /// The index in `nodes` of each rank's node.
    pub node_of: Vec<usize>,
    /// Whether consecutive ranks filled the nodes evenly, as the layout places them.
    pub as_predicted: bool,
    /// For tp, cp and dp (where they have groups of more than one rank): the groups that
    /// cross nodes, of how many.
    pub crossing: Vec<(Token, usize, usize)>,
}

/// `places` against `layout`, once every rank has recorded where it runs.
pub fn seen(places: &[RankPlacement], layout: &Layout) -> Option<Seen> {
    let world = layout.world() as usize;
    if places.len() != world {
        return None;
    }
    let mut nodes: Vec<(String, Vec<u32>)> = Vec::new();
    let mut node_of = vec![0usize; world];
    for place in places {
        let index = match nodes.iter().position(|(n, _)| *n == place.node) {
            Some(i) => i,
            None => {
                nodes.push((place.node.clone(), Vec::new()));
                nodes.len() - 1
            }
        };
        nodes[index].1.push(place.rank as u32);
        *node_of.get_mut(place.rank)? = index;
    }
    let per_node = world / nodes.len();
    let as_predicted = world.is_multiple_of(nodes.len()) && (0..world).all(|rank| node_of[rank] == rank / per_node);
    let crossing = [Token::TP, Token::CP, Token::DP]
        .into_iter()
        .filter(|t| layout.group_size(*t) > 1)
        .map(|token| {
            let groups = layout.groups(token);
            let across = groups.iter().filter(|g| g.iter().any(|r| node_of[*r as usize] != node_of[g[0] as usize])).count();
            (token, across, groups.iter().count())
        })
        .collect();
    Some(Seen { nodes, node_of, as_predicted, crossing })
}

/// One rank as the placement picture draws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub rank: u32,
    /// Its group's place among the groups of the dimension the picture colours by: ranks of
    /// one colour talk in that dimension's collectives.
    pub colour: usize,
    /// On another node than the layout places it.
    pub moved: bool,
}

/// The placement picture: the nodes as the layout places the ranks, and as they ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// The dimension the cells are coloured by: the first of tp, cp, dp with groups of more
    /// than one rank (the one whose groups should stay inside a node).
    pub colour_by: Option<Token>,
    /// Each node's name and ranks, as the layout places them (consecutive ranks filling the
    /// nodes in the order they were seen).
    pub predicted: Vec<(String, Vec<Cell>)>,
    /// Each node's name and ranks, as they ran.
    pub actual: Vec<(String, Vec<Cell>)>,
}

impl Seen {
    /// The two rows of nodes to draw for `layout`.
    pub fn picture(&self, layout: &Layout) -> Picture {
        let world = self.node_of.len();
        let per_node = world.div_ceil(self.nodes.len().max(1)).max(1);
        let colour_by = [Token::TP, Token::CP, Token::DP].into_iter().find(|t| layout.group_size(*t) > 1);
        let mut colour = vec![0usize; world];
        if let Some(token) = colour_by {
            for (index, group) in layout.groups(token).iter().enumerate() {
                for rank in group {
                    if let Some(c) = colour.get_mut(*rank as usize) {
                        *c = index;
                    }
                }
            }
        }
        let cell = |rank: u32| Cell { rank, colour: colour[rank as usize], moved: self.node_of[rank as usize] != rank as usize / per_node };
        let predicted = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), (i * per_node..((i + 1) * per_node).min(world)).map(|r| cell(r as u32)).collect()))
            .collect();
        let actual = self.nodes.iter().map(|(name, ranks)| (name.clone(), ranks.iter().map(|r| cell(*r)).collect())).collect();
        Picture { colour_by, predicted, actual }
    }
}

impl Seen {
    /// In words: `node1: ranks 0-1 · node2: ranks 2-3`, then whether the layout placed them so
    /// and which groups cross.
    pub fn summary(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|(node, ranks)| format!("{node}: ranks {}", ranges(ranks))).collect();
        let verdict = if self.as_predicted {
            "as the layout places them"
        } else {
            "not as the layout places them (consecutive ranks filling each node)"
        };
        let groups: Vec<String> = self
            .crossing
            .iter()
            .map(|(token, across, of)| match across {
                0 => format!("every {token} group stays inside a node"),
                n => format!("{n} of {of} {token} groups cross nodes"),
            })
            .collect();
        format!("{}; {verdict}. {}.", nodes.join(" · "), groups.join(", "))
    }
}

/// Ranks as runs: `0-3, 8`.
fn ranges(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { sorted[i].to_string() } else { format!("{}-{}", sorted[i], sorted[j]) });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;

    use super::*;

    fn placed(nodes: &[&str]) -> Vec<RankPlacement> {
        nodes.iter().enumerate().map(|(rank, node)| RankPlacement { rank, local_rank: 0, node: (*node).to_owned() }).collect()
    }

    #[test]
    fn tp_inside_nodes_and_dp_across_as_the_layout_places_them() {
        let layout = Layout::new(Sizes { tp: 2, dp: 2, ..Sizes::default() }, "tp-cp-dp").unwrap();
        let seen = seen(&placed(&["node1", "node1", "node2", "node2"]), &layout).unwrap();
        assert!(seen.as_predicted);
        assert_eq!(seen.crossing, [(Token::TP, 0, 2), (Token::DP, 2, 2)]);
        assert_eq!(
            seen.summary(),
            "node1: ranks 0-1 · node2: ranks 2-3; as the layout places them. every tp group stays inside a node, 2 of 2 dp groups cross nodes."
        );
    }

    #[test]
    fn ranks_placed_otherwise_are_said_to_be_and_a_missing_rank_waits() {
        let layout = Layout::new(Sizes { tp: 2, dp: 2, ..Sizes::default() }, "tp-cp-dp").unwrap();
        let seen = seen(&placed(&["a", "b", "a", "b"]), &layout).unwrap();
        assert!(!seen.as_predicted);
        assert_eq!(seen.crossing[0], (Token::TP, 2, 2), "every tp group now crosses");
        assert!(seen.summary().starts_with("a: ranks 0, 2 · b: ranks 1, 3; not as the layout"), "{}", seen.summary());
        assert_eq!(super::seen(&placed(&["a", "a", "b"]), &layout), None, "rank 3 has not started");
    }

    #[test]
    fn the_picture_sets_where_ranks_ran_under_where_the_layout_places_them() {
        let layout = Layout::new(Sizes { tp: 2, dp: 2, ..Sizes::default() }, "tp-cp-dp").unwrap();
        let ranks = |row: &[(String, Vec<Cell>)]| {
            row.iter()
                .map(|(n, cells)| (n.clone(), cells.iter().map(|c| (c.rank, c.colour, c.moved)).collect::<Vec<_>>()))
                .collect::<Vec<_>>()
        };
        let as_placed = seen(&placed(&["node1", "node1", "node2", "node2"]), &layout).unwrap().picture(&layout);
        assert_eq!(as_placed.colour_by, Some(Token::TP));
        let expected =
            vec![("node1".to_owned(), vec![(0, 0, false), (1, 0, false)]), ("node2".to_owned(), vec![(2, 1, false), (3, 1, false)])];
        assert_eq!((ranks(&as_placed.predicted), ranks(&as_placed.actual)), (expected.clone(), expected));
        // Round-robin placement: ranks 1 and 2 swapped nodes, and each tp group is split.
        let swapped = seen(&placed(&["a", "b", "a", "b"]), &layout).unwrap().picture(&layout);
        assert_eq!(
            ranks(&swapped.actual),
            [("a".to_owned(), vec![(0, 0, false), (2, 1, true)]), ("b".to_owned(), vec![(1, 0, true), (3, 1, false)])]
        );
        assert_eq!(ranks(&swapped.predicted)[0], ("a".to_owned(), vec![(0, 0, false), (1, 0, true)]));
    }
}
