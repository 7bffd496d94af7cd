//! Where every rank of a rank grid is drawn: nodes side by side in rows, each node a box of its
//! GPUs. The layout is regular, so the rank under the pointer is computed from its position,
//! and each colour's cells are drawn as one path: thousands of ranks cost a handful of SVG
//! elements, not one per rank.

use std::fmt::Write as _;

/// Ranks drawn at most (4096 Perlmutter nodes); a larger world shows its first ranks.
pub const MAX_DRAWN: u32 = 16_384;

/// Ranks drawn with their number written in them.
pub const LABELLED: u32 = 64;

/// GPUs in one row of a node's box.
const GPUS_PER_ROW: u32 = 8;

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

#[cfg(test)]
mod tests {
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
}
