//! A 65,536-rank world (tp 8, cp 4, dp 1024, pp 2, order tp-cp-dp-pp): structure only; the
//! timing lives in `examples/layout_bench.rs`.

use scalebook_shared::layout::{Layout, Placement, Sizes, Token};

fn layout() -> Layout {
    Layout::new(Sizes { tp: 8, cp: 4, dp: 1024, pp: 2 }, "tp-cp-dp-pp").unwrap()
}

#[test]
fn every_token_partitions_the_world() {
    let layout = layout();
    assert_eq!(layout.world(), 65_536);
    for token in Token::ALL {
        let groups = layout.groups(token);
        let size: u32 = token.dims().map(|d| layout.sizes().get(d)).product();
        assert_eq!(groups.group_size(), size as usize, "{token}");
        assert_eq!(groups.len() * groups.group_size(), 65_536, "{token}");
        let mut seen = vec![false; 65_536];
        for rank in groups.iter().flatten() {
            assert!(!std::mem::replace(&mut seen[*rank as usize], true), "{token}: rank {rank} twice");
        }
    }
}

#[test]
fn groups_have_the_strides_of_the_order() {
    let layout = layout();
    // tp is fastest: blocks of 8 consecutive ranks.
    let tp = layout.groups(Token::TP);
    assert!(tp.iter().enumerate().all(|(i, g)| g.iter().copied().eq(8 * i as u32..8 * i as u32 + 8)));
    // cp steps by 8, dp by 8·4 = 32, pp by 32·1024 = 32768.
    let strides = [(Token::CP, 8), (Token::DP, 32), (Token::PP, 32_768)];
    for (token, stride) in strides {
        for group in &layout.groups(token) {
            assert!(group.windows(2).all(|w| w[1] - w[0] == stride), "{token} {:?}", &group[..2]);
        }
    }
    // tp-cp: 32 consecutive ranks; tp-dp-cp: one whole pipeline stage.
    assert_eq!(layout.groups(Token::TP_CP).group(5), Some(&(160..192).collect::<Vec<u32>>()[..]));
    assert_eq!(layout.groups(Token::TP_DP_CP).group(1), Some(&(32_768..65_536).collect::<Vec<u32>>()[..]));
}

#[test]
fn lookups_on_far_ranks_match_the_list() {
    let layout = layout();
    for token in Token::ALL {
        let groups = layout.groups(token);
        for rank in [0, 7, 8, 31, 32, 12_345, 32_767, 32_768, 65_535] {
            let index = layout.group_index_of(token, rank).unwrap();
            assert_eq!(layout.group_of(token, rank).as_deref(), groups.group(index), "{token} rank {rank}");
        }
    }
}

#[test]
fn only_node_sized_groups_stay_on_nvlink() {
    let layout = layout();
    let crosses = |g: u32, token| Placement::new(g).unwrap().any_crosses_nodes(&layout.groups(token));
    assert!(crosses(4, Token::TP));
    assert!(!crosses(8, Token::TP));
    assert!(crosses(8, Token::CP));
    assert!(!crosses(32, Token::TP_CP));
    assert!(crosses(32, Token::DP));
    assert!(!crosses(32_768, Token::TP_DP_CP));
}
