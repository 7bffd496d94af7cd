//! Pipeline parallelism on four stages, on one time axis: the model's layers split over four
//! GPUs with one batch, where only one GPU works at a time, against the same batch as four
//! micro-batches (GPipe's schedule), where the stages overlap. The idle time (the bubble) is
//! shaded, and its share, (p−1)/(m+p−1), written beside it. [`explorer`] draws any number of
//! stages and micro-batches, GPipe's schedule above 1F1B's and interleaved 1F1B's, for the
//! pipeline block.

use crate::blocks::picture::{Anchor, Picture};
use scalebook_shared::pipeline::{Pass, Schedule, bubble_fraction, bubble_text, duration, idle, peak_held, simulate};

const STAGES: usize = 4;
const MICRO_BATCHES: usize = 4;
const LEFT: f64 = 70.0;
const PLOT: f64 = 610.0;
const LANE: (f64, f64) = (24.0, 18.0);
const PANEL: f64 = 156.0;
/// The virtual stages per rank the explorer interleaves with.
pub const VIRTUAL_STAGES: usize = 2;

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
    let unit = PLOT / duration(&simulate(Schedule::GPipe, STAGES, 1, MICRO_BATCHES as f64));
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
    let passes = simulate(Schedule::GPipe, STAGES, micro_batches, length);
    lanes(p, top, title, unit, STAGES, &passes, micro_batches > 1);
    p.text(LEFT, top + 28.0 + STAGES as f64 * LANE.0 + 12.0, bubble_text(STAGES, micro_batches), Anchor::Start, "note");
}

/// A panel's lanes: one per stage, its idle stretches shaded, its passes drawn and numbered
/// (`F`/`B` when the batch is whole).
fn lanes(p: &mut Picture, top: f64, title: &str, unit: f64, stages: usize, passes: &[Pass], numbered: bool) {
    p.text(0.0, top + 16.0, title, Anchor::Start, "heading");
    let end = duration(passes);
    let lane_top = |stage: usize| top + 28.0 + stage as f64 * LANE.0;
    for stage in 0..stages {
        p.text(LEFT - 10.0, lane_top(stage) + 13.0, format!("GPU {stage}"), Anchor::End, "note");
        for (from, to) in idle(passes, stage, end) {
            p.rect(LEFT + from * unit, lane_top(stage), (to - from) * unit, LANE.1, "bubble");
        }
    }
    for pass in passes {
        let (x, y, w) = (LEFT + pass.start * unit, lane_top(pass.stage), pass.length * unit);
        p.rect(x, y, w, LANE.1, if pass.backward { "pass backward" } else { "pass forward" });
        let label = match (numbered, pass.backward) {
            (false, false) => "F".to_owned(),
            (false, true) => "B".to_owned(),
            _ => (pass.micro_batch + 1).to_string(),
        };
        // Numbers fit in a pass of about a character's width or more.
        if w >= 9.0 {
            p.text(x + w / 2.0, y + 13.0, label, Anchor::Middle, "pass-label");
        }
    }
}

/// The pipeline block's picture: `stages` stages and `micro_batches` micro-batches under
/// GPipe's schedule, 1F1B's and interleaved 1F1B's ([`VIRTUAL_STAGES`] chunks a rank, when the
/// micro-batches divide by the stages), on one time axis, each with its bubble and the most
/// activations the first stage holds at once.
pub fn explorer(stages: usize, micro_batches: usize) -> Picture {
    let lane_space = 28.0 + stages as f64 * LANE.0 + 20.0;
    let interleaved = Schedule::Interleaved(VIRTUAL_STAGES);
    let mut p = Picture::new(
        700.0,
        3.0 * lane_space + 40.0,
        format!(
            "{stages} pipeline stages, {micro_batches} micro-batches, GPipe's schedule, 1F1B's and interleaved 1F1B's on one time axis; {}.",
            bubble_text(stages, micro_batches)
        ),
    );
    let schedules = [Schedule::GPipe, Schedule::OneFOneB, interleaved].map(|s| (s, simulate(s, stages, micro_batches, 1.0)));
    let unit = PLOT / schedules.iter().map(|(_, passes)| duration(passes)).fold(1.0, f64::max);
    for (i, (schedule, passes)) in schedules.iter().enumerate() {
        let top = i as f64 * lane_space;
        lanes(&mut p, top, &title(*schedule, passes, stages, micro_batches), unit, stages, passes, true);
    }
    let axis = 3.0 * lane_space + 8.0;
    p.arrow((LEFT, axis), (LEFT + PLOT, axis), "flow");
    p.text(LEFT + PLOT, axis + 16.0, "time", Anchor::End, "note");
    p.text(LEFT, axis + 16.0, bubble_text(stages, micro_batches), Anchor::Start, "note");
    p
}

/// A schedule's heading in the explorer: how it runs, and what GPU 0 holds at most.
fn title(schedule: Schedule, passes: &[Pass], stages: usize, micro_batches: usize) -> String {
    let held = peak_held(passes, 0);
    match schedule {
        Schedule::GPipe => format!("GPipe: all forwards, then all backwards; GPU 0 holds {held} micro-batches' activations at once"),
        Schedule::OneFOneB => format!("1F1B: one forward, one backward; GPU 0 holds at most {held}"),
        Schedule::Interleaved(v) if passes.is_empty() => {
            format!("Interleaved 1F1B (v = {v}) takes micro-batches in groups of p: m = {micro_batches} does not divide by p = {stages}")
        }
        // Short enough for the panel's width: the bubble's formula is in the text beside it.
        Schedule::Interleaved(v) => format!(
            "Interleaved 1F1B, v = {v}: bubble {}; GPU 0 holds at most {} micro-batches' worth",
            bubble_fraction(stages, micro_batches, v),
            held as f64 / v as f64
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::picture::Shape;

    #[test]
    fn the_explorer_draws_the_three_schedules_on_one_axis() {
        let p = explorer(4, 8);
        assert_eq!(p.of_class("pass forward").count(), 2 * 4 * 8 + 2 * 4 * 8, "every forward pass of the three schedules");
        let texts = p.texts();
        assert!(texts.iter().any(|t| t.contains("3/11 ≈ 27%")), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains("v = 2: bubble 3/19 ≈ 16%; GPU 0 holds at most 5.5 micro-batches' worth")), "{texts:?}");
        let undivided = explorer(4, 6);
        let undivided = undivided.texts();
        assert!(undivided.iter().any(|t| t.contains("m = 6 does not divide by p = 4")), "{undivided:?}");
        assert!(
            texts.iter().any(|t| t.contains("GPU 0 holds 8 micro-batches")) && texts.iter().any(|t| t.contains("GPU 0 holds at most 4")),
            "{texts:?}"
        );
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
