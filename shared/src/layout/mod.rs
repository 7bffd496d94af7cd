//! Parallel layouts and their rank groups, with exactly the semantics of Megatron-LM's
//! `RankGenerator` as the tutorial ships it (`utils/rank_generator.py`).
//!
//! A layout is a size per dimension (tp, cp, dp, pp) plus an order string. Ranks are numbered
//! along the order with the leftmost dimension varying fastest, so `rank = Σ coordᵢ · strideᵢ`
//! with `stride₀ = 1` and `strideᵢ = Π_{j<i} sizeⱼ`. A token (`tp`, `tp-cp`, ...) groups the
//! ranks that differ only along its dimensions. Which groups stay inside a node is the
//! question [`Placement`] answers.

mod dims;
mod groups;
mod order;
mod placement;
mod token;

pub use dims::{Coords, Dim, Sizes};
pub use groups::Groups;
pub use placement::Placement;
pub use token::Token;

use serde::{Deserialize, Serialize};

use crate::{Error, Problems};

/// The largest world a layout may have. Far beyond any real job, but it bounds what the
/// group lists allocate (4 MiB per token) for input typed into a browser form.
pub const MAX_WORLD: u32 = 1 << 20;

/// `train_mp.py`'s default `--parallel_order`.
pub const DEFAULT_ORDER: &str = "tp-cp-dp";

/// A validated layout. Serialises as `{"sizes": {...}, "order": "..."}` (the effective order)
/// and deserialises through [`Layout::new`], so a layout read from the wire is always valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "LayoutSpec", try_from = "LayoutSpec")]
pub struct Layout {
    sizes: Sizes,
    /// All four dimensions, fastest varying first.
    order: [Dim; 4],
    /// Indexed by [`Dim::index`]: how far apart two ranks are that differ by one along it.
    strides: [u32; 4],
    world: u32,
}

/// The wire form of a [`Layout`]: what a user chose, before validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutSpec {
    #[serde(default)]
    pub sizes: Sizes,
    #[serde(default = "default_order")]
    pub order: String,
}

fn default_order() -> String {
    DEFAULT_ORDER.to_owned()
}

impl Layout {
    /// Validates `sizes` and `order`, reporting every problem at once: sizes below 1, a world
    /// above [`MAX_WORLD`], and order strings with unknown, repeated or empty names or leaving
    /// out a dimension whose size is not 1.
    pub fn new(sizes: Sizes, order: &str) -> Result<Layout, Error> {
        let mut problems = Problems::default();
        for dim in Dim::ALL {
            if sizes.get(dim) == 0 {
                problems.push(dim.name(), "must be at least 1, got 0");
            }
        }
        let world: u128 = Dim::ALL.iter().map(|&d| u128::from(sizes.get(d))).product();
        if world > u128::from(MAX_WORLD) {
            let Sizes { tp, cp, dp, pp } = sizes;
            problems.push(
                "world",
                format!("tp {tp} × cp {cp} × dp {dp} × pp {pp} = {world} ranks, more than the {MAX_WORLD} a layout may have"),
            );
        }
        let order = order::resolve(order, &sizes, &mut problems);
        match (order, u32::try_from(world)) {
            (Some(order), Ok(world)) if problems.is_empty() => Ok(Layout::from_parts(sizes, order, world)),
            _ => Err(Error::Invalid(problems)),
        }
    }

    fn from_parts(sizes: Sizes, order: [Dim; 4], world: u32) -> Layout {
        let mut strides = [0; 4];
        let mut stride = 1;
        for dim in order {
            strides[dim.index()] = stride;
            stride *= sizes.get(dim);
        }
        Layout { sizes, order, strides, world }
    }

    pub fn world(&self) -> u32 {
        self.world
    }

    pub fn sizes(&self) -> Sizes {
        self.sizes
    }

    /// All four dimensions, fastest varying first.
    pub fn order(&self) -> [Dim; 4] {
        self.order
    }

    /// The order with the left-out names appended (`tp-dp` becomes `tp-dp-pp-cp`), exactly as
    /// the tutorial's generator spells it.
    pub fn effective_order(&self) -> String {
        self.order.map(Dim::name).join("-")
    }

    /// Where `rank` sits on every axis, or `None` outside the world.
    pub fn coords(&self, rank: u32) -> Option<Coords> {
        (rank < self.world).then(|| Coords::from_fn(|d| rank / self.stride(d) % self.sizes.get(d)))
    }

    /// The rank at `coords`, or `None` when a coordinate is not below its size.
    pub fn rank_of(&self, coords: Coords) -> Option<u32> {
        Dim::ALL.iter().try_fold(0, |rank, &d| (coords.get(d) < self.sizes.get(d)).then(|| rank + coords.get(d) * self.stride(d)))
    }

    /// How far apart in rank two ranks one step apart along `dim` are: with its size and the
    /// world, it decides where `dim`'s groups lie.
    pub fn stride(&self, dim: Dim) -> u32 {
        self.strides[dim.index()]
    }
}

impl From<Layout> for LayoutSpec {
    fn from(layout: Layout) -> LayoutSpec {
        LayoutSpec { sizes: layout.sizes, order: layout.effective_order() }
    }
}

impl TryFrom<LayoutSpec> for Layout {
    type Error = Error;

    fn try_from(spec: LayoutSpec) -> Result<Layout, Error> {
        Layout::new(spec.sizes, &spec.order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(tp: u32, cp: u32, dp: u32, pp: u32) -> Sizes {
        Sizes { tp, cp, dp, pp }
    }

    #[test]
    fn leftmost_dimension_varies_fastest() {
        let layout = Layout::new(sizes(2, 2, 4, 1), "cp-tp-dp").unwrap();
        assert_eq!(layout.world(), 16);
        assert_eq!(layout.effective_order(), "cp-tp-dp-pp");
        assert_eq!(layout.order(), [Dim::Cp, Dim::Tp, Dim::Dp, Dim::Pp]);
        // 13 = cp 1 + 2 · (tp 0) + 4 · (dp 3)
        assert_eq!(layout.coords(13), Some(Coords { tp: 0, cp: 1, dp: 3, pp: 0 }));
        assert_eq!(layout.rank_of(Coords { tp: 1, cp: 0, dp: 2, pp: 0 }), Some(10));
    }

    #[test]
    fn out_of_range_ranks_and_coords_have_no_answer() {
        let layout = Layout::new(sizes(4, 1, 2, 1), "tp-dp").unwrap();
        assert_eq!(layout.coords(8), None);
        assert_eq!(layout.rank_of(Coords { tp: 4, cp: 0, dp: 0, pp: 0 }), None);
        assert_eq!(layout.rank_of(Coords { tp: 0, cp: 1, dp: 0, pp: 0 }), None);
    }

    #[test]
    fn reports_all_problems_at_once() {
        let err = Layout::new(sizes(0, 4, 0, 1), "tp-ep-dp").unwrap_err();
        let problems = err.problems();
        let fields: Vec<&str> = problems.0.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["tp", "dp", "order", "order"], "{problems}");
        assert!(problems.0[2].message.contains("`ep`"));
        assert!(problems.0[3].message.contains("leaves out cp"));
    }

    #[test]
    fn bounds_the_world() {
        let err = Layout::new(sizes(1024, 1, 1025, 1), "tp-dp").unwrap_err();
        let problems = err.problems();
        assert_eq!(problems.0.len(), 1);
        assert_eq!(problems.0[0].field, "world");
        assert!(problems.0[0].message.contains("1049600"), "{problems}");
        // Sizes whose product overflows 64 bits are still just "too large".
        let huge = Layout::new(sizes(u32::MAX, u32::MAX, u32::MAX, u32::MAX), "tp-cp-dp-pp").unwrap_err();
        assert_eq!(huge.problems().0[0].field, "world");
        assert!(Layout::new(sizes(1024, 1, 1024, 1), "tp-dp").is_ok());
    }

    #[test]
    fn serde_round_trips_and_validates() {
        let layout = Layout::new(sizes(4, 1, 2, 1), "TP-dp").unwrap();
        let json = serde_json::to_string(&layout).unwrap();
        assert_eq!(json, r#"{"sizes":{"tp":4,"cp":1,"dp":2,"pp":1},"order":"tp-dp-pp-cp"}"#);
        assert_eq!(serde_json::from_str::<Layout>(&json).unwrap(), layout);

        let defaulted: Layout = serde_json::from_str(r#"{"sizes": {"cp": 2}}"#).unwrap();
        assert_eq!(defaulted.effective_order(), "tp-cp-dp-pp");
        let err = serde_json::from_str::<Layout>(r#"{"sizes": {"pp": 2}, "order": "tp-dp"}"#).unwrap_err();
        assert!(err.to_string().contains("leaves out pp"), "{err}");
    }
}
