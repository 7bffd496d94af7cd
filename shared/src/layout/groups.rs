//! The groups of a token, in the exact order Megatron-LM's `RankGenerator.get_ranks` lists
//! them, and direct per-rank look-ups that need no enumeration.

use serde::{Serialize, Serializer};

use super::{Dim, Layout, Token};

/// Every group of one token, stored flat: the browser colours tens of thousands of ranks, and
/// one allocation per token is much cheaper than one per group.
///
/// Groups are listed with the first dimension outside the token varying fastest; inside a group
/// ranks ascend, and a rank's position is its rank within the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Groups {
    ranks: Vec<u32>,
    /// At least 1, so chunking by it is always defined.
    group_size: usize,
}

impl Groups {
    /// How many groups there are.
    pub fn len(&self) -> usize {
        self.ranks.len() / self.group_size
    }

    /// Always false for a valid layout (its world has at least one rank); here for the
    /// `len`/`is_empty` pair every collection has.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    pub fn group_size(&self) -> usize {
        self.group_size
    }

    pub fn iter(&self) -> std::slice::ChunksExact<'_, u32> {
        self.ranks.chunks_exact(self.group_size)
    }

    pub fn group(&self, index: usize) -> Option<&[u32]> {
        self.iter().nth(index)
    }

    pub fn to_vecs(&self) -> Vec<Vec<u32>> {
        self.iter().map(<[u32]>::to_vec).collect()
    }
}

impl<'a> IntoIterator for &'a Groups {
    type Item = &'a [u32];
    type IntoIter = std::slice::ChunksExact<'a, u32>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// As a list of lists, the shape of `get_ranks` and of `rank-groups.json`.
impl Serialize for Groups {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl Layout {
    /// Every group of `token`. Each group is a fixed set of offsets from its first rank, and
    /// the first ranks are the same kind of sums over the other dimensions, so the whole list
    /// is one add per rank.
    pub fn groups(&self, token: Token) -> Groups {
        let offsets = self.offsets(|d| token.contains(d));
        let bases = self.offsets(|d| !token.contains(d));
        let mut ranks = Vec::with_capacity(bases.len() * offsets.len());
        for base in bases {
            ranks.extend(offsets.iter().map(|offset| base + offset));
        }
        Groups { ranks, group_size: offsets.len() }
    }

    /// How many ranks each group of `token` has (`comm.get_size(token)` in the tutorial).
    pub fn group_size(&self, token: Token) -> u32 {
        token.dims().map(|d| self.sizes.get(d)).product()
    }

    /// Which group of [`Layout::groups`] holds `rank`, from its coordinates alone.
    pub fn group_index_of(&self, token: Token, rank: u32) -> Option<usize> {
        let coords = self.coords(rank)?;
        let index = self.mixed_radix(|d| !token.contains(d), |d| coords.get(d));
        usize::try_from(index).ok()
    }

    /// `rank`'s position in its group of `token` (`comm.get_rank(token)` in the tutorial).
    pub fn group_rank(&self, token: Token, rank: u32) -> Option<u32> {
        let coords = self.coords(rank)?;
        Some(self.mixed_radix(|d| token.contains(d), |d| coords.get(d)))
    }

    /// The group of `token` that holds `rank`, computed from its coordinates: costs the group's
    /// size, not the world's, so it suits hovering over thousands of ranks.
    pub fn group_of(&self, token: Token, rank: u32) -> Option<Vec<u32>> {
        let coords = self.coords(rank)?;
        let first = rank - token.dims().map(|d| coords.get(d) * self.stride(d)).sum::<u32>();
        Some(self.offsets(|d| token.contains(d)).into_iter().map(|offset| first + offset).collect())
    }

    /// `Σ indexᵢ · strideᵢ` over the selected dimensions for every combination of indices,
    /// the first selected dimension in the order varying fastest. Ascending, because each
    /// stride is at least the span of all the dimensions before it.
    fn offsets(&self, selected: impl Fn(Dim) -> bool) -> Vec<u32> {
        let mut offsets = vec![0];
        for dim in self.order.into_iter().filter(|&d| selected(d)) {
            let span = offsets.len();
            let stride = self.stride(dim);
            for index in 1..self.sizes.get(dim) {
                let start = offsets.len();
                offsets.extend_from_within(..span);
                offsets[start..].iter_mut().for_each(|offset| *offset += index * stride);
            }
        }
        offsets
    }

    /// The number whose digits, first selected dimension fastest, are `digit` of each
    /// selected dimension in the order.
    fn mixed_radix(&self, selected: impl Fn(Dim) -> bool, digit: impl Fn(Dim) -> u32) -> u32 {
        let mut value = 0;
        let mut weight = 1;
        for dim in self.order.into_iter().filter(|&d| selected(d)) {
            value += digit(dim) * weight;
            weight *= self.sizes.get(dim);
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::super::Sizes;
    use super::*;

    /// Tutorial §6.2, second worked example.
    fn example() -> Layout {
        Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap()
    }

    #[test]
    fn worked_example_groups() {
        let layout = example();
        assert_eq!(layout.groups(Token::CP).to_vecs(), [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]);
        assert_eq!(layout.groups(Token::DP).to_vecs(), [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]);
        assert_eq!(layout.groups(Token::DP_CP).to_vecs(), [[0, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 15]]);
    }

    #[test]
    fn accessors_agree_with_the_flat_list() {
        let groups = example().groups(Token::TP_CP);
        assert_eq!(groups.len(), 4);
        assert!(!groups.is_empty());
        assert_eq!(groups.group_size(), 4);
        assert_eq!(groups.group(2), Some(&[8, 9, 10, 11][..]));
        assert_eq!(groups.group(4), None);
        assert_eq!((&groups).into_iter().count(), 4);
        assert_eq!(serde_json::to_string(&groups).unwrap(), "[[0,1,2,3],[4,5,6,7],[8,9,10,11],[12,13,14,15]]");
    }

    #[test]
    fn per_rank_lookups() {
        let layout = example();
        // Rank 13 = tp 1, cp 0, dp 3.
        assert_eq!(layout.group_of(Token::CP, 13), Some(vec![13, 15]));
        assert_eq!(layout.group_index_of(Token::CP, 13), Some(7));
        assert_eq!(layout.group_rank(Token::CP, 13), Some(0));
        assert_eq!(layout.group_rank(Token::DP, 13), Some(3));
        assert_eq!(layout.group_of(Token::DP, 13), Some(vec![1, 5, 9, 13]));
        assert_eq!(layout.group_size(Token::DP_CP), 8);
        assert_eq!(layout.group_of(Token::TP, 16), None);
        assert_eq!(layout.group_index_of(Token::TP, 16), None);
        assert_eq!(layout.group_rank(Token::TP, 16), None);
    }
}
