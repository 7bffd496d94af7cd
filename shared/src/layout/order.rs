//! Order strings (`tp-cp-dp`): which dimension varies fastest across consecutive ranks.

use super::dims::{Dim, Sizes};
use crate::Problems;

/// Resolves a user's order string to the effective order over all four dimensions, as the
/// tutorial's `RankGenerator` does: names are case-insensitive, the leftmost varies fastest,
/// and every name left out is appended in the order tp, pp, dp, cp, which is only harmless
/// (and so only allowed) when that dimension has size 1.
///
/// Returns `None` after pushing at least one problem against `order`.
pub(super) fn resolve(order: &str, sizes: &Sizes, problems: &mut Problems) -> Option<[Dim; 4]> {
    let text = order.trim().to_ascii_lowercase();
    if text.is_empty() {
        problems.push("order", "is empty; name the dimensions from fastest to slowest varying, e.g. `tp-cp-dp`");
        return None;
    }
    let before = problems.0.len();
    let mut named = Vec::with_capacity(Dim::ALL.len());
    if text.split('-').any(str::is_empty) {
        problems.push("order", format!("`{text}` has an empty name (a dash at an end or two in a row)"));
    }
    for part in text.split('-').filter(|p| !p.is_empty()) {
        match part.parse::<Dim>() {
            Err(_) => problems.push("order", format!("`{text}` has the unknown name `{part}`; the names are tp, cp, dp and pp")),
            Ok(dim) if named.contains(&dim) => problems.push("order", format!("`{text}` names {dim} twice")),
            Ok(dim) => named.push(dim),
        }
    }
    for dim in Dim::ALL {
        if named.contains(&dim) {
            continue;
        }
        let size = sizes.get(dim);
        if size > 1 {
            problems.push(
                "order",
                format!("`{text}` leaves out {dim}, which is only allowed when {dim} is 1, but it is {size}; add {dim} to the order"),
            );
        }
        named.push(dim);
    }
    if problems.0.len() > before {
        return None;
    }
    named.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(order: &str, sizes: Sizes) -> Result<String, Problems> {
        let mut problems = Problems::default();
        match resolve(order, &sizes, &mut problems) {
            Some(dims) => Ok(dims.map(Dim::name).join("-")),
            None => Err(problems),
        }
    }

    #[test]
    fn appends_missing_names_in_tutorial_order() {
        let sizes = Sizes { tp: 4, dp: 2, ..Sizes::default() };
        assert_eq!(resolved("tp-dp", sizes).unwrap(), "tp-dp-pp-cp");
        assert_eq!(resolved("dp", Sizes { dp: 8, ..Sizes::default() }).unwrap(), "dp-tp-pp-cp");
        assert_eq!(resolved("cp-dp", Sizes::default()).unwrap(), "cp-dp-tp-pp");
        assert_eq!(resolved("pp-cp-dp", Sizes::default()).unwrap(), "pp-cp-dp-tp");
    }

    #[test]
    fn is_case_insensitive_and_trims() {
        assert_eq!(resolved(" TP-Cp-dp ", Sizes::default()).unwrap(), "tp-cp-dp-pp");
    }

    #[test]
    fn reports_every_problem_in_one_string() {
        let sizes = Sizes { tp: 2, cp: 4, dp: 2, pp: 1 };
        let problems = resolved("tp--ep-tp-dp", sizes).unwrap_err();
        let messages: Vec<&str> = problems.0.iter().map(|p| p.message.as_str()).collect();
        assert!(problems.0.iter().all(|p| p.field == "order"));
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].contains("empty name"));
        assert!(messages[1].contains("`ep`"));
        assert!(messages[2].contains("tp twice"));
        assert!(messages[3].contains("leaves out cp") && messages[3].contains("it is 4"));
    }

    #[test]
    fn rejects_an_empty_order() {
        let problems = resolved("  ", Sizes::default()).unwrap_err();
        assert_eq!(problems.0.len(), 1);
        assert!(problems.0[0].message.contains("is empty"));
    }
}
