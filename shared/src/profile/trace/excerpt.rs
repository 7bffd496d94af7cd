//! The part of a trace a timeline shows at the width it is drawn: what the server sends
//! instead of a trace of hundreds of MB, read from the file as a stream.
//!
//! An excerpt holds the whole trace at the resolution of `pixels` columns, and the window
//! being looked at (if any) at `pixels` columns of its own: an event at least a column wide
//! is kept as it is, and the events narrower than a column are merged, per thread and column,
//! into one event spanning them ("gemm ×40", or "40 events" when their names differ). Its
//! first and last instants are the trace's own, so a timeline built from it lines up with one
//! built from any other excerpt of the same trace, and zooming swaps one for another. Its size
//! is bounded by the pixels, not by the file: a few columns' worth of events per thread and
//! nesting depth.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io;

use super::compact::Compact;
use super::read::{Event, stream_events};
use super::{RANGE_CATEGORY, Trace, Window};
use crate::Error;

/// Columns an excerpt is asked for, at most: twice a wide screen's pixels.
pub const MAX_PIXELS: u32 = 8_192;
/// Columns the page asks for: twice its timeline's plot (760 pixels), so that edges stay
/// sharp on a dense screen. The server keeps each trace's whole excerpt at this width.
pub const EXCERPT_PIXELS: u32 = 1_520;

/// What a timeline asks of a trace, in the file's own clock (µs, as its `ts` are).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExcerptOf {
    /// The trace's first and last instants (its summary's `span_us`).
    pub whole: Window,
    /// The part looked at, drawn at full detail; `None` for the whole trace alone.
    pub window: Option<Window>,
    /// Columns each of the two is drawn at (at most [`MAX_PIXELS`]).
    pub pixels: u32,
}

/// Which column of which scale an event merges into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Column {
    thread: usize,
    range: bool,
    /// 0: the whole trace's scale, before the window; 1: the window's; 2: the whole trace's,
    /// after the window (kept apart, so no merged event spans the window).
    scale: u8,
    index: i64,
}

/// Events merged into one column.
struct Merged {
    start: f64,
    end: f64,
    count: u64,
    name: String,
    category: String,
    same_name: bool,
    same_category: bool,
}

impl ExcerptOf {
    /// Reads the excerpt from a trace `reader` holds, in one pass.
    pub fn read(&self, reader: impl io::Read) -> Result<Trace, Error> {
        let mut columns = Columns::new(self);
        let streamed = stream_events(reader, |event| columns.add(event))
            .map_err(|e| Error::Parse { what: "the trace".into(), message: e.to_string() })?;
        Ok(columns.finish(streamed))
    }

    /// Reads the excerpt from a trace's events written compactly ([`Compact`]).
    pub fn read_compact<R: io::Read + io::Seek>(&self, compact: Compact<R>) -> Result<Trace, Error> {
        let mut columns = Columns::new(self);
        let streamed = compact
            .events(|event| columns.add(event))
            .map_err(|e| Error::Parse { what: "the trace's compact events".into(), message: e.to_string() })?;
        Ok(columns.finish(streamed))
    }
}

/// An excerpt being made: the events kept as they are, and the columns others merge into.
struct Columns<'a> {
    of: &'a ExcerptOf,
    /// A column's width in the whole trace, and in the window.
    coarse: f64,
    fine: Option<f64>,
    kept: Vec<Event>,
    merged: HashMap<Column, Merged>,
    /// The columns in the order they were opened.
    opened: Vec<Column>,
}

impl<'a> Columns<'a> {
    fn new(of: &'a ExcerptOf) -> Columns<'a> {
        let pixels = f64::from(of.pixels.clamp(1, MAX_PIXELS));
        let (coarse, fine) = (of.whole.width() / pixels, of.window.map(|w| w.width() / pixels));
        Columns { of, coarse, fine, kept: Vec::new(), merged: HashMap::new(), opened: Vec::new() }
    }

    fn add(&mut self, event: Event) {
        let (whole, window) = (self.of.whole, self.of.window);
        let (start, end) = (event.start, event.start + event.dur);
        let inside = window.is_some_and(|w| start < w.end && end > w.start);
        let width = match (inside, self.fine) {
            (true, Some(fine)) => fine,
            _ => self.coarse,
        };
        if event.dur >= width {
            self.kept.push(event);
            return;
        }
        let (scale, origin) = match window {
            Some(w) if inside => (1, w.start),
            Some(w) if start >= w.end => (2, whole.start),
            _ => (0, whole.start),
        };
        let index = ((start.max(origin) - origin) / width).floor() as i64;
        let column = Column { thread: event.thread, range: event.category == RANGE_CATEGORY, scale, index };
        // Cut at the column's edges so that merged neighbours never overlap (but not
        // before the trace's own end, which every excerpt keeps).
        let (from, to) = (origin + index as f64 * width, origin + (index + 1) as f64 * width);
        let to = if end >= whole.end { end } else { end.min(to) };
        add(&mut self.merged, &mut self.opened, column, event, (start.max(from), to));
    }

    /// The excerpt: `streamed` (the trace without its events) with the events kept and merged.
    fn finish(mut self, streamed: Trace) -> Trace {
        let mut trace = streamed;
        trace.events = self.kept;
        trace.events.extend(self.opened.into_iter().filter_map(|column| Some(self.merged.remove(&column)?.into_event(column.thread))));
        trace
    }
}

/// Adds `event`, cut to `span`, to its column, remembering the order columns were opened in.
fn add(merged: &mut HashMap<Column, Merged>, columns: &mut Vec<Column>, column: Column, event: Event, span: (f64, f64)) {
    match merged.entry(column) {
        Entry::Occupied(mut entry) => {
            let m = entry.get_mut();
            m.start = m.start.min(span.0);
            m.end = m.end.max(span.1);
            m.count += 1;
            m.same_name &= m.name == event.name;
            m.same_category &= m.category == event.category;
        }
        Entry::Vacant(entry) => {
            columns.push(column);
            let (name, category) = (event.name, event.category);
            entry.insert(Merged { start: span.0, end: span.1, count: 1, name, category, same_name: true, same_category: true });
        }
    }
}

impl Merged {
    fn into_event(self, thread: usize) -> Event {
        let name = match (self.count, self.same_name) {
            (1, _) => self.name,
            (n, true) => format!("{} ×{n}", self.name),
            (n, false) => format!("{n} events"),
        };
        let category = if self.same_category { self.category } else { String::new() };
        Event { thread, name, category, start: self.start, dur: (self.end - self.start).max(0.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::trace::Timeline;
    use crate::profile::trace::compact::CompactWriter;

    /// One step: a 1000 µs range over 1000 ops of 1 µs each (a pair a µs apart: `a`, `b`),
    /// from t = 100, and a kernel on a second thread from 500 to 600.
    fn trace_text() -> String {
        let mut events = vec![
            r#"{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}"#.to_owned(),
            r#"{"ph": "X", "cat": "user_annotation", "name": "step 0", "pid": 1, "tid": 1, "ts": 100, "dur": 1000}"#.to_owned(),
            r#"{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 500, "dur": 100}"#.to_owned(),
        ];
        for i in 0..1000 {
            let name = if i % 2 == 0 { "a" } else { "b" };
            events.push(format!(r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {}, "dur": 0.5}}"#, 100 + i));
        }
        format!(r#"{{"traceEvents": [{}], "baseTimeNanoseconds": 5000}}"#, events.join(",\n"))
    }

    fn names(trace: &Trace) -> Vec<(&str, f64, f64)> {
        let mut names: Vec<(&str, f64, f64)> = trace.events.iter().map(|e| (e.name.as_str(), e.start, e.dur)).collect();
        names.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
        names
    }

    #[test]
    fn the_whole_trace_keeps_what_a_column_shows_and_merges_the_rest() {
        let text = trace_text();
        let whole = Window::new(100.0, 1100.0);
        // Ten columns of 100 µs: the range and the kernel stay, each column's 100 ops merge.
        let excerpt = ExcerptOf { whole, window: None, pixels: 10 }.read(text.as_bytes()).unwrap();
        assert_eq!(excerpt.events.len(), 2 + 10);
        let shown = names(&excerpt);
        assert_eq!(shown[0], ("100 events", 100.0, 99.5));
        assert_eq!(shown[1], ("step 0", 100.0, 1000.0));
        assert!(shown.contains(&("gemm", 500.0, 100.0)));
        // Its threads and base time are the file's, so it reads back and lines up.
        assert_eq!(excerpt.threads, Trace::parse(&text).unwrap().threads);
        assert_eq!(excerpt.base_ns, Some(5000.0));
        assert_eq!(Trace::parse(&excerpt.to_json()).unwrap(), excerpt);
    }

    #[test]
    fn an_excerpt_of_the_compact_events_is_the_excerpt_of_the_trace() {
        let text = trace_text();
        let (mut writer, mut events) = (CompactWriter::new(Vec::new()), 0);
        let streamed = stream_events(text.as_bytes(), |event| {
            writer.push(&event);
            events += 1;
        })
        .unwrap();
        let compact = writer.finish(&streamed, "").unwrap();
        assert!(compact.len() < text.len() / 2, "{} bytes for {events} events", compact.len());
        let whole = Window::new(100.0, 1100.0);
        for window in [None, Some(Window::new(300.0, 310.0))] {
            let of = ExcerptOf { whole, window, pixels: 10 };
            let from_compact = of.read_compact(Compact::open(std::io::Cursor::new(compact.clone())).unwrap()).unwrap();
            assert_eq!(from_compact, of.read(text.as_bytes()).unwrap(), "{window:?}");
        }
    }

    #[test]
    fn a_window_is_kept_in_detail_and_the_rest_stays_coarse() {
        let text = trace_text();
        let whole = Window::new(100.0, 1100.0);
        let window = Window::new(300.0, 310.0);
        let excerpt = ExcerptOf { whole, window: Some(window), pixels: 10 }.read(text.as_bytes()).unwrap();
        let shown = names(&excerpt);
        // The ten ops inside the window, each a column wide at its scale (1 µs), as they are.
        let inside: Vec<_> = shown.iter().filter(|(_, start, _)| (300.0..310.0).contains(start)).collect();
        assert_eq!(inside.len(), 10, "{inside:?}");
        assert_eq!(*inside[0], ("a", 300.0, 0.5));
        assert_eq!(*inside[1], ("b", 301.0, 0.5));
        // Before and after it, merged by the whole trace's columns, never across the window.
        assert!(shown.contains(&("100 events", 100.0, 99.5)));
        assert!(shown.contains(&("90 events", 310.0, 89.5)));
        for (name, start, dur) in &shown {
            if name.ends_with("events") {
                assert!(start + dur <= 300.0 || *start >= 310.0, "{name} at {start} for {dur} µs");
            }
        }
        // Both excerpts give a timeline of the same span, so one replaces the other in place.
        let coarse = ExcerptOf { whole, window: None, pixels: 10 }.read(text.as_bytes()).unwrap();
        let full = Timeline::new([(0, Trace::parse(&text).unwrap())]);
        for trace in [excerpt, coarse] {
            let timeline = Timeline::new([(0, trace)]);
            assert_eq!(timeline.bounds(), full.bounds());
            assert_eq!(timeline.file_window(0, Window::new(200.0, 210.0)), window);
        }
    }

    #[test]
    fn an_excerpt_is_bounded_by_its_pixels_whatever_the_file() {
        let mut events = vec![r#"{"ph": "X", "name": "first", "pid": 1, "tid": 1, "ts": 0, "dur": 1}"#.to_owned()];
        events.extend(
            (0..50_000).map(|i| format!(r#"{{"ph": "X", "name": "op{}", "pid": 1, "tid": {}, "ts": {i}, "dur": 0.25}}"#, i % 7, i % 3)),
        );
        let text = format!("[{}]", events.join(","));
        let of = ExcerptOf { whole: Window::new(0.0, 50_000.0), window: Some(Window::new(10_000.0, 10_100.0)), pixels: 100 };
        let excerpt = of.read(text.as_bytes()).unwrap();
        // Per thread: at most 100 columns for the window and 100 (split at it) for the rest.
        assert!(excerpt.events.len() <= 3 * (200 + 2) + 1, "{}", excerpt.events.len());
        assert!(excerpt.events.iter().any(|e| e.name == "4 events" || e.name.ends_with("events")));
        assert!(ExcerptOf { pixels: 0, ..of }.read("not json".as_bytes()).is_err());
    }
}
