//! One run's metric series and log tail as they arrive, with the sequence numbers that make
//! resuming exact: a point or line at or below the last number held is a repeat and dropped.

use std::sync::{Arc, Mutex};

use leptos::prelude::*;
use scalebook_shared::protocol::{Bucket, ClientMessage, LogLine, RunId, SeqPoint, Series};

/// Log lines kept per run; older ones scroll away (the whole log is a file of the run).
const LOG_LINES_KEPT: usize = 500;

/// Reference-counted signals, so a stream outlives the component that first asked for it.
#[derive(Clone)]
pub struct RunStream {
    pub series: ArcRwSignal<Vec<Series>>,
    pub log: ArcRwSignal<Vec<LogLine>>,
    cursor: Arc<Mutex<Cursor>>,
}

/// The last sequence numbers held: `points` is `None` until the history has arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cursor {
    points: Option<u64>,
    log: Option<u64>,
}

impl RunStream {
    pub fn new() -> RunStream {
        RunStream { series: ArcRwSignal::new(Vec::new()), log: ArcRwSignal::new(Vec::new()), cursor: Arc::default() }
    }

    fn cursor(&self) -> Cursor {
        self.cursor.lock().map(|c| *c).unwrap_or_default()
    }

    fn set_cursor(&self, change: impl FnOnce(&mut Cursor)) {
        if let Ok(mut cursor) = self.cursor.lock() {
            change(&mut cursor);
        }
    }

    /// The subscription that continues this stream: the whole history when it has none yet,
    /// else exactly what came after the last numbers held.
    pub fn subscribe_message(&self, run: &RunId) -> ClientMessage {
        let cursor = self.cursor();
        ClientMessage::Subscribe { run: run.clone(), after_seq: cursor.points, after_log_seq: cursor.log }
    }

    /// The server's history up to `upto_seq` replaces what is held (it is also sent when the
    /// trainer restarted its metrics file on resume).
    pub fn replace_history(&self, upto_seq: u64, series: Vec<Series>) {
        self.set_cursor(|c| c.points = Some(upto_seq));
        self.series.set(series);
    }

    pub fn add_points(&self, points: Vec<SeqPoint>) {
        let last = self.cursor().points.unwrap_or(0);
        let fresh: Vec<SeqPoint> = points.into_iter().filter(|p| p.seq > last).collect();
        let Some(newest) = fresh.last().map(|p| p.seq) else { return };
        self.set_cursor(|c| c.points = Some(newest));
        self.series.update(|series| append_points(series, &fresh));
    }

    pub fn add_log(&self, lines: Vec<LogLine>) {
        let last = self.cursor().log.unwrap_or(0);
        let fresh: Vec<LogLine> = lines.into_iter().filter(|l| l.seq > last).collect();
        let Some(newest) = fresh.last().map(|l| l.seq) else { return };
        self.set_cursor(|c| c.log = Some(newest));
        self.log.update(|log| {
            log.extend(fresh);
            let excess = log.len().saturating_sub(LOG_LINES_KEPT);
            log.drain(..excess);
        });
    }
}

/// Appends each point to its tag's series (a new series for a new tag), as a bucket of one.
pub fn append_points(series: &mut Vec<Series>, points: &[SeqPoint]) {
    for p in points {
        let bucket = Bucket::of(std::slice::from_ref(&p.point));
        let Some(bucket) = bucket else { continue };
        match series.iter_mut().find(|s| s.tag == p.point.tag) {
            Some(s) => s.buckets.push(bucket),
            None => series.push(Series { tag: p.point.tag.clone(), buckets: vec![bucket] }),
        }
    }
}

/// The wall time of a run's first point: where its relative-time axis starts.
pub fn start_wall(series: &[Series]) -> Option<f64> {
    series.iter().filter_map(|s| s.buckets.first()).map(|b| b.first_wall).min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use scalebook_shared::metrics::MetricPoint;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    fn point(seq: u64, tag: &str, value: f64) -> SeqPoint {
        SeqPoint { seq, point: MetricPoint { step: seq, epoch: 1, wall: 100.0 + seq as f64, tag: tag.into(), value } }
    }

    fn steps(stream: &RunStream, tag: &str) -> Vec<u64> {
        stream.series.with_untracked(|s| {
            s.iter().find(|s| s.tag == tag).map(|s| s.buckets.iter().map(|b| b.last_step).collect()).unwrap_or_default()
        })
    }

    #[wasm_bindgen_test]
    fn resumes_after_the_last_point_held_and_drops_repeats() {
        let stream = RunStream::new();
        let run = RunId::parse("r1").unwrap();
        assert_eq!(stream.subscribe_message(&run), ClientMessage::Subscribe { run: run.clone(), after_seq: None, after_log_seq: None });
        stream.replace_history(2, vec![]);
        stream.add_points(vec![point(1, "Loss/train", 1.0), point(3, "Loss/train", 0.9), point(4, "Loss/valid", 0.8)]);
        // A reconnection replays from after 4; a repeat of 4 must not double it.
        stream.add_points(vec![point(4, "Loss/valid", 0.8), point(5, "Loss/train", 0.7)]);
        assert_eq!(steps(&stream, "Loss/train"), [3, 5]);
        assert_eq!(steps(&stream, "Loss/valid"), [4]);
        let ClientMessage::Subscribe { after_seq, .. } = stream.subscribe_message(&run) else { unreachable!() };
        assert_eq!(after_seq, Some(5));
    }

    #[wasm_bindgen_test]
    fn the_log_keeps_its_tail_once() {
        let stream = RunStream::new();
        let lines = |range: std::ops::Range<u64>| range.map(|seq| LogLine { seq, text: format!("line {seq}") }).collect::<Vec<_>>();
        stream.add_log(lines(1..400));
        stream.add_log(lines(300..700));
        let log = stream.log.get_untracked();
        assert_eq!(log.len(), LOG_LINES_KEPT);
        assert_eq!(log.last().unwrap().seq, 699);
        assert!(log.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    }

    #[wasm_bindgen_test]
    fn the_relative_axis_starts_at_the_earliest_point() {
        let mut series = Vec::new();
        append_points(&mut series, &[point(5, "b", 1.0), point(3, "a", 1.0)]);
        assert_eq!(start_wall(&series), Some(103.0));
        assert_eq!(start_wall(&[]), None);
    }
}
