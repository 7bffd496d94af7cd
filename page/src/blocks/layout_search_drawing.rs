//! The layout search's scatter: every layout that runs as a point, samples/s across and memory
//! per GPU up (the GPU's memory is the top of the plot), coloured by what limits its step; the
//! Pareto front of memory against speed as a line; the fastest layout and the tutorial's own
//! choice ringed. Layouts that land on the same spot in the same colour (a ZeRO stage that saves
//! nothing here, micro-batches that change nothing but rounding) are drawn once, so a search of
//! thousands of layouts draws a few hundred points; [`Scatter::mark_at`] finds the layout under
//! the pointer.

use std::collections::HashMap;

use scalebook_shared::charts::{format_tick, linear_ticks};
use scalebook_shared::search::{Answer, Ranked};

use super::layout_search_model::Limit;
use super::picture::{Anchor, LINE, Picture, text_width};

pub const WIDTH: f64 = 680.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 20.0;
const PLOT_HEIGHT: f64 = 300.0;
/// Below the plot: tick labels and the axis title.
const BELOW: f64 = 54.0;
const LEGEND_COLUMNS: usize = 2;
const POINT: f64 = 3.5;
/// How far from a point the pointer may be and still pick it, in SVG units.
pub const HIT_RADIUS: f64 = 9.0;

/// One drawn point: the fastest of the layouts drawn at its spot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    /// Index into the answer's ranking.
    pub index: usize,
    /// How many layouts are drawn here.
    pub layouts: usize,
    pub limit: Limit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scatter {
    pub picture: Picture,
    /// Fastest first.
    pub marks: Vec<Mark>,
    x_max: f64,
    y_max: f64,
}

impl Scatter {
    /// Where `r` is drawn.
    pub fn position(&self, r: &Ranked) -> (f64, f64) {
        (LEFT + r.samples_per_sec / self.x_max * plot_width(), TOP + PLOT_HEIGHT * (1.0 - r.memory_gb / self.y_max))
    }

    /// The mark nearest `(x, y)` within [`HIT_RADIUS`]; of marks as near, the faster.
    pub fn mark_at(&self, x: f64, y: f64) -> Option<&Mark> {
        let distance = |m: &Mark| (m.x - x).hypot(m.y - y);
        self.marks.iter().filter(|m| distance(m) <= HIT_RADIUS).min_by(|a, b| distance(a).total_cmp(&distance(b)))
    }
}

fn plot_width() -> f64 {
    WIDTH - LEFT - RIGHT
}

/// The scatter of `answer` (which has at least one layout: the search refuses a space where
/// none runs).
pub fn scatter(answer: &Answer) -> Scatter {
    let fastest = answer.ranked.iter().map(|r| r.samples_per_sec).fold(0.0, f64::max);
    let (x_ticks, x_step) = linear_ticks(0.0, fastest * 1.08, 6);
    let x_max = x_ticks.last().copied().filter(|&t| t >= fastest).unwrap_or(fastest * 1.08).max(f64::MIN_POSITIVE);
    let y_max = answer.memory_limit_gb.max(answer.ranked.iter().map(|r| r.memory_gb).fold(0.0, f64::max)).max(f64::MIN_POSITIVE);
    let (y_ticks, y_step) = linear_ticks(0.0, y_max, 5);
    let limits = present_limits(answer);
    let legend_rows = (limits.len() + 2).div_ceil(LEGEND_COLUMNS);
    let height = TOP + PLOT_HEIGHT + BELOW + legend_rows as f64 * LINE + 8.0;
    let label = format!(
        "{} layouts of {} GPUs ({}): samples per second across, memory per GPU up to the GPU's {:.0} GiB, coloured by what limits each step",
        answer.ranked.len(),
        answer.gpus,
        answer.gpu,
        answer.memory_limit_gb
    );
    let mut scatter = Scatter { picture: Picture::new(WIDTH, height, label), marks: Vec::new(), x_max, y_max };
    let bottom = TOP + PLOT_HEIGHT;
    let right = LEFT + plot_width();
    let p = &mut scatter.picture;
    for &t in &y_ticks {
        let y = TOP + PLOT_HEIGHT * (1.0 - t / y_max);
        p.line((LEFT, y), (right, y), "grid");
        p.text(LEFT - 6.0, y + 4.0, format_tick(t, y_step), Anchor::End, "tick");
    }
    for &t in &x_ticks {
        let x = LEFT + t / x_max * plot_width();
        p.line((x, TOP), (x, bottom), "grid");
        p.text(x, bottom + 16.0, format_tick(t, x_step), Anchor::Middle, "tick");
    }
    p.line((LEFT, bottom), (right, bottom), "axis");
    p.line((LEFT, TOP), (LEFT, bottom), "axis");
    p.text(LEFT + plot_width() / 2.0, bottom + 34.0, "samples per second (faster →)", Anchor::Middle, "unit");
    p.text(12.0, TOP + PLOT_HEIGHT / 2.0, "GiB per GPU", Anchor::Middle, "unit vertical");
    let limit_y = TOP + PLOT_HEIGHT * (1.0 - answer.memory_limit_gb / y_max);
    p.line((LEFT, limit_y), (right, limit_y), "search-memory-limit");
    p.text(right - 4.0, limit_y - 4.0, format!("the {}'s {:.0} GiB", answer.gpu, answer.memory_limit_gb), Anchor::End, "note");

    scatter.marks = marks(&scatter, answer);
    let front: Vec<(f64, f64)> = {
        let mut points: Vec<(f64, f64)> = answer.front.iter().map(|&i| scatter.position(&answer.ranked[i])).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points
    };
    let p = &mut scatter.picture;
    if front.len() > 1 {
        let d: String = front
            .iter()
            .enumerate()
            .map(|(i, (x, y))| format!("{}{x:.1} {y:.1}", if i == 0 { 'M' } else { 'L' }))
            .collect::<Vec<_>>()
            .join("");
        p.path(d, "search-front");
    }
    for m in &scatter.marks {
        p.circle(m.x, m.y, POINT, m.limit.class());
    }
    rings(&mut scatter, answer);
    legend(&mut scatter.picture, &limits, bottom + BELOW);
    scatter
}

/// One mark per spot and colour, the fastest layout there standing for the rest.
fn marks(scatter: &Scatter, answer: &Answer) -> Vec<Mark> {
    let mut at: HashMap<(i64, i64, Limit), usize> = HashMap::new();
    let mut marks: Vec<Mark> = Vec::new();
    for (index, r) in answer.ranked.iter().enumerate() {
        let (x, y) = scatter.position(r);
        let limit = Limit::of(r.limit);
        // A unit apart is the same spot at any size the page shows the picture (a point is 7).
        let key = (x.round() as i64, y.round() as i64, limit);
        match at.get(&key) {
            Some(&m) => marks[m].layouts += 1,
            None => {
                at.insert(key, marks.len());
                marks.push(Mark { x, y, index, layouts: 1, limit });
            }
        }
    }
    marks
}

/// The fastest layout and the tutorial's, ringed and named.
fn rings(scatter: &mut Scatter, answer: &Answer) {
    let mut named: Vec<(usize, String, &'static str)> = Vec::new();
    if !answer.ranked.is_empty() {
        named.push((0, "fastest".to_owned(), "search-best"));
    }
    for standing in &answer.tutorial {
        if let Some(rank) = standing.rank {
            let s = standing.choice.sizes;
            let words = [("tp", s.tp), ("cp", s.cp), ("dp", s.dp)]
                .iter()
                .filter(|(_, n)| *n > 1)
                .map(|(d, n)| format!("{d} {n}"))
                .collect::<Vec<_>>();
            named.push((rank - 1, format!("tutorial: {}", words.join(" × ")), "search-tutorial"));
        }
    }
    let right = LEFT + plot_width();
    for (k, (index, text, class)) in named.into_iter().enumerate() {
        let (x, y) = scatter.position(&answer.ranked[index]);
        scatter.picture.circle(x, y, POINT + 4.0, class);
        let room = x + 10.0 + text_width(&text, 12.0) <= right;
        let (tx, anchor) = if room { (x + 10.0, Anchor::Start) } else { (x - 10.0, Anchor::End) };
        // Labels of rings close together step down, one line each.
        let ty = (y - 8.0 + k as f64 * LINE).clamp(TOP + 10.0, TOP + PLOT_HEIGHT - 4.0);
        scatter.picture.text(tx, ty, text, anchor, "search-label");
    }
}

/// The limits the answer has, in [`Limit::ALL`]'s order, with how many layouts each limits.
fn present_limits(answer: &Answer) -> Vec<(Limit, usize)> {
    Limit::ALL.iter().map(|&l| (l, answer.ranked.iter().filter(|r| Limit::of(r.limit) == l).count())).filter(|(_, n)| *n > 0).collect()
}

/// Under the axes: a dot of each colour with what it means, the front and the rings.
fn legend(p: &mut Picture, limits: &[(Limit, usize)], top: f64) {
    let column = (WIDTH - LEFT) / LEGEND_COLUMNS as f64;
    let slot = |i: usize| (LEFT + (i % LEGEND_COLUMNS) as f64 * column, top + (i / LEGEND_COLUMNS) as f64 * LINE + 4.0);
    for (i, (limit, count)) in limits.iter().enumerate() {
        let (x, y) = slot(i);
        p.circle(x + 4.0, y - 4.0, POINT, limit.class());
        p.text(x + 12.0, y, format!("{} ({count})", limit.name()), Anchor::Start, "note");
    }
    let (x, y) = slot(limits.len());
    p.line((x, y - 4.0), (x + 10.0, y - 4.0), "search-front");
    p.text(x + 14.0, y, "Pareto front: none both faster and lighter", Anchor::Start, "note");
    let (x, y) = slot(limits.len() + 1);
    p.circle(x + 4.0, y - 4.0, POINT + 2.0, "search-tutorial");
    p.text(x + 12.0, y, "the tutorial's layout", Anchor::Start, "note");
}

#[cfg(test)]
mod tests {
    use super::super::layout_search_model::run;
    use super::super::layout_search_model::tests::{files, query};
    use super::super::picture::Shape;
    use super::*;

    fn answer(gpus: u32) -> Answer {
        let (configs, clusters) = files();
        run(&query("mp", "perlmutter", None, gpus), &configs, &clusters).unwrap()
    }

    #[test]
    fn every_layout_is_drawn_once_per_spot_and_colour() {
        let answer = answer(16);
        let s = scatter(&answer);
        let drawn: usize = s.marks.iter().map(|m| m.layouts).sum();
        assert_eq!(drawn, answer.ranked.len());
        assert!(s.marks.len() < answer.ranked.len(), "{} marks for {} layouts", s.marks.len(), answer.ranked.len());
        assert_eq!(s.marks[0].index, 0, "the fastest first");
        assert!(s.marks.windows(2).all(|w| w[0].index < w[1].index));
        // Every mark inside the plot, the faster to the right, the heavier higher.
        for m in &s.marks {
            let r = &answer.ranked[m.index];
            assert_eq!(m.limit, Limit::of(r.limit));
            assert!((LEFT..=WIDTH - RIGHT).contains(&m.x) && (TOP..=TOP + PLOT_HEIGHT).contains(&m.y), "{m:?}");
        }
        let (best, last) = (s.marks[0], s.marks[s.marks.len() - 1]);
        assert!(best.x >= last.x);
        let points = s.picture.of_class(Limit::of(answer.ranked[0].limit).class()).count();
        assert!(points >= 2, "the fastest's colour has its points and its legend dot");
    }

    #[test]
    fn the_front_the_rings_and_the_axes_are_drawn() {
        let answer = answer(16);
        let s = scatter(&answer);
        let front: Vec<_> = s.picture.of_class("search-front").collect();
        assert_eq!(front.len(), 2, "the front and its legend line");
        let Shape::Path(d) = &front[0].shape else { panic!() };
        assert_eq!(d.matches('L').count() + 1, answer.front.len());
        let texts = s.picture.texts();
        assert!(texts.contains(&"fastest"), "{texts:?}");
        assert!(texts.contains(&"tutorial: tp 4 × dp 4") && texts.contains(&"tutorial: cp 4 × dp 4"), "{texts:?}");
        assert!(texts.contains(&"the a100-40gb's 40 GiB"));
        assert!(texts.contains(&"samples per second (faster →)") && texts.contains(&"GiB per GPU"));
        assert!(texts.iter().any(|t| t.starts_with(Limit::of(answer.ranked[0].limit).name())), "{texts:?}");
        assert_eq!(s.picture.of_class("search-tutorial").count(), 3, "two rings and the legend's");
        assert!(s.picture.label.starts_with(&format!("{} layouts of 16 GPUs (a100-40gb)", answer.ranked.len())));
    }

    #[test]
    fn the_pointer_picks_the_nearest_layout() {
        let answer = answer(16);
        let s = scatter(&answer);
        let best = s.marks[0];
        assert_eq!(s.mark_at(best.x + 1.0, best.y - 1.0).map(|m| m.index), Some(0));
        assert_eq!(s.mark_at(2.0, 2.0), None, "nothing in the margin");
        let tutorial = answer.tutorial[0].rank.unwrap() - 1;
        let (x, y) = s.position(&answer.ranked[tutorial]);
        let picked = s.mark_at(x, y).unwrap();
        let r = &answer.ranked[picked.index];
        assert!((r.samples_per_sec - answer.ranked[tutorial].samples_per_sec).abs() / r.samples_per_sec < 0.02);
    }

    #[test]
    fn one_gpu_and_a_thousand_draw_too() {
        for gpus in [1, 1024] {
            let (configs, clusters) = files();
            match run(&query("mp", "perlmutter", Some("a100-80gb"), gpus), &configs, &clusters) {
                Ok(answer) => {
                    let s = scatter(&answer);
                    assert!(!s.marks.is_empty() && s.marks.len() <= answer.ranked.len());
                    assert!(s.marks.len() < 3000, "{gpus} GPUs: {} marks", s.marks.len());
                }
                Err(refusal) => assert!(!refusal.reasons.is_empty(), "{gpus}: {refusal:?}"),
            }
        }
    }
}
