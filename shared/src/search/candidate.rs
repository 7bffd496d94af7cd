//! One point of the space, and the axes the space is the product of: the factorisations of a
//! GPU count into tp, cp, pp and dp, the orders of the dimensions larger than 1, and the
//! micro-batch counts. Built without allocating per point, because the space is large.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::Error;
use crate::layout::{DEFAULT_ORDER, Dim, Layout, Sizes};

/// Which dimensions vary fastest, counting only those larger than 1: the others change no
/// rank group, so `tp-cp-dp` and `tp-dp` with cp 1 are one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Order {
    dims: [Dim; 4],
    len: u8,
}

impl Order {
    /// The order of `text` for `sizes` (e.g. the tutorial's `cp-tp-dp`), or why it is not one.
    pub fn parse(text: &str, sizes: Sizes) -> Result<Order, Error> {
        let layout = Layout::new(sizes, text)?;
        Ok(Order::of(&layout))
    }

    /// The order a layout has.
    pub fn of(layout: &Layout) -> Order {
        let sizes = layout.sizes();
        Order::from_dims(layout.order().into_iter().filter(|&d| sizes.get(d) > 1))
    }

    fn from_dims(dims: impl IntoIterator<Item = Dim>) -> Order {
        let mut order = Order { dims: [Dim::Tp; 4], len: 0 };
        for dim in dims {
            order.dims[usize::from(order.len)] = dim;
            order.len += 1;
        }
        order
    }

    pub fn dims(&self) -> &[Dim] {
        &self.dims[..usize::from(self.len)]
    }
}

/// `cp-tp-dp`; one rank's order, which is no order, is written as the tutorial's default.
impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len == 0 {
            return f.write_str(DEFAULT_ORDER);
        }
        for (i, dim) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str("-")?;
            }
            f.write_str(dim.name())?;
        }
        Ok(())
    }
}

impl Serialize for Order {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One layout the trainer could be asked to run, with what each rank does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Candidate {
    pub sizes: Sizes,
    pub order: Order,
    /// 0 is DDP; 1-3 shard the optimizer state, then the gradients, then the weights over dp
    /// (`zero_stage`, which the trainer runs).
    pub zero: u8,
    /// Each block's activations recomputed in backward (`activation_checkpointing`).
    pub recompute: bool,
    /// Slices of a dp rank's batch per step: `num_micro_batches` with a pipeline (pp > 1),
    /// `gradient_accumulation_steps` without.
    pub micro_batches: u32,
}

impl Candidate {
    /// The rank layout, for the rank grid and the estimate.
    pub fn layout(&self) -> Result<Layout, Error> {
        Layout::new(self.sizes, &self.order.to_string())
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Sizes { tp, cp, dp, pp } = self.sizes;
        let micro = if self.micro_batches == 1 { "micro-batch" } else { "micro-batches" };
        let recompute = if self.recompute { ", recompute" } else { "" };
        write!(f, "tp {tp} × cp {cp} × pp {pp} × dp {dp} ({}), ZeRO {}{recompute}, {} {micro}", self.order, self.zero, self.micro_batches)
    }
}

/// The divisors of `n`, ascending.
fn divisors(n: u32) -> Vec<u32> {
    let mut low = Vec::new();
    let mut high = Vec::new();
    let mut d = 1;
    while d * d <= n {
        if n.is_multiple_of(d) {
            low.push(d);
            if d * d != n {
                high.push(n / d);
            }
        }
        d += 1;
    }
    low.extend(high.into_iter().rev());
    low
}

/// Every way to write `gpus` as tp × cp × pp × dp, tp slowest-changing first.
pub(super) fn factorisations(gpus: u32, mut each: impl FnMut(Sizes)) {
    for tp in divisors(gpus) {
        for cp in divisors(gpus / tp) {
            for pp in divisors(gpus / tp / cp) {
                each(Sizes { tp, cp, pp, dp: gpus / tp / cp / pp });
            }
        }
    }
}

/// How many orders `sizes` has: the permutations of its dimensions larger than 1.
pub(super) fn order_count(sizes: Sizes) -> u64 {
    let larger = Dim::ALL.iter().filter(|&&d| sizes.get(d) > 1).count() as u64;
    (1..=larger).product()
}

/// Every order of `sizes`, the tutorial's dimension order (tp, cp, dp, pp) first.
pub(super) fn orders(sizes: Sizes, mut each: impl FnMut(Order)) {
    let mut dims = Order::from_dims([Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp].into_iter().filter(|&d| sizes.get(d) > 1));
    let len = usize::from(dims.len);
    permute(&mut dims.dims[..len], 0, &mut |permuted| each(Order::from_dims(permuted.iter().copied())));
}

/// Every permutation of `dims[from..]`, by swapping each element into place in turn.
fn permute(dims: &mut [Dim], from: usize, each: &mut impl FnMut(&[Dim])) {
    if from + 1 >= dims.len() {
        each(dims);
        return;
    }
    for i in from..dims.len() {
        dims.swap(from, i);
        permute(dims, from + 1, each);
        dims.swap(from, i);
    }
}

/// The micro-batch counts the space holds: powers of two up to `batch`.
pub(super) fn micro_batch_counts(batch: usize) -> impl Iterator<Item = u32> {
    (0..u32::BITS).map(|shift| 1u32 << shift).take_while(move |&m| m as usize <= batch.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorisations_cover_every_product() {
        let mut all = Vec::new();
        factorisations(8, |s| all.push((s.tp, s.cp, s.pp, s.dp)));
        // Ordered factorisations of 2³ into four parts: C(3 + 3, 3) = 20.
        assert_eq!(all.len(), 20);
        assert!(all.iter().all(|(tp, cp, pp, dp)| tp * cp * pp * dp == 8));
        assert_eq!(divisors(12), [1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(16), [1, 2, 4, 8, 16]);
    }

    #[test]
    fn orders_are_the_permutations_of_the_larger_dimensions() {
        let sizes = Sizes { tp: 2, cp: 2, dp: 4, pp: 1 };
        let mut all = Vec::new();
        orders(sizes, |o| all.push(o.to_string()));
        assert_eq!(all.len() as u64, order_count(sizes));
        assert_eq!(all, ["tp-cp-dp", "tp-dp-cp", "cp-tp-dp", "cp-dp-tp", "dp-cp-tp", "dp-tp-cp"]);
        let mut one = Vec::new();
        orders(Sizes::default(), |o| one.push(o));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].to_string(), "tp-cp-dp");
        let tutorial = Order::parse("tp-cp-dp", Sizes { tp: 4, dp: 4, ..Sizes::default() }).unwrap();
        assert_eq!(tutorial.to_string(), "tp-dp");
    }

    #[test]
    fn micro_batches_are_powers_of_two_up_to_the_batch() {
        assert_eq!(micro_batch_counts(64).collect::<Vec<_>>(), [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(micro_batch_counts(6).collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(micro_batch_counts(0).collect::<Vec<_>>(), [1]);
    }
}
