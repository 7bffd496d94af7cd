//! Where every rank of a rank grid is drawn: nodes side by side in rows, each node a box of its
//! GPUs. The layout is regular, so the rank under the pointer is computed from its position,
//! and each colour's cells are drawn as one path: thousands of ranks cost a handful of SVG
//! elements, not one per rank. The paths that colour a layout's groups and outline a chosen
//! rank's groups are built here too, so what the grid shows is tested natively.

use std::fmt::Write as _;

use scalebook_shared::layout::{Dim, Layout, Token};

/// Ranks drawn at most (4096 Perlmutter nodes); a larger world shows its first ranks.
pub const MAX_DRAWN: u32 = 16_384;

/// Ranks drawn with their number written in them.
pub const LABELLED: u32 = 64;

/// GPUs in one row of a node's box.
const GPUS_PER_ROW: u32 = 8;

/// Fills for groups, cycling: Okabe and Ito's colour-blind-safe set (plus grey), all light
/// enough for black rank numbers.
pub const PALETTE: [&str; 8] = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#CC79A7", "#D55E00", "#6FA8DC", "#BBBBBB"];

/// How each of a rank's own groups is outlined: dimension, dash pattern, how far outside the
/// square (inner outlines for later dimensions, so all four stay visible at once).
const OUTLINES: [(Dim, &str, f64); 4] =
    [(Dim::Tp, "none", 3.0), (Dim::Cp, "4 2", 1.5), (Dim::Dp, "1.5 1.5", 0.0), (Dim::Pp, "6 2 1 2", -1.5)];

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    /// Ranks drawn.
    pub drawn: u32,
    pub gpus_per_node: u32,
    /// Side of one GPU's square.
    pub cell: f64,
    gap: f64,
    pad: f64,
    node_gap: f64,
    per_row: u32,
    rows: u32,
    nodes_per_row: u32,
}

impl Geometry {
    /// The grid of `world` ranks, `gpus_per_node` to a node, fitted to `width` units.
    pub fn new(world: u32, gpus_per_node: u32, width: f64) -> Geometry {
        let drawn = world.min(MAX_DRAWN);
        let gpus_per_node = gpus_per_node.max(1);
        let cell = match drawn {
            0..=LABELLED => 30.0,
            65..=512 => 16.0,
            513..=4096 => 9.0,
            _ => 5.0,
        };
        let per_row = gpus_per_node.min(GPUS_PER_ROW);
        let rows = gpus_per_node.div_ceil(per_row);
        let mut geometry = Geometry {
            drawn,
            gpus_per_node,
            cell,
            gap: cell * 0.15,
            pad: cell * 0.3,
            node_gap: cell * 0.6,
            per_row,
            rows,
            nodes_per_row: 1,
        };
        let (node_width, _) = geometry.node_size();
        let fit = ((width + geometry.node_gap) / (node_width + geometry.node_gap)).floor();
        // At least one node per row, and no more than there are nodes.
        geometry.nodes_per_row = (fit.max(1.0) as u32).min(geometry.nodes().max(1));
        geometry
    }

    /// Nodes drawn (the last may be partly filled).
    pub fn nodes(&self) -> u32 {
        self.drawn.div_ceil(self.gpus_per_node)
    }

    pub fn node_size(&self) -> (f64, f64) {
        let span = |n: u32| 2.0 * self.pad + f64::from(n) * self.cell + f64::from(n.saturating_sub(1)) * self.gap;
        (span(self.per_row), span(self.rows))
    }

    pub fn width(&self) -> f64 {
        let (w, _) = self.node_size();
        f64::from(self.nodes_per_row) * (w + self.node_gap) - self.node_gap
    }

    pub fn height(&self) -> f64 {
        let (_, h) = self.node_size();
        let node_rows = self.nodes().div_ceil(self.nodes_per_row).max(1);
        f64::from(node_rows) * (h + self.node_gap) - self.node_gap
    }

    pub fn node_origin(&self, node: u32) -> (f64, f64) {
        let (w, h) = self.node_size();
        let (column, row) = (node % self.nodes_per_row, node / self.nodes_per_row);
        (f64::from(column) * (w + self.node_gap), f64::from(row) * (h + self.node_gap))
    }

    /// The top-left corner of `rank`'s square.
    pub fn cell_origin(&self, rank: u32) -> (f64, f64) {
        let (nx, ny) = self.node_origin(rank / self.gpus_per_node);
        let slot = rank % self.gpus_per_node;
        let step = self.cell + self.gap;
        (nx + self.pad + f64::from(slot % self.per_row) * step, ny + self.pad + f64::from(slot / self.per_row) * step)
    }

    /// The drawn rank whose square holds the point, if any.
    pub fn rank_at(&self, x: f64, y: f64) -> Option<u32> {
        if !(x.is_finite() && y.is_finite()) || x < 0.0 || y < 0.0 {
            return None;
        }
        let (w, h) = self.node_size();
        // Non-negative and finite, and grids are far smaller than u32::MAX units.
        let (column, row) = ((x / (w + self.node_gap)) as u32, (y / (h + self.node_gap)) as u32);
        if column >= self.nodes_per_row {
            return None;
        }
        let node = row.checked_mul(self.nodes_per_row)?.checked_add(column)?;
        let (nx, ny) = self.node_origin(node);
        let step = self.cell + self.gap;
        let (inner_x, inner_y) = (x - nx - self.pad, y - ny - self.pad);
        if inner_x < 0.0 || inner_y < 0.0 || inner_x % step > self.cell || inner_y % step > self.cell {
            return None;
        }
        let (slot_x, slot_y) = ((inner_x / step) as u32, (inner_y / step) as u32);
        if slot_x >= self.per_row || slot_y >= self.rows {
            return None;
        }
        let slot = slot_y * self.per_row + slot_x;
        let rank = node.checked_mul(self.gpus_per_node)?.checked_add(slot)?;
        (slot < self.gpus_per_node && rank < self.drawn).then_some(rank)
    }

    /// The rank an arrow key moves to from `rank`: along the ranks, or to the same GPU of the
    /// node above or below.
    pub fn step(&self, rank: u32, key: &str) -> Option<u32> {
        let row = self.gpus_per_node.saturating_mul(self.nodes_per_row);
        let next = match key {
            "ArrowRight" => rank.checked_add(1),
            "ArrowLeft" => rank.checked_sub(1),
            "ArrowDown" => rank.checked_add(row),
            "ArrowUp" => rank.checked_sub(row),
            "Home" => Some(0),
            "End" => self.drawn.checked_sub(1),
            _ => None,
        }?;
        (next < self.drawn).then_some(next)
    }

    /// One path of the squares of `ranks`, each grown by `grow` on every side (negative
    /// shrinks: outlines of several groups around one square stay apart).
    pub fn squares_path(&self, ranks: impl IntoIterator<Item = u32>, grow: f64) -> String {
        let side = self.cell + 2.0 * grow;
        let mut d = String::new();
        for rank in ranks.into_iter().filter(|r| *r < self.drawn) {
            let (x, y) = self.cell_origin(rank);
            let _ = write!(d, "M{:.1} {:.1}h{side:.1}v{side:.1}h-{side:.1}z", x - grow, y - grow);
        }
        d
    }

    /// One path of every node's box.
    pub fn nodes_path(&self) -> String {
        let (w, h) = self.node_size();
        let mut d = String::new();
        for node in 0..self.nodes() {
            let (x, y) = self.node_origin(node);
            let _ = write!(d, "M{x:.1} {y:.1}h{w:.1}v{h:.1}h-{w:.1}z");
        }
        d
    }
}

/// One path per palette colour: the squares of the ranks whose group of `token` gets it.
pub fn colour_paths(layout: &Layout, geometry: &Geometry, token: Token) -> Vec<String> {
    let mut by_colour: Vec<Vec<u32>> = vec![Vec::new(); PALETTE.len()];
    for rank in 0..geometry.drawn {
        let group = layout.group_index_of(token, rank).unwrap_or(0);
        by_colour[group % PALETTE.len()].push(rank);
    }
    by_colour.into_iter().map(|ranks| geometry.squares_path(ranks, 0.0)).collect()
}

/// One outline around some squares: what it marks (a dimension's name, or `rank`), its dash
/// pattern, its path and its stroke width.
pub type Outline = (&'static str, &'static str, String, f64);

/// The outlines of `rank`'s group along each dimension of size above 1, and of the rank.
pub fn rank_outlines(layout: &Layout, geometry: &Geometry, rank: u32) -> Vec<Outline> {
    let mut out: Vec<Outline> = OUTLINES
        .iter()
        .filter(|(dim, ..)| layout.sizes().get(*dim) > 1)
        .filter_map(|&(dim, dash, grow)| {
            let group = layout.group_of(Token::single(dim), rank)?;
            Some((dim.name(), dash, geometry.squares_path(group, grow.min(geometry.cell / 4.0)), 1.5))
        })
        .collect();
    out.push(("rank", "none", geometry.squares_path([rank], geometry.cell / 8.0), 3.0));
    out
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;

    use super::*;

    fn centre(g: &Geometry, rank: u32) -> (f64, f64) {
        let (x, y) = g.cell_origin(rank);
        (x + g.cell / 2.0, y + g.cell / 2.0)
    }

    #[test]
    fn every_drawn_rank_is_found_at_its_own_square() {
        for (world, gpus) in [(16, 4), (10, 4), (24, 8), (48, 12), (1000, 4), (20_000, 4)] {
            let g = Geometry::new(world, gpus, 720.0);
            assert_eq!(g.drawn, world.min(MAX_DRAWN));
            for rank in (0..g.drawn).step_by(7).chain([g.drawn - 1]) {
                let (x, y) = centre(&g, rank);
                assert_eq!(g.rank_at(x, y), Some(rank), "world {world}, {gpus} per node, rank {rank}");
            }
        }
    }

    #[test]
    fn gaps_and_empty_slots_hold_no_rank() {
        let g = Geometry::new(6, 4, 720.0);
        assert_eq!(g.rank_at(1.0, 1.0), None, "the node's padding");
        let (x, y) = g.cell_origin(0);
        assert_eq!(g.rank_at(x + g.cell + g.gap / 2.0, y + 1.0), None, "between two GPUs");
        // Node 1 holds ranks 4 and 5; its third slot is empty.
        let (x, y) = g.cell_origin(5);
        assert_eq!(g.rank_at(x + g.cell + g.gap + 1.0, y + 1.0), None);
        assert_eq!(g.rank_at(-1.0, 5.0), None);
        assert_eq!(g.rank_at(g.width() + 50.0, 5.0), None);
    }

    #[test]
    fn the_picture_fits_the_width_and_holds_every_node() {
        let g = Geometry::new(4096, 4, 720.0);
        assert!(g.width() <= 720.0, "{}", g.width());
        let (last_x, last_y) = g.cell_origin(4095);
        assert!(last_x + g.cell <= g.width() + 1e-9 && last_y + g.cell <= g.height() + 1e-9);
        // A world of one node is as wide as that node.
        let one = Geometry::new(4, 4, 720.0);
        assert_eq!(one.width(), one.node_size().0);
    }

    #[test]
    fn arrow_keys_move_along_ranks_and_between_node_rows() {
        let g = Geometry::new(64, 4, 720.0);
        let row = 4 * g.nodes_per_row;
        assert_eq!(g.step(5, "ArrowRight"), Some(6));
        assert_eq!(g.step(0, "ArrowLeft"), None);
        assert_eq!(g.step(5, "ArrowDown"), (5 + row < 64).then_some(5 + row));
        assert_eq!(g.step(63, "ArrowRight"), None);
        assert_eq!(g.step(9, "End"), Some(63));
        assert_eq!(g.step(9, "x"), None);
    }

    #[test]
    fn one_path_holds_many_squares() {
        let g = Geometry::new(16, 4, 720.0);
        let d = g.squares_path([0, 1, 99], 0.0);
        assert_eq!(d.matches('M').count(), 2, "rank 99 is not drawn: {d}");
        assert_eq!(g.nodes_path().matches('M').count(), 4);
    }

    #[test]
    fn colours_follow_the_groups_of_the_chosen_token() {
        // Reference §6.2: tp-cp-dp with tp 2, cp 2, dp 4; the dp groups are [0,4,8,12], ...
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        let geometry = Geometry::new(16, 4, 720.0);
        let paths = colour_paths(&layout, &geometry, Token::DP);
        assert_eq!(paths[0], geometry.squares_path([0, 4, 8, 12], 0.0));
        assert_eq!(paths[3], geometry.squares_path([3, 7, 11, 15], 0.0));
        assert!(paths[4..].iter().all(String::is_empty));
    }

    #[test]
    fn a_ranks_outlines_cover_its_group_along_each_dimension() {
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        let geometry = Geometry::new(16, 4, 720.0);
        let outlines = rank_outlines(&layout, &geometry, 5);
        let marks: Vec<&str> = outlines.iter().map(|(m, ..)| *m).collect();
        assert_eq!(marks, ["tp", "cp", "dp", "rank"], "pp has size 1");
        // Rank 5's dp group is [1, 5, 9, 13]: four squares.
        assert_eq!(outlines[2].2.matches('M').count(), 4);
    }
}
