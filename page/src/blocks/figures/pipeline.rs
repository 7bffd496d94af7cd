//! Pipeline parallelism on four stages, on one time axis: the model's layers split over four
//! GPUs with one batch, where only one GPU works at a time, against the same batch as four
//! micro-batches (GPipe's schedule), where the stages overlap. The idle time (the bubble) is
//! shaded, and its share, (p−1)/(m+p−1), written beside it.

use crate::blocks::picture::{Anchor, Picture};

const STAGES: usize = 4;
const MICRO_BATCHES: usize = 4;
const LEFT: f64 = 70.0;
const PLOT: f64 = 610.0;
const LANE: (f64, f64) = (24.0, 18.0);
const PANEL: f64 = 156.0;

/// One forward or backward pass of a micro-batch on a stage, in time units.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pass {
    stage: usize,
    micro_batch: usize,
    backward: bool,
    start: f64,
    length: f64,
}

/// GPipe's schedule: every micro-batch forward through the stages, then every one backward in
/// reverse; each pass takes `length` units. Stage `s` starts forward pass `i` at `s + i`, and
/// the backward passes once the last forward is through.
fn schedule(stages: usize, micro_batches: usize, length: f64) -> Vec<Pass> {
    let fill = micro_batches + stages - 1;
    let mut passes = Vec::new();
    for stage in 0..stages {
        for micro_batch in 0..micro_batches {
            let forward = (stage + micro_batch) as f64;
            let backward = (fill + stages - 1 - stage + micro_batch) as f64;
            for (backward, slot) in [(false, forward), (true, backward)] {
                passes.push(Pass { stage, micro_batch, backward, start: slot * length, length });
            }
        }
    }
    passes
}

fn duration(stages: usize, micro_batches: usize, length: f64) -> f64 {
    2.0 * (micro_batches + stages - 1) as f64 * length
}

/// The stretches of `[0, end)` in which `stage` runs no pass.
fn idle(passes: &[Pass], stage: usize, end: f64) -> Vec<(f64, f64)> {
    let mut busy: Vec<(f64, f64)> = passes.iter().filter(|p| p.stage == stage).map(|p| (p.start, p.start + p.length)).collect();
    busy.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut gaps = Vec::new();
    let mut at = 0.0;
    for (start, stop) in busy.into_iter().chain([(end, end)]) {
        if start > at {
            gaps.push((at, start));
        }
        at = f64::max(at, stop);
    }
    gaps
}

/// `(p−1)/(m+p−1) = 3/7 ≈ 43%`: the fraction reduced, and its percentage.
fn bubble_text(stages: usize, micro_batches: usize) -> String {
    let (top, bottom) = (stages - 1, micro_batches + stages - 1);
    let divisor = gcd(top, bottom);
    let percent = 100.0 * top as f64 / bottom as f64;
    let sign = if (100 * top).is_multiple_of(bottom) { "=" } else { "≈" };
    format!("bubble (p−1)/(m+p−1) = {}/{} {sign} {percent:.0}% (p = {stages}, m = {micro_batches})", top / divisor, bottom / divisor)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

pub fn picture() -> Picture {
    let mut p = Picture::new(
        700.0,
        2.0 * PANEL + 40.0,
        format!(
            "Four pipeline stages on one time axis. One batch: one GPU works at a time, {}. Four micro-batches: the stages overlap, {}.",
            bubble_text(STAGES, 1),
            bubble_text(STAGES, MICRO_BATCHES)
        ),
    );
    // The batch is MICRO_BATCHES units of work per pass, whole or split.
    let unit = PLOT / duration(STAGES, 1, MICRO_BATCHES as f64);
    panel(&mut p, 0.0, "One batch, the layers split over 4 GPUs: one GPU works at a time", unit, 1, MICRO_BATCHES as f64);
    panel(&mut p, PANEL, "The same batch as 4 micro-batches (GPipe): the stages overlap", unit, MICRO_BATCHES, 1.0);
    let axis = 2.0 * PANEL + 8.0;
    p.arrow((LEFT, axis), (LEFT + PLOT, axis), "flow");
    p.text(LEFT + PLOT, axis + 16.0, "time", Anchor::End, "note");
    p.rect(LEFT, axis + 6.0, 12.0, 12.0, "pass forward");
    p.text(LEFT + 16.0, axis + 16.0, "forward", Anchor::Start, "note");
    p.rect(LEFT + 80.0, axis + 6.0, 12.0, 12.0, "pass backward");
    p.text(LEFT + 96.0, axis + 16.0, "backward (numbers: micro-batches)", Anchor::Start, "note");
    p.rect(LEFT + 320.0, axis + 6.0, 12.0, 12.0, "bubble");
    p.text(LEFT + 336.0, axis + 16.0, "idle", Anchor::Start, "note");
    p
}

fn panel(p: &mut Picture, top: f64, title: &str, unit: f64, micro_batches: usize, length: f64) {
    p.text(0.0, top + 16.0, title, Anchor::Start, "heading");
    let passes = schedule(STAGES, micro_batches, length);
    let end = duration(STAGES, micro_batches, length);
    let lane_top = |stage: usize| top + 28.0 + stage as f64 * LANE.0;
    for stage in 0..STAGES {
        p.text(LEFT - 10.0, lane_top(stage) + 13.0, format!("GPU {stage}"), Anchor::End, "note");
        for (from, to) in idle(&passes, stage, end) {
            p.rect(LEFT + from * unit, lane_top(stage), (to - from) * unit, LANE.1, "bubble");
        }
    }
    for pass in &passes {
        let (x, y, w) = (LEFT + pass.start * unit, lane_top(pass.stage), pass.length * unit);
        p.rect(x, y, w, LANE.1, if pass.backward { "pass backward" } else { "pass forward" });
        let label = match (micro_batches, pass.backward) {
            (1, false) => "F".to_owned(),
            (1, true) => "B".to_owned(),
            _ => (pass.micro_batch + 1).to_string(),
        };
        p.text(x + w / 2.0, y + 13.0, label, Anchor::Middle, "pass-label");
    }
    p.text(LEFT, lane_top(STAGES) + 12.0, bubble_text(STAGES, micro_batches), Anchor::Start, "note");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::picture::Shape;

    fn find(passes: &[Pass], stage: usize, micro_batch: usize, backward: bool) -> Pass {
        *passes.iter().find(|p| (p.stage, p.micro_batch, p.backward) == (stage, micro_batch, backward)).unwrap()
    }

    #[test]
    fn each_pass_waits_for_the_one_it_needs() {
        let passes = schedule(4, 4, 1.0);
        for p in &passes {
            let end = |q: Pass| q.start + q.length;
            match (p.backward, p.stage) {
                (false, 0) => {}
                (false, s) => assert!(p.start >= end(find(&passes, s - 1, p.micro_batch, false)), "{p:?}"),
                (true, 3) => assert!(p.start >= end(find(&passes, 3, p.micro_batch, false)), "{p:?}"),
                (true, s) => assert!(p.start >= end(find(&passes, s + 1, p.micro_batch, true)), "{p:?}"),
            }
            // A stage runs one pass at a time.
            let overlapping = passes.iter().filter(|q| q.stage == p.stage && q.start < end(*p) && p.start < end(**q)).count();
            assert_eq!(overlapping, 1, "{p:?}");
        }
    }

    #[test]
    fn the_idle_share_is_the_bubble_fraction() {
        for (stages, micro_batches) in [(4, 1), (4, 4), (2, 8), (8, 3)] {
            let passes = schedule(stages, micro_batches, 1.0);
            let end = duration(stages, micro_batches, 1.0);
            let idle: f64 = (0..stages).flat_map(|s| idle(&passes, s, end)).map(|(a, b)| b - a).sum();
            let expected = (stages - 1) as f64 / (micro_batches + stages - 1) as f64;
            assert!((idle / (end * stages as f64) - expected).abs() < 1e-12, "p {stages}, m {micro_batches}");
        }
        assert_eq!(bubble_text(4, 1), "bubble (p−1)/(m+p−1) = 3/4 = 75% (p = 4, m = 1)");
        assert_eq!(bubble_text(4, 4), "bubble (p−1)/(m+p−1) = 3/7 ≈ 43% (p = 4, m = 4)");
    }

    #[test]
    fn both_runs_share_one_time_axis() {
        let p = picture();
        // The last pass's end in each panel (the legend's swatch is smaller than a lane).
        let end_in = |top: f64| {
            p.of_class("pass backward")
                .filter_map(|i| match i.shape {
                    Shape::Rect { x, y, w, h } if h == LANE.1 && (top..top + PANEL).contains(&y) => Some(x + w),
                    _ => None,
                })
                .fold(0.0, f64::max)
        };
        assert!((end_in(0.0) - (LEFT + PLOT)).abs() < 1e-9, "the whole batch takes the whole axis");
        // Split in four, the same batch is done after 14 of those 32 units.
        assert!((end_in(PANEL) - (LEFT + PLOT * 14.0 / 32.0)).abs() < 1e-9);
        assert!(p.texts().iter().any(|t| t.contains("3/7 ≈ 43%")));
    }
}
