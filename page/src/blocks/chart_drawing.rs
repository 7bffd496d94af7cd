//! One chart's picture computed from its series: scales fitted to every visible curve, each
//! curve folded to at most one sample per pixel column (`shared::charts`), its raw, smoothed
//! and spread paths, and the axis ticks. Pure, so it is tested without a page.

use std::fmt::Write as _;

use scalebook_shared::charts::{
    Sample, Scale, XAxis, format_clock, format_duration, format_number, format_tick, linear_ticks, log_ticks, per_pixel, samples,
    time_ticks,
};
use scalebook_shared::protocol::{Series, series};
use scalebook_shared::tfevents;

/// The chart's size in SVG units and the plot area inside it.
pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 240.0;
pub const LEFT: f64 = 58.0;
pub const RIGHT: f64 = 14.0;
pub const TOP: f64 = 10.0;
pub const BOTTOM: f64 = 36.0;
const TICKS: usize = 6;

pub fn plot_width() -> f64 {
    WIDTH - LEFT - RIGHT
}

fn plot_height() -> f64 {
    HEIGHT - TOP - BOTTOM
}

/// Series with fewer points than this are never smoothed.
pub const MIN_POINTS_SMOOTHED: usize = 16;

/// One run (or the baseline, or a dropped event file) as a chart may draw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The run id, `baseline`, or a dropped file's [`Overlay::key`].
    pub key: String,
    pub label: String,
    pub colour: &'static str,
    pub dashed: bool,
    /// Where its relative time starts.
    pub start_wall: f64,
    /// Whether it has a wall-clock time (the baseline's curve is drawn from its start).
    pub has_wall_time: bool,
    pub series: Vec<Series>,
}

/// A TensorBoard event file dropped on a chart block: its scalars, drawn beside the runs on
/// that page only.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlay {
    /// The file's name, which names its curves.
    pub name: String,
    pub series: Vec<Series>,
}

/// Buckets kept per tag of a dropped file: a chart draws one sample per pixel column anyway.
const OVERLAY_BUCKETS: usize = 2_000;

impl Overlay {
    /// Reads a dropped file with the shared event-file reader; the error is the message the
    /// block shows (the file's name, the byte and the rule).
    pub fn read(name: &str, bytes: &[u8]) -> Result<Overlay, String> {
        let contents = tfevents::read(bytes, 0).map_err(|e| format!("{name}: {e}"))?;
        let points = contents.points();
        if points.is_empty() {
            return Err(format!("{name}: no scalars to chart in this event file"));
        }
        Ok(Overlay { name: name.to_owned(), series: series(&points, OVERLAY_BUCKETS) })
    }

    /// Its key among the chart's sources (never a run id: those have no `:`).
    pub fn key(&self) -> String {
        format!("file:{}", self.name)
    }
}

/// How every chart of a block is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub axis: XAxis,
    pub smoothing: f64,
    pub log: bool,
    /// Minutes east of UTC, for wall-clock labels.
    pub utc_offset_minutes: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub key: String,
    pub label: String,
    pub colour: &'static str,
    pub dashed: bool,
    /// The points it stands for (before folding to pixels).
    pub points: usize,
    /// What is drawn: at most one sample per pixel column.
    pub drawn: Vec<Sample>,
    pub smoothed: String,
    pub raw: String,
    /// Vertical strokes where a column's values spread (spikes folded into it).
    pub spread: String,
    /// A small triangle on the plot's top edge over each column that holds a NaN or an
    /// infinite value, as TensorBoard marks them (the line itself breaks there).
    pub non_finite: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Drawing {
    pub x: Option<Scale>,
    pub y: Option<Scale>,
    pub lines: Vec<Line>,
    /// Tick positions in SVG units with their labels.
    pub x_ticks: Vec<(f64, String)>,
    pub y_ticks: Vec<(f64, String)>,
}

impl Drawing {
    /// The chart of `tag` over `sources`.
    pub fn build(tag: &str, sources: &[Source], settings: Settings) -> Drawing {
        let curves: Vec<(&Source, Vec<Sample>, usize)> = sources
            .iter()
            .filter(|s| s.has_wall_time || settings.axis != XAxis::Wall)
            .filter_map(|source| {
                let series = source.series.iter().find(|s| s.tag == tag)?;
                // A few points (a short run's per-epoch validation) are drawn as they are: the
                // moving average would still be catching up at the last one, far from the value
                // the log prints.
                let weight = if series.buckets.len() < MIN_POINTS_SMOOTHED { 0.0 } else { settings.smoothing };
                let all = samples(&series.buckets, settings.axis, source.start_wall, weight);
                Some((source, all, series.buckets.len()))
            })
            .collect();
        let xs = curves.iter().flat_map(|(_, all, _)| all.iter().map(|s| s.x));
        let ys = curves.iter().flat_map(|(_, all, _)| all.iter().flat_map(|s| [s.min, s.max, s.smoothed]));
        let (Some(x), Some(y)) = (Scale::fit(xs, false), Scale::fit(ys, settings.log)) else {
            return Drawing::default();
        };
        let y = y.padded(0.05);
        let columns = plot_width().round() as u32;
        let lines = curves
            .into_iter()
            .map(|(source, all, points)| {
                let drawn = per_pixel(&all, &x, columns);
                Line {
                    key: source.key.clone(),
                    label: source.label.clone(),
                    colour: source.colour,
                    dashed: source.dashed,
                    points,
                    smoothed: polyline(&drawn, &x, &y, |s| s.smoothed),
                    raw: polyline(&drawn, &x, &y, |s| s.value),
                    spread: spread(&drawn, &x, &y),
                    non_finite: non_finite_marks(&drawn, &x),
                    drawn,
                }
            })
            .collect();
        Drawing { x_ticks: x_ticks(&x, settings), y_ticks: y_ticks(&y), x: Some(x), y: Some(y), lines }
    }

    /// For a pointer at `px` (SVG units): each line's sample nearest to it on the x axis.
    pub fn nearest(&self, px: f64) -> Vec<(&Line, Sample)> {
        let Some(x) = self.x else { return Vec::new() };
        let at = x.value_at((px - LEFT) / plot_width());
        self.lines
            .iter()
            .filter_map(|line| {
                let nearest = line.drawn.iter().min_by(|a, b| (a.x - at).abs().total_cmp(&(b.x - at).abs()))?;
                Some((line, *nearest))
            })
            .collect()
    }
}

pub fn x_position(x: &Scale, value: f64) -> Option<f64> {
    x.unit(value).map(|u| LEFT + u * plot_width())
}

fn y_position(y: &Scale, value: f64) -> Option<f64> {
    y.unit(value).map(|u| TOP + (1.0 - u) * plot_height())
}

/// A path through `value` of every sample, broken where a value cannot be drawn.
fn polyline(drawn: &[Sample], x: &Scale, y: &Scale, value: impl Fn(&Sample) -> f64) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for s in drawn {
        match (x_position(x, s.x), y_position(y, value(s))) {
            (Some(px), Some(py)) => {
                let _ = write!(d, "{}{px:.1} {py:.1}", if pen_down { "L" } else { "M" });
                pen_down = true;
            }
            _ => pen_down = false,
        }
    }
    d
}

fn spread(drawn: &[Sample], x: &Scale, y: &Scale) -> String {
    let mut d = String::new();
    for s in drawn.iter().filter(|s| s.max > s.min) {
        if let (Some(px), Some(low), Some(high)) = (x_position(x, s.x), y_position(y, s.min), y_position(y, s.max)) {
            let _ = write!(d, "M{px:.1} {low:.1}V{high:.1}");
        }
    }
    d
}

fn non_finite_marks(drawn: &[Sample], x: &Scale) -> String {
    let mut d = String::new();
    for px in drawn.iter().filter(|s| s.non_finite).filter_map(|s| x_position(x, s.x)) {
        let _ = write!(d, "M{px:.1} {:.1}l-4 -7h8z", TOP + 8.0);
    }
    d
}

fn x_ticks(x: &Scale, settings: Settings) -> Vec<(f64, String)> {
    let offset = f64::from(settings.utc_offset_minutes) * 60.0;
    let (ticks, step) = match settings.axis {
        XAxis::Step => linear_ticks(x.lo(), x.hi(), TICKS),
        XAxis::Relative => time_ticks(x.lo(), x.hi(), TICKS, 0.0),
        XAxis::Wall => time_ticks(x.lo(), x.hi(), TICKS, offset),
    };
    let label = |t: f64| match settings.axis {
        XAxis::Step => format_tick(t, step),
        XAxis::Relative => format_duration(t),
        XAxis::Wall => format_clock(t, settings.utc_offset_minutes),
    };
    ticks.into_iter().filter_map(|t| Some((x_position(x, t)?, label(t)))).collect()
}

fn y_ticks(y: &Scale) -> Vec<(f64, String)> {
    if y.is_log() {
        log_ticks(y.lo(), y.hi(), TICKS).into_iter().filter_map(|t| Some((y_position(y, t)?, format_number(t)))).collect()
    } else {
        let (ticks, step) = linear_ticks(y.lo(), y.hi(), TICKS);
        ticks.into_iter().filter_map(|t| Some((y_position(y, t)?, format_tick(t, step)))).collect()
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::charts::parse_baseline_events;
    use scalebook_shared::protocol::Bucket;

    use super::*;

    const BASELINE: &[u8] = include_bytes!("../../shipped/baseline-base-1gpu.tfevents");

    fn settings(axis: XAxis) -> Settings {
        Settings { axis, smoothing: 0.0, log: false, utc_offset_minutes: 0 }
    }

    fn run(key: &str, values: &[f64]) -> Source {
        let buckets = values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let wall = 1000.0 + 10.0 * i as f64;
                Bucket {
                    first_step: i as u64,
                    last_step: i as u64,
                    first_wall: wall,
                    last_wall: wall,
                    epoch: 1,
                    min: v,
                    max: v,
                    last: v,
                    count: 1,
                    non_finite: u32::from(!v.is_finite()),
                }
            })
            .collect();
        Source {
            key: key.into(),
            label: key.into(),
            colour: "#000",
            dashed: false,
            start_wall: 1000.0,
            has_wall_time: true,
            series: vec![Series { tag: "Loss/train".into(), buckets }],
        }
    }

    #[test]
    fn a_series_of_a_few_points_ends_where_the_log_does_however_smooth_the_chart() {
        // A short run's validation loss, one point an epoch: TensorBoard's 0.6 would end it
        // near 0.52 where the log says 0.464.
        let epochs = run("a", &[0.9, 0.62, 0.53, 0.49, 0.464]);
        let smooth = Settings { smoothing: 0.6, ..settings(XAxis::Step) };
        let drawing = Drawing::build("Loss/train", std::slice::from_ref(&epochs), smooth);
        assert!(drawing.lines[0].drawn.iter().all(|s| s.smoothed == s.value), "{:?}", drawing.lines[0].drawn);
        // A long one is smoothed as asked.
        let values: Vec<f64> = (0..MIN_POINTS_SMOOTHED).map(|i| if i % 2 == 0 { 1.0 } else { 0.0 }).collect();
        let drawing = Drawing::build("Loss/train", &[run("b", &values)], smooth);
        assert!(drawing.lines[0].drawn.iter().any(|s| s.smoothed != s.value));
    }

    #[test]
    fn every_curve_of_the_tag_is_drawn_inside_the_plot() {
        let sources = [run("a", &[1.0, 0.5, 0.25]), run("b", &[2.0, 1.0])];
        let drawing = Drawing::build("Loss/train", &sources, settings(XAxis::Step));
        assert_eq!(drawing.lines.len(), 2);
        assert_eq!(drawing.lines[0].points, 3);
        assert_eq!(drawing.lines[0].smoothed.matches(['M', 'L']).count(), 3);
        for line in &drawing.lines {
            for s in &line.drawn {
                let px = x_position(drawing.x.as_ref().unwrap(), s.x).unwrap();
                assert!((LEFT..=WIDTH - RIGHT).contains(&px));
            }
        }
        assert!(Drawing::build("Loss/valid", &sources, settings(XAxis::Step)).lines.is_empty());
    }

    #[test]
    fn the_baseline_has_no_wall_clock_but_has_relative_time() {
        let mut baseline = run("baseline", &[]);
        baseline.series = parse_baseline_events(BASELINE).unwrap();
        baseline.has_wall_time = false;
        baseline.start_wall = 0.0;
        let relative = Drawing::build("Loss/valid", std::slice::from_ref(&baseline), settings(XAxis::Relative));
        assert_eq!(relative.lines[0].points, 11);
        assert!((relative.x.unwrap().hi() - 22.16 * 3600.0).abs() < 1e-6);
        assert!(relative.x_ticks.iter().any(|(_, label)| label == "6h 00m"), "{:?}", relative.x_ticks);
        assert!(Drawing::build("Loss/valid", &[baseline], settings(XAxis::Wall)).lines.is_empty());
    }

    #[test]
    fn a_dropped_event_file_becomes_series_and_anything_else_a_message() {
        let overlay = Overlay::read("events.out.tfevents.1.base.0", BASELINE).unwrap();
        assert_eq!(overlay.key(), "file:events.out.tfevents.1.base.0");
        let valid = overlay.series.iter().find(|s| s.tag == "Loss/valid").unwrap();
        assert_eq!(valid.buckets.len(), 11);
        assert_eq!(valid.buckets[10].last, 0.120845);
        let err = Overlay::read("notes.csv", b"step,value\n1,2\n").unwrap_err();
        assert!(err.starts_with("notes.csv: byte 0: ") && err.contains("not a TensorBoard event file"), "{err}");
        let err = Overlay::read("empty", b"").unwrap_err();
        assert_eq!(err, "empty: no scalars to chart in this event file");
    }

    #[test]
    fn a_non_finite_value_breaks_the_line_and_is_marked() {
        let drawing = Drawing::build("Loss/train", &[run("a", &[1.0, f64::NAN, 0.5, f64::INFINITY, 0.4])], settings(XAxis::Step));
        let line = &drawing.lines[0];
        assert_eq!(line.raw.matches('M').count(), 3, "{}", line.raw);
        assert_eq!(line.non_finite.matches('M').count(), 2, "{}", line.non_finite);
        let finite = Drawing::build("Loss/train", &[run("a", &[1.0, 0.5])], settings(XAxis::Step));
        assert!(finite.lines[0].non_finite.is_empty());
    }

    #[test]
    fn log_scale_ticks_are_decades_and_the_pointer_finds_the_nearest_sample() {
        let mut s = settings(XAxis::Step);
        s.log = true;
        let drawing = Drawing::build("Loss/train", &[run("a", &[1.0, 0.1, 0.01])], s);
        let labels: Vec<&str> = drawing.y_ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert!(labels.contains(&"0.1") && labels.contains(&"0.01"), "{labels:?}");
        let px = x_position(drawing.x.as_ref().unwrap(), 2.0).unwrap();
        let nearest = drawing.nearest(px - 3.0);
        assert_eq!(nearest[0].1.step, 2);
    }
}
