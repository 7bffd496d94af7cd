//! Every case of `rank-groups.json`, produced by running the tutorial's own
//! `utils/rank_generator.py`: every token's groups, in order, and the effective order.

use std::collections::BTreeMap;

use scalebook_shared::layout::{Layout, Placement, Sizes, Token};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    world: u32,
    sizes: Sizes,
    order: String,
    effective_order: String,
    groups: BTreeMap<String, Vec<Vec<u32>>>,
}

fn cases() -> Vec<Case> {
    serde_json::from_str(include_str!("data/rank-groups.json")).unwrap()
}

#[test]
fn reference_has_all_cases_and_tokens() {
    let cases = cases();
    assert_eq!(cases.len(), 37);
    for case in &cases {
        let tokens: Vec<Token> = case.groups.keys().map(|t| t.parse().unwrap()).collect();
        assert_eq!(tokens.len(), Token::ALL.len());
        assert!(Token::ALL.iter().all(|t| tokens.contains(t)), "{} {}", case.order, case.world);
    }
}

#[test]
fn every_token_of_every_case_matches() {
    for case in cases() {
        let label = format!("{:?} order {}", case.sizes, case.order);
        let layout = Layout::new(case.sizes, &case.order).unwrap();
        assert_eq!(layout.world(), case.world, "{label}");
        assert_eq!(layout.effective_order(), case.effective_order, "{label}");
        for (name, expected) in &case.groups {
            let token: Token = name.parse().unwrap();
            let groups = layout.groups(token);
            assert_eq!(&groups.to_vecs(), expected, "{label} token {name}");
            assert_eq!(layout.group_size(token) as usize, expected[0].len(), "{label} token {name}");
            for (index, group) in expected.iter().enumerate() {
                for (position, &rank) in group.iter().enumerate() {
                    assert_eq!(layout.group_of(token, rank).as_ref(), Some(group), "{label} {name} rank {rank}");
                    assert_eq!(layout.group_index_of(token, rank), Some(index), "{label} {name} rank {rank}");
                    assert_eq!(layout.group_rank(token, rank), Some(position as u32), "{label} {name} rank {rank}");
                }
            }
        }
    }
}

#[test]
fn node_crossing_agrees_with_a_direct_check() {
    for case in cases() {
        let layout = Layout::new(case.sizes, &case.order).unwrap();
        for gpus_per_node in [1, 2, 4, 8] {
            let placement = Placement::new(gpus_per_node).unwrap();
            for (name, expected) in &case.groups {
                let crosses = expected.iter().any(|g| g.iter().any(|r| r / gpus_per_node != g[0] / gpus_per_node));
                let token: Token = name.parse().unwrap();
                assert_eq!(placement.any_crosses_nodes(&layout.groups(token)), crosses, "{name} G={gpus_per_node}");
            }
        }
    }
}
