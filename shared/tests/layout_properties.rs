//! Properties of rank groups over random layouts, checked against oracles written from the
//! definition (tutorial §6.1) rather than from the implementation: a rank's coordinates are
//! the digits of its number with the leftmost dimension of the order fastest, and a token's
//! group holds exactly the ranks that agree with it on every dimension outside the token.

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use scalebook_shared::layout::{Dim, Layout, Sizes, Token};

/// A random valid layout, with the order string it was built from (some size-1 dimensions
/// left out, so the appending rule is exercised too).
fn layouts() -> impl Strategy<Value = (Layout, Vec<Dim>)> {
    let sizes = prop::array::uniform4(1u32..=4);
    let order = Just(Dim::ALL.to_vec()).prop_shuffle();
    let keep = prop::array::uniform4(any::<bool>());
    (sizes, order, keep).prop_map(|([tp, cp, dp, pp], order, keep)| {
        let sizes = Sizes { tp, cp, dp, pp };
        let mut given: Vec<Dim> = order.iter().zip(keep).filter(|&(&d, keep)| keep || sizes.get(d) > 1).map(|(&d, _)| d).collect();
        if given.is_empty() {
            given = order;
        }
        let text = given.iter().map(|d| d.name()).collect::<Vec<_>>().join("-");
        (Layout::new(sizes, &text).unwrap(), given)
    })
}

/// All fifteen tokens, not just the nine with names in the tutorial.
fn every_token() -> Vec<Token> {
    (1u8..16)
        .map(|bits| Token::from_dims(Dim::ALL.into_iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, d)| d)))
        .map(Option::unwrap)
        .collect()
}

fn strides(layout: &Layout) -> HashMap<Dim, u32> {
    let mut stride = 1;
    let mut strides = HashMap::new();
    for dim in layout.order() {
        strides.insert(dim, stride);
        stride *= layout.sizes().get(dim);
    }
    strides
}

/// The coordinates of `rank` outside `token`, in order-string order: equal keys, same group.
fn key(layout: &Layout, token: Token, rank: u32) -> Vec<u32> {
    let coords = layout.coords(rank).unwrap();
    layout.order().into_iter().filter(|&d| !token.contains(d)).map(|d| coords.get(d)).collect()
}

fn as_set(ranks: &[u32]) -> BTreeSet<u32> {
    ranks.iter().copied().collect()
}

proptest! {
    #[test]
    fn effective_order_keeps_the_given_names_then_appends_tp_pp_dp_cp((layout, given) in layouts()) {
        let mut expected = given.clone();
        expected.extend([Dim::Tp, Dim::Pp, Dim::Dp, Dim::Cp].into_iter().filter(|d| !given.contains(d)));
        prop_assert_eq!(layout.order().to_vec(), expected);
        let sizes = layout.sizes();
        prop_assert_eq!(layout.world(), sizes.tp * sizes.cp * sizes.dp * sizes.pp);
    }

    #[test]
    fn coordinates_are_digits_with_the_leftmost_fastest((layout, _) in layouts()) {
        let strides = strides(&layout);
        for rank in 0..layout.world() {
            let coords = layout.coords(rank).unwrap();
            let mut rebuilt = 0;
            for dim in Dim::ALL {
                prop_assert!(coords.get(dim) < layout.sizes().get(dim));
                rebuilt += coords.get(dim) * strides[&dim];
            }
            prop_assert_eq!(rebuilt, rank);
            prop_assert_eq!(layout.rank_of(coords), Some(rank));
        }
        prop_assert_eq!(layout.coords(layout.world()), None);
    }

    #[test]
    fn groups_partition_the_world_into_agreeing_ranks((layout, _) in layouts()) {
        for token in every_token() {
            let groups = layout.groups(token);
            let size: u32 = token.dims().map(|d| layout.sizes().get(d)).product();
            prop_assert_eq!(groups.group_size(), size as usize);
            prop_assert_eq!(groups.len() * groups.group_size(), layout.world() as usize);

            let mut seen = vec![false; layout.world() as usize];
            let mut class_sizes: HashMap<Vec<u32>, usize> = HashMap::new();
            for rank in 0..layout.world() {
                *class_sizes.entry(key(&layout, token, rank)).or_default() += 1;
            }
            for (index, group) in groups.iter().enumerate() {
                prop_assert!(group.windows(2).all(|w| w[0] < w[1]), "{} group {:?} not ascending", token, group);
                let first = key(&layout, token, group[0]);
                prop_assert_eq!(class_sizes[&first], group.len(), "{} group {:?} is not a whole class", token, group);
                // Groups are listed with the first dimension outside the token fastest.
                let mut expected_index = 0;
                let mut weight = 1;
                for (digit, dim) in first.iter().zip(layout.order().into_iter().filter(|&d| !token.contains(d))) {
                    expected_index += *digit as usize * weight;
                    weight *= layout.sizes().get(dim) as usize;
                }
                prop_assert_eq!(index, expected_index);
                for (position, &rank) in group.iter().enumerate() {
                    prop_assert!(!std::mem::replace(&mut seen[rank as usize], true), "rank {} twice", rank);
                    prop_assert_eq!(key(&layout, token, rank), first.clone());
                    let coords = layout.coords(rank).unwrap();
                    let mut expected_position = 0;
                    let mut weight = 1;
                    for dim in layout.order().into_iter().filter(|&d| token.contains(d)) {
                        expected_position += coords.get(dim) as usize * weight;
                        weight *= layout.sizes().get(dim) as usize;
                    }
                    prop_assert_eq!(position, expected_position);
                }
            }
            prop_assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn per_rank_lookups_agree_with_the_full_list((layout, _) in layouts()) {
        for token in every_token() {
            let groups = layout.groups(token);
            for rank in 0..layout.world() {
                let index = layout.group_index_of(token, rank).unwrap();
                let group = groups.group(index).unwrap();
                prop_assert_eq!(layout.group_of(token, rank).unwrap(), group.to_vec());
                let position = layout.group_rank(token, rank).unwrap() as usize;
                prop_assert_eq!(group[position], rank);
            }
        }
    }

    /// Any tp group and any dp group share exactly one rank when they agree on cp and pp, and
    /// none otherwise: the grid picture of orthogonal groups.
    #[test]
    fn tp_and_dp_groups_cross_once((layout, _) in layouts()) {
        let tp = layout.groups(Token::TP);
        let dp = layout.groups(Token::DP);
        for t in &tp {
            for d in &dp {
                let shared = as_set(t).intersection(&as_set(d)).count();
                let (ct, cd) = (layout.coords(t[0]).unwrap(), layout.coords(d[0]).unwrap());
                let agree = ct.cp == cd.cp && ct.pp == cd.pp;
                prop_assert_eq!(shared, usize::from(agree));
            }
        }
    }
}

proptest! {
    // Every pair of disjoint tokens at every rank is costly in a debug build; fewer layouts
    // still cover every size and order shape many times over.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn orthogonal_tokens_meet_in_one_rank_and_compose((layout, _) in layouts()) {
        let tokens = every_token();
        for &a in &tokens {
            for &b in tokens.iter().filter(|b| b.is_disjoint(a)) {
                let both = a.union(b);
                for rank in 0..layout.world() {
                    let in_a = as_set(&layout.group_of(a, rank).unwrap());
                    let in_b = as_set(&layout.group_of(b, rank).unwrap());
                    let meet: Vec<u32> = in_a.intersection(&in_b).copied().collect();
                    prop_assert_eq!(meet, vec![rank], "{} and {} at rank {}", a, b, rank);
                    let composed: BTreeSet<u32> =
                        in_b.iter().flat_map(|&s| layout.group_of(a, s).unwrap()).collect();
                    prop_assert_eq!(as_set(&layout.group_of(both, rank).unwrap()), composed, "{} ∪ {}", a, b);
                }
            }
        }
    }
}
