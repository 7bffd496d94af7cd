//! The process groups a rank grid lists: the tokens the tutorial builds groups for, the first
//! groups of a token (found without listing every group, so huge worlds stay cheap), and a
//! group written short. Kept apart from the page's component so they are tested natively.

use scalebook_shared::layout::{Layout, Token};

/// The tokens the tutorial builds process groups for, in its order.
pub const TUTORIAL_TOKENS: [Token; 6] = [Token::DP, Token::TP, Token::CP, Token::PP, Token::TP_CP, Token::DP_CP];

/// The first `count` groups of `token` in the generator's order, found by scanning ranks
/// (no list of every group is built, so huge worlds stay cheap).
pub fn first_groups(layout: &Layout, token: Token, count: usize) -> Vec<Vec<u32>> {
    let total = (layout.world() / layout.group_size(token)) as usize;
    let wanted = count.min(total);
    let mut found: Vec<Option<Vec<u32>>> = vec![None; wanted];
    let mut missing = wanted;
    for rank in 0..layout.world() {
        if missing == 0 {
            break;
        }
        let Some(index) = layout.group_index_of(token, rank).filter(|i| *i < wanted) else { continue };
        if found[index].is_none() {
            found[index] = layout.group_of(token, rank);
            missing -= 1;
        }
    }
    found.into_iter().flatten().collect()
}

/// A group as `[0, 4, 8, 12]`, long ones elided in the middle (a group of thousands of ranks
/// would otherwise fill the table).
pub fn list(group: &[u32]) -> String {
    const SHOWN: usize = 16;
    if group.len() <= SHOWN {
        return format!("{group:?}");
    }
    let head: Vec<String> = group[..8].iter().map(u32::to_string).collect();
    let tail: Vec<String> = group[group.len() - 4..].iter().map(u32::to_string).collect();
    format!("[{}, … {}]", head.join(", "), tail.join(", "))
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;

    use super::*;

    #[test]
    fn the_first_groups_are_the_generators_first_groups() {
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        for token in TUTORIAL_TOKENS {
            let all = layout.groups(token).to_vecs();
            let first = first_groups(&layout, token, 3);
            assert_eq!(first, all[..3.min(all.len())].to_vec(), "{token}");
        }
    }

    #[test]
    fn long_groups_are_elided() {
        assert_eq!(list(&[0, 4, 8]), "[0, 4, 8]");
        let long: Vec<u32> = (0..64).collect();
        assert_eq!(list(&long), "[0, 1, 2, 3, 4, 5, 6, 7, … 60, 61, 62, 63]");
    }
}
