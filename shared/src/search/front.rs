//! The ranking and the Pareto front. A faster layout that needs more memory and a slower one
//! that needs less are both worth showing: the front is every layout no other beats on both,
//! which is the choice a learner actually has.

use super::walk::Ranked;

/// Fastest first; of equally fast layouts, the one that needs less memory first; otherwise
/// the order the space enumerates them in (the sort is stable).
pub(super) fn rank(ranked: &mut [Ranked]) {
    ranked.sort_by(|a, b| b.samples_per_sec.total_cmp(&a.samples_per_sec).then(a.memory_gb.total_cmp(&b.memory_gb)));
}

/// Indices into `ranked` (ranked by [`rank`]) of the layouts no other is both at least as fast
/// as and needs less memory than, fastest first.
pub(super) fn pareto(ranked: &[Ranked]) -> Vec<usize> {
    let mut least = f64::INFINITY;
    let mut front = Vec::new();
    for (i, r) in ranked.iter().enumerate() {
        if r.memory_gb < least {
            least = r.memory_gb;
            front.push(i);
        }
    }
    front
}
