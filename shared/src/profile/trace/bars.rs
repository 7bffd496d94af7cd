//! What a window of the timeline draws at a given width. An event at least a pixel wide is a
//! bar of its own; runs of narrower events in neighbouring pixel columns of one row merge
//! into one bar that says how many events it stands for. So the shapes drawn per row are
//! bounded by the width in pixels, not by the trace's length, and zooming in turns merged
//! bars back into the events they hold.

use super::timeline::{NameId, Row, Timeline};
use super::window::Window;

/// What one bar stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BarKind {
    /// One event: its name and whole duration (the bar itself is cut to the window).
    Event { name: NameId, duration: f64 },
    /// Events too narrow to draw one by one: how many, their summed duration, and the name of
    /// the longest (what a hover names).
    Merged { count: usize, busy: f64, longest: NameId },
}

/// A bar of lane `lane`, row `row` (nesting depth), over `[start, end]` (µs, inside the
/// window).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub lane: usize,
    pub row: usize,
    pub start: f64,
    pub end: f64,
    pub kind: BarKind,
}

impl Bar {
    /// How many events it stands for.
    pub fn count(&self) -> usize {
        match self.kind {
            BarKind::Event { .. } => 1,
            BarKind::Merged { count, .. } => count,
        }
    }

    /// The name shown for it: the event's, or that of the longest event merged into it.
    pub fn name(&self) -> NameId {
        match self.kind {
            BarKind::Event { name, .. } => name,
            BarKind::Merged { longest, .. } => longest,
        }
    }
}

/// The bars of every lane and row of `timeline` in `window`, for a drawing `pixels` wide;
/// ordered by lane, row, then start.
pub fn bars(timeline: &Timeline, window: Window, pixels: u32) -> Vec<Bar> {
    let per_pixel = window.width() / f64::from(pixels.max(1));
    let mut out = Vec::new();
    for (lane, l) in timeline.lanes().iter().enumerate() {
        for (row, r) in l.rows.iter().enumerate() {
            row_bars(r, window, per_pixel, &mut |start, end, kind| out.push(Bar { lane, row, start, end, kind }));
        }
    }
    out
}

/// Events being merged: the bar so far, the longest event's duration, the last column.
struct Merging {
    start: f64,
    end: f64,
    count: usize,
    busy: f64,
    longest: (NameId, f64),
    column: f64,
}

fn row_bars(row: &Row, window: Window, per_pixel: f64, emit: &mut impl FnMut(f64, f64, BarKind)) {
    let mut merging: Option<Merging> = None;
    for span in row.overlapping(window.start, window.end) {
        let (start, end, duration, name) = (span.start.max(window.start), span.end.min(window.end), span.duration(), span.name);
        if duration >= per_pixel {
            flush(&mut merging, emit);
            emit(start, end, BarKind::Event { name, duration });
            continue;
        }
        let column = ((span.start - window.start) / per_pixel).floor();
        match &mut merging {
            Some(m) if column <= m.column + 1.0 => {
                m.end = m.end.max(end);
                m.count += 1;
                m.busy += duration;
                m.column = m.column.max(column);
                if duration > m.longest.1 {
                    m.longest = (name, duration);
                }
            }
            _ => {
                flush(&mut merging, emit);
                merging = Some(Merging { start, end, count: 1, busy: duration, longest: (name, duration), column });
            }
        }
    }
    flush(&mut merging, emit);
}

/// Emits the bar being merged, if any; a bar of one event is that event.
fn flush(merging: &mut Option<Merging>, emit: &mut impl FnMut(f64, f64, BarKind)) {
    if let Some(m) = merging.take() {
        let kind = match m.count {
            1 => BarKind::Event { name: m.longest.0, duration: m.longest.1 },
            count => BarKind::Merged { count, busy: m.busy, longest: m.longest.0 },
        };
        emit(m.start, m.end, kind);
    }
}

/// The bar of lane `lane`, row `row` under time `t`, or failing that the nearest one within
/// `slack` µs (a thin bar is hard to point at).
pub fn bar_at(bars: &[Bar], lane: usize, row: usize, t: f64, slack: f64) -> Option<&Bar> {
    let distance = |b: &Bar| (b.start - t).max(t - b.end).max(0.0);
    bars.iter()
        .filter(|b| b.lane == lane && b.row == row)
        .map(|b| (distance(b), b))
        .filter(|(d, _)| *d <= slack)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, b)| b)
}

#[cfg(test)]
mod tests {
    use super::super::Trace;
    use super::*;

    /// A trace of `n` events of 10 µs every 100 µs on one thread, every tenth 5 ms long.
    fn busy_trace(n: usize) -> Timeline {
        let events: Vec<String> = (0..n)
            .map(|i| {
                let dur = if i % 10 == 0 { 5000 } else { 10 };
                format!(r#"{{"ph":"X","cat":"cpu_op","name":"op{}","pid":1,"tid":1,"ts":{},"dur":{dur}}}"#, i % 7, i * 100)
            })
            .collect();
        Timeline::new([(0, Trace::parse(&format!("[{}]", events.join(","))).unwrap())])
    }

    fn events_in(timeline: &Timeline, window: Window) -> usize {
        timeline.lanes().iter().flat_map(|l| &l.rows).map(|r| r.overlapping(window.start, window.end).count()).sum()
    }

    #[test]
    fn a_hundred_thousand_events_draw_as_a_few_thousand_bars() {
        let timeline = busy_trace(100_000);
        let pixels = 1000;
        let whole = timeline.bounds();
        let drawn = bars(&timeline, whole, pixels);
        let rows: usize = timeline.lanes().iter().map(|l| l.rows.len()).sum();
        assert!(drawn.len() <= 2 * pixels as usize * rows, "{} bars", drawn.len());
        // Nothing is lost: every event is in exactly one bar.
        assert_eq!(drawn.iter().map(Bar::count).sum::<usize>(), events_in(&timeline, whole));
        // Zoomed into a millisecond, the events are drawn one by one, with their names.
        let close = Window::new(50_000.0, 51_000.0);
        let drawn = bars(&timeline, close, pixels);
        assert!(drawn.iter().all(|b| matches!(b.kind, BarKind::Event { .. })));
        assert_eq!(drawn.len(), events_in(&timeline, close));
        assert!(drawn.iter().all(|b| b.start >= close.start && b.end <= close.end));
    }

    #[test]
    fn merged_bars_name_their_longest_event_and_a_lone_one_stays_itself() {
        let events = r#"[
            {"ph":"X","name":"tiny","pid":1,"tid":1,"ts":0,"dur":1},
            {"ph":"X","name":"small","pid":1,"tid":1,"ts":2,"dur":3},
            {"ph":"X","name":"wide","pid":1,"tid":1,"ts":100,"dur":800},
            {"ph":"X","name":"alone","pid":1,"tid":1,"ts":990,"dur":1}
        ]"#;
        let timeline = Timeline::new([(0, Trace::parse(events).unwrap())]);
        let drawn = bars(&timeline, timeline.bounds(), 100);
        let shown: Vec<(&str, usize)> = drawn.iter().map(|b| (timeline.name(b.name()), b.count())).collect();
        assert_eq!(shown, [("small", 2), ("wide", 1), ("alone", 1)]);
        assert_eq!(drawn[0].kind, BarKind::Merged { count: 2, busy: 4.0, longest: drawn[0].name() });
        assert_eq!(drawn[2].kind, BarKind::Event { name: drawn[2].name(), duration: 1.0 });
        assert_eq!(bar_at(&drawn, 0, 0, 500.0, 0.0).map(|b| timeline.name(b.name())), Some("wide"));
        assert_eq!(bar_at(&drawn, 0, 0, 950.0, 50.0).map(|b| timeline.name(b.name())), Some("alone"));
        assert_eq!(bar_at(&drawn, 0, 0, 950.0, 5.0), None);
        assert_eq!(bar_at(&drawn, 0, 1, 500.0, 5.0), None);
    }

    #[test]
    fn odd_widths_draw_without_panicking() {
        let timeline = busy_trace(50);
        for pixels in [0, 1, u32::MAX] {
            let drawn = bars(&timeline, timeline.bounds(), pixels);
            assert_eq!(drawn.iter().map(Bar::count).sum::<usize>(), events_in(&timeline, timeline.bounds()));
        }
        assert!(bars(&Timeline::default(), Window::new(0.0, 1.0), 100).is_empty());
    }
}
