//! A profile's summary as the page shows it: per rank, its mean profiled step as one bar cut
//! into the trainer's ranges (each segment's width its share of the step, in the timeline's
//! colours), and, from the straggler table, how often each rank arrived last at a collective
//! and the longest waits.

use scalebook_shared::profile::ranges;
use scalebook_shared::profile::trace::{ProfileSummary, RankSummary, Straggler};

use super::timeline_drawing::range_class;

/// One rank's mean step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepBar {
    pub rank: usize,
    /// Profiled steps it is the mean of.
    pub steps: usize,
    pub mean_us: f64,
    /// Left to right, in the order a step runs them; what no range covers comes last.
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub name: String,
    /// The timeline's colour class of the range.
    pub class: &'static str,
    pub us: f64,
    /// Where it starts and how wide it is, as fractions of the bar.
    pub from: f64,
    pub width: f64,
}

/// The ranges a step is cut into: the trainer's own, and the gradient all-reduce (the
/// collectives inside them are not cut again).
const PARTS: [&str; 5] = [ranges::DATA_WAIT, ranges::FORWARD, ranges::BACKWARD, ranges::GRAD_ALLREDUCE, ranges::OPTIMIZER];

/// Every rank's mean step, in rank order; a rank that profiled no step has none.
pub fn step_bars(summary: &ProfileSummary) -> Vec<StepBar> {
    summary.ranks.iter().filter(|r| !r.steps.is_empty()).map(step_bar).collect()
}

fn step_bar(rank: &RankSummary) -> StepBar {
    let steps = rank.steps.len();
    let mean = |f: &dyn Fn(&scalebook_shared::profile::trace::StepSplit) -> f64| rank.steps.iter().map(f).sum::<f64>() / steps as f64;
    let mean_us = mean(&|s| s.total_us);
    let mut parts: Vec<(String, &'static str, f64)> = PARTS
        .iter()
        .map(|part| (part.to_string(), range_class(part), mean(&|s| s.ranges.iter().filter(|r| r.name == *part).map(|r| r.us).sum())))
        .filter(|(_, _, us)| *us > 0.0)
        .collect();
    let rest = mean_us - parts.iter().map(|(_, _, us)| us).sum::<f64>();
    if rest > 0.0 {
        parts.push(("other".into(), "range-other", rest));
    }
    let scale = parts.iter().map(|(_, _, us)| us).sum::<f64>().max(mean_us).max(f64::MIN_POSITIVE);
    let mut from = 0.0;
    let segments = parts
        .into_iter()
        .map(|(name, class, us)| {
            let width = us / scale;
            let segment = Segment { name, class, us, from, width };
            from += width;
            segment
        })
        .collect();
    StepBar { rank: rank.rank, steps, mean_us, segments }
}

/// How many collective calls each rank arrived at last, by rank (ranks never last left out).
pub fn last_arrivals(summary: &ProfileSummary) -> Vec<(usize, usize)> {
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for straggler in &summary.stragglers {
        match counts.iter_mut().find(|(rank, _)| *rank == straggler.last_rank) {
            Some((_, n)) => *n += 1,
            None => counts.push((straggler.last_rank, 1)),
        }
    }
    counts.sort_unstable();
    counts
}

/// The `n` calls with the longest wait, longest first.
pub fn longest_waits(summary: &ProfileSummary, n: usize) -> Vec<&Straggler> {
    let mut rows: Vec<&Straggler> = summary.stragglers.iter().collect();
    rows.sort_by(|a, b| b.wait_us.total_cmp(&a.wait_us).then(a.call.cmp(&b.call)));
    rows.truncate(n);
    rows
}

#[cfg(test)]
mod tests {
    use scalebook_shared::profile::trace::{RangeTime, StepSplit};

    use super::*;

    fn step(step: u64, total_us: f64, parts: &[(&str, f64)]) -> StepSplit {
        StepSplit { step, total_us, ranges: parts.iter().map(|(name, us)| RangeTime { name: (*name).into(), us: *us }).collect() }
    }

    fn straggler(call: usize, last_rank: usize, wait_us: f64) -> Straggler {
        Straggler { collective: "c10d::all_reduce".into(), call, step: Some(3), last_rank, wait_us }
    }

    #[test]
    fn a_rank_s_mean_step_is_cut_into_its_ranges_and_what_none_covers() {
        let json = serde_json::json!({"ranks": [
            {"rank": 0, "events": 9, "first_us": 0.0, "last_us": 200.0, "steps": [], "top_ops": [], "communication_us": 0.0, "overlapped_us": 0.0},
            {"rank": 1, "events": 9, "first_us": 0.0, "last_us": 200.0, "steps": [], "top_ops": [], "communication_us": 0.0, "overlapped_us": 0.0},
        ], "stragglers": [], "unread": []});
        let mut summary: ProfileSummary = serde_json::from_value(json).unwrap();
        summary.ranks[1].steps = vec![
            step(3, 100.0, &[("data_wait", 10.0), ("forward", 30.0), ("c10d::all_reduce", 5.0), ("optimizer", 10.0)]),
            step(4, 120.0, &[("data_wait", 30.0), ("forward", 30.0), ("optimizer", 10.0)]),
        ];
        let bars = step_bars(&summary);
        assert_eq!(bars.len(), 1, "a rank with no step has no bar");
        let bar = &bars[0];
        assert_eq!((bar.rank, bar.steps, bar.mean_us), (1, 2, 110.0));
        let cut: Vec<(&str, &str, f64, f64, f64)> =
            bar.segments.iter().map(|s| (s.name.as_str(), s.class, s.us, s.from, s.width)).collect();
        assert_eq!(
            cut,
            [
                ("data_wait", "range-data-wait", 20.0, 0.0, 20.0 / 110.0),
                ("forward", "range-forward", 30.0, 20.0 / 110.0, 30.0 / 110.0),
                ("optimizer", "range-optimizer", 10.0, 50.0 / 110.0, 10.0 / 110.0),
                ("other", "range-other", 50.0, 60.0 / 110.0, 50.0 / 110.0),
            ]
        );
    }

    #[test]
    fn stragglers_are_counted_by_rank_and_the_longest_waits_come_first() {
        let summary = ProfileSummary {
            stragglers: vec![straggler(0, 1, 3.0), straggler(1, 0, 9.0), straggler(2, 1, 5.0)],
            ..ProfileSummary::default()
        };
        assert_eq!(last_arrivals(&summary), [(0, 1), (1, 2)]);
        let waits: Vec<usize> = longest_waits(&summary, 2).iter().map(|s| s.call).collect();
        assert_eq!(waits, [1, 2]);
    }
}
