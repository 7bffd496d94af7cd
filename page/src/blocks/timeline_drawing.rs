//! The timeline's picture computed from the trace: where each lane and row sits, which bars
//! a window shows at this width (merged per pixel by `shared`), their colours and labels,
//! and what lies under the pointer. Pure, so it is tested without a page.

use std::fmt::Write as _;

use scalebook_shared::profile::ranges;
use scalebook_shared::profile::trace::{Bar, BarKind, LaneKind, Timeline, Window, bar_at, format_micros, micros_ticks};

/// The drawing's width in SVG units (it scales to the page) and the parts across it.
pub const WIDTH: f64 = 960.0;
pub const LABEL_WIDTH: f64 = 190.0;
const RIGHT: f64 = 10.0;
/// The time axis across the top.
pub const AXIS_HEIGHT: f64 = 22.0;
const ROW_HEIGHT: f64 = 14.0;
/// A bar's height: a row less a gap between rows.
pub const BAR_HEIGHT: f64 = ROW_HEIGHT - 2.0;
const LANE_GAP: f64 = 4.0;
/// The line naming a rank above its lanes.
const RANK_HEADING: f64 = 18.0;
/// A bar gets its name written in it from this width on (SVG units).
const LABELLED_WIDTH: f64 = 48.0;
/// About how wide one character of a bar's label is (SVG units, 10 px text).
const CHAR_WIDTH: f64 = 6.0;
/// How far (SVG units) the pointer may miss a thin bar and still point at it.
const POINTER_SLACK: f64 = 3.0;
/// The ops' colours: a name always gets the same one.
const OP_COLOURS: u64 = 6;
/// How much a wheel notch (100 units of `deltaY`) zooms.
const WHEEL_ZOOM: f64 = 1.25;

pub fn plot_width() -> f64 {
    WIDTH - LABEL_WIDTH - RIGHT
}

/// The drawing's width in whole pixels, for merging bars per pixel.
pub fn plot_pixels() -> u32 {
    plot_width() as u32
}

/// The x of time `t` (µs) in `window`.
pub fn x_of(window: Window, t: f64) -> f64 {
    LABEL_WIDTH + window.fraction(t) * plot_width()
}

/// The fraction of the plot's width at `x` (SVG units), for zooming around the pointer.
pub fn fraction_at(x: f64) -> f64 {
    (x - LABEL_WIDTH) / plot_width()
}

/// A pointer at `client` (CSS pixels) in the drawing's units, on a picture whose box on
/// screen starts at `origin` and has `size`: the picture scales to the page, so the two differ.
pub fn to_drawing(client: (f64, f64), origin: (f64, f64), size: (f64, f64), height: f64) -> (f64, f64) {
    let x = (client.0 - origin.0) * WIDTH / size.0.max(1.0);
    let y = (client.1 - origin.1) * height / size.1.max(1.0);
    (x, y)
}

/// The zoom factor of a wheel turn of `delta_y` (the event's `deltaY`): over 1 zooms out.
pub fn wheel_factor(delta_y: f64) -> f64 {
    WHEEL_ZOOM.powf(delta_y / 100.0)
}

/// The window while a drag pans: the one it began with (`start`, the pointer then at `from`),
/// moved with the pointer, now at `to` (SVG units), and kept within `bounds`.
pub fn dragged(start: Window, from: f64, to: f64, bounds: Window) -> Window {
    start.pan((from - to) / plot_width(), bounds)
}

/// The window in words, out of the whole trace's length.
pub fn window_line(window: Window, bounds: Window) -> String {
    format!("{} to {} of {}", format_micros(window.start), format_micros(window.end), format_micros(bounds.end))
}

/// The range kinds of the legend: a CSS class and the names it colours.
pub const LEGEND: [(&str, &str); 8] = [
    ("range-step", "step N"),
    ("range-data-wait", ranges::DATA_WAIT),
    ("range-forward", ranges::FORWARD),
    ("range-backward", ranges::BACKWARD),
    ("range-allreduce", ranges::GRAD_ALLREDUCE),
    ("range-collective", "c10d::…"),
    ("range-optimizer", ranges::OPTIMIZER),
    ("range-other", "other marks"),
];

/// The colour class of a range: one per part of the trainer's step, one for collectives, one
/// for whole steps (ours and PyTorch's `ProfilerStep#N`), one for any other mark.
pub fn range_class(name: &str) -> &'static str {
    match name {
        ranges::DATA_WAIT => "range-data-wait",
        ranges::FORWARD => "range-forward",
        ranges::BACKWARD => "range-backward",
        ranges::GRAD_ALLREDUCE => "range-allreduce",
        ranges::OPTIMIZER => "range-optimizer",
        n if n.starts_with(ranges::COLLECTIVE_PREFIX) => "range-collective",
        n if n.starts_with(ranges::STEP_PREFIX) || n.starts_with("ProfilerStep") => "range-step",
        _ => "range-other",
    }
}

/// An op's colour class, from a hash of its name (FNV-1a), so it keeps its colour when the
/// view changes.
fn op_class(name: &str) -> String {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("op-{}", hash % OP_COLOURS)
}

/// Where a lane sits: its index in the timeline, its first row's top and its row count.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneBox {
    pub lane: usize,
    pub rank: usize,
    pub kind: LaneKind,
    pub label: String,
    pub top: f64,
    pub rows: usize,
}

impl LaneBox {
    pub fn height(&self) -> f64 {
        self.rows as f64 * ROW_HEIGHT
    }

    fn row_top(&self, row: usize) -> f64 {
        self.top + row as f64 * ROW_HEIGHT
    }
}

/// The vertical layout: a heading per rank, then its lanes, each as tall as its rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Layout {
    pub lanes: Vec<LaneBox>,
    /// Each rank's heading: the rank and the heading's baseline.
    pub headings: Vec<(usize, f64)>,
    pub height: f64,
}

impl Layout {
    pub fn new(timeline: &Timeline) -> Layout {
        let mut layout = Layout::default();
        let mut y = AXIS_HEIGHT;
        for (lane, l) in timeline.lanes().iter().enumerate() {
            if layout.headings.last().is_none_or(|(rank, _)| *rank != l.rank) {
                layout.headings.push((l.rank, y + RANK_HEADING - 5.0));
                y += RANK_HEADING;
            }
            let rows = l.rows.len().max(1);
            layout.lanes.push(LaneBox { lane, rank: l.rank, kind: l.kind, label: l.label.clone(), top: y, rows });
            y += rows as f64 * ROW_HEIGHT + LANE_GAP;
        }
        layout.height = y + LANE_GAP;
        layout
    }

    /// The lane and row at height `y`, if any.
    pub fn hit(&self, y: f64) -> Option<(usize, usize)> {
        let lane = self.lanes.iter().find(|l| y >= l.top && y < l.top + l.height())?;
        Some((lane.lane, ((y - lane.top) / ROW_HEIGHT) as usize))
    }
}

/// A range drawn as its own rectangle (ranges are few), with its name for tests and styles.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeRect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub name: String,
    pub class: &'static str,
}

/// A name written inside a wide bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub x: f64,
    pub y: f64,
    pub text: String,
}

/// One lane's shapes: its ranges as rectangles, its ops as one path per colour.
#[derive(Debug, Clone, PartialEq)]
pub struct LanePicture {
    pub lane: LaneBox,
    pub ranges: Vec<RangeRect>,
    /// `(class, path)`: every op bar of one colour in one path, so thousands of bars are a
    /// handful of elements.
    pub paths: Vec<(String, String)>,
    pub labels: Vec<Label>,
    /// How many bars it draws.
    pub bars: usize,
}

/// The shapes of `bars` (those of `window`) laid out by `layout`.
pub fn picture(timeline: &Timeline, layout: &Layout, window: Window, bars: &[Bar]) -> Vec<LanePicture> {
    let mut lanes: Vec<LanePicture> = layout
        .lanes
        .iter()
        .map(|l| LanePicture { lane: l.clone(), ranges: Vec::new(), paths: Vec::new(), labels: Vec::new(), bars: 0 })
        .collect();
    for bar in bars {
        let Some(lane) = lanes.get_mut(bar.lane) else { continue };
        lane.bars += 1;
        let x = x_of(window, bar.start);
        let width = (x_of(window, bar.end) - x).max(1.0);
        let y = lane.lane.row_top(bar.row) + 1.0;
        let name = timeline.name(bar.name());
        let merged = matches!(bar.kind, BarKind::Merged { .. });
        if lane.lane.kind == LaneKind::Ranges {
            lane.ranges.push(RangeRect { x, y, width, name: name.to_owned(), class: range_class(name) });
        } else {
            let class = if merged { "merged".to_owned() } else { op_class(name) };
            let d = match lane.paths.iter_mut().find(|(c, _)| *c == class) {
                Some((_, d)) => d,
                None => {
                    lane.paths.push((class, String::new()));
                    &mut lane.paths.last_mut().expect("just pushed").1
                }
            };
            let _ = write!(d, "M{x:.1} {y:.1}h{width:.1}v{BAR_HEIGHT:.1}h{:.1}z", -width);
        }
        if !merged && width >= LABELLED_WIDTH {
            lane.labels.push(Label { x: x + 2.0, y: y + ROW_HEIGHT - 4.0, text: fit(name, width - 4.0) });
        }
    }
    lanes
}

/// `text` cut to about `width` SVG units, with `…` when cut.
pub fn fit(text: &str, width: f64) -> String {
    let room = (width / CHAR_WIDTH).floor().max(1.0) as usize;
    match text.chars().count() <= room {
        true => text.to_owned(),
        false => text.chars().take(room.saturating_sub(1)).chain(['…']).collect(),
    }
}

/// The time axis: each tick's x and label.
pub fn ticks(window: Window) -> Vec<(f64, String)> {
    micros_ticks(window, 8).into_iter().map(|(t, label)| (x_of(window, t), label)).collect()
}

/// What the pointer at `(x, y)` (SVG units) is over, in words: the op or range, its duration
/// and its lane; or, for a merged bar, how many events it holds.
pub fn describe_at(timeline: &Timeline, layout: &Layout, window: Window, bars: &[Bar], x: f64, y: f64) -> Option<String> {
    let (lane, row) = layout.hit(y)?;
    if x < LABEL_WIDTH {
        return None;
    }
    let per_unit = window.width() / plot_width();
    let bar = bar_at(bars, lane, row, window.at(fraction_at(x)), POINTER_SLACK * per_unit)?;
    let place = layout.lanes.get(lane).map(|l| format!("rank {} · {}", l.rank, l.label)).unwrap_or_default();
    let name = timeline.name(bar.name());
    Some(match bar.kind {
        BarKind::Event { duration, .. } => format!("{name} — {} — {place}", format_micros(duration)),
        BarKind::Merged { count, busy, .. } => {
            format!(
                "{count} ops too short to draw one by one (longest: {name}), {} in all — {place}; zoom in to see them",
                format_micros(busy)
            )
        }
    })
}

/// The window that shows the bar at `(x, y)` whole, with a little room around it.
pub fn window_of_bar_at(layout: &Layout, window: Window, bars: &[Bar], x: f64, y: f64) -> Option<Window> {
    let (lane, row) = layout.hit(y)?;
    let per_unit = window.width() / plot_width();
    let bar = bar_at(bars, lane, row, window.at(fraction_at(x)), POINTER_SLACK * per_unit)?;
    let margin = (bar.end - bar.start) * 0.05;
    Some(Window::new(bar.start - margin, bar.end + margin))
}

#[cfg(test)]
mod tests {
    use scalebook_shared::profile::trace::{Trace, bars};

    use super::*;

    fn timeline() -> Timeline {
        let events = r#"[
            {"ph":"X","cat":"user_annotation","name":"step 1","pid":1,"tid":1,"ts":0,"dur":1000},
            {"ph":"X","cat":"user_annotation","name":"forward","pid":1,"tid":1,"ts":0,"dur":400},
            {"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":10,"dur":300},
            {"ph":"X","cat":"cpu_op","name":"aten::addmm","pid":1,"tid":1,"ts":20,"dur":250},
            {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":600,"dur":0.01},
            {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":600.02,"dur":0.01}
        ]"#;
        Timeline::new([(0, Trace::parse(events).unwrap()), (1, Trace::parse(events).unwrap())])
    }

    #[test]
    fn the_excerpts_asked_for_are_twice_the_plots_pixels() {
        assert_eq!(scalebook_shared::profile::trace::EXCERPT_PIXELS, 2 * plot_pixels());
    }

    #[test]
    fn ranks_get_a_heading_and_lanes_stack_by_their_rows() {
        let timeline = timeline();
        let layout = Layout::new(&timeline);
        assert_eq!(layout.headings.len(), 2);
        let shape: Vec<(usize, LaneKind, usize)> = layout.lanes.iter().map(|l| (l.rank, l.kind, l.rows)).collect();
        assert_eq!(shape, [(0, LaneKind::Ranges, 2), (0, LaneKind::Thread, 2), (1, LaneKind::Ranges, 2), (1, LaneKind::Thread, 2)]);
        let ops = &layout.lanes[1];
        assert_eq!(layout.hit(ops.top + ROW_HEIGHT * 1.5), Some((1, 1)));
        assert_eq!(layout.hit(0.0), None);
        assert!(layout.lanes[3].top + layout.lanes[3].height() < layout.height);
    }

    #[test]
    fn ranges_are_rectangles_ops_are_paths_by_colour() {
        let timeline = timeline();
        let layout = Layout::new(&timeline);
        let window = timeline.bounds();
        let drawn = bars(&timeline, window, plot_pixels());
        let lanes = picture(&timeline, &layout, window, &drawn);
        let ranges: Vec<(&str, &str)> = lanes[0].ranges.iter().map(|r| (r.name.as_str(), r.class)).collect();
        assert_eq!(ranges, [("step 1", "range-step"), ("forward", "range-forward")]);
        assert!(lanes[1].paths.iter().all(|(class, d)| (class.starts_with("op-") || class == "merged") && d.starts_with('M')));
        assert!(lanes[1].paths.iter().any(|(class, _)| class == "merged"), "{:?}", lanes[1].paths);
        assert!(lanes[1].labels.iter().any(|l| l.text == "aten::linear"), "{:?}", lanes[1].labels);
        assert_eq!(lanes[1].bars, 3);
        // The two tiny adds are one merged bar, and the pointer on it says so.
        let (x, y) = (x_of(window, 600.0), layout.lanes[1].top + 2.0);
        let said = describe_at(&timeline, &layout, window, &drawn, x, y).unwrap();
        assert!(said.contains("2 ops") && said.contains("aten::add") && said.contains("rank 0"), "{said}");
        let said = describe_at(&timeline, &layout, window, &drawn, x_of(window, 100.0), y + ROW_HEIGHT).unwrap();
        assert_eq!(said, "aten::addmm — 250 µs — rank 0 · thread 1");
        assert_eq!(describe_at(&timeline, &layout, window, &drawn, 5.0, y), None);
        let zoomed = window_of_bar_at(&layout, window, &drawn, x_of(window, 100.0), y + ROW_HEIGHT).unwrap();
        assert!(zoomed.start < 20.0 && zoomed.end > 270.0 && zoomed.width() < 300.0, "{zoomed:?}");
    }

    #[test]
    fn the_pointer_maps_to_the_drawing_and_drags_and_wheels_move_the_window() {
        // A picture drawn at half its size, 20 px from the left and 10 from the top.
        assert_eq!(to_drawing((20.0 + WIDTH / 4.0, 10.0 + 25.0), (20.0, 10.0), (WIDTH / 2.0, 50.0), 100.0), (WIDTH / 2.0, 50.0));
        assert_eq!(to_drawing((5.0, 5.0), (0.0, 0.0), (0.0, 0.0), 100.0), (5.0 * WIDTH, 500.0), "a box of no size");
        assert_eq!(wheel_factor(100.0), WHEEL_ZOOM);
        assert!(wheel_factor(-100.0) < 1.0 && wheel_factor(0.0) == 1.0);
        let bounds = Window::new(0.0, 1000.0);
        let start = Window::new(200.0, 400.0);
        let left = dragged(start, LABEL_WIDTH + plot_width() / 2.0, LABEL_WIDTH, bounds);
        assert!((left.start - 300.0).abs() < 1e-9 && (left.end - 500.0).abs() < 1e-9, "{left:?}");
        assert_eq!(dragged(start, LABEL_WIDTH, WIDTH, bounds).start, 0.0, "kept within the trace");
        assert_eq!(
            window_line(start, bounds),
            format!("{} to {} of {}", format_micros(200.0), format_micros(400.0), format_micros(1000.0))
        );
    }

    #[test]
    fn labels_fit_their_bars_and_classes_are_stable() {
        assert_eq!(fit("aten::linear", 100.0), "aten::linear");
        assert_eq!(fit("aten::linear", 30.0), "aten…");
        assert_eq!(range_class("c10d::all_reduce"), "range-collective");
        assert_eq!(range_class("ProfilerStep#3"), "range-step");
        assert_eq!(range_class("my mark"), "range-other");
        assert_eq!(op_class("aten::mm"), op_class("aten::mm"));
        assert!(LEGEND.iter().all(|(class, name)| range_class(name) == *class));
    }
}
