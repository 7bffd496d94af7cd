//! One run's metric series and log tail as they arrive, with the sequence numbers that make
//! resuming exact: a point or line at or below the last number held is a repeat and dropped.
//! The page holds the series and the log in signals; what they gain from each arrival is
//! decided here, so resuming and dropping repeats are tested without a browser.

use scalebook_shared::metrics::MAX_TAGS;
use scalebook_shared::protocol::{Bucket, ClientMessage, LogLine, RunId, SeqPoint, Series};

/// Log lines kept per run; older ones scroll away (the whole log is a file of the run).
pub const LOG_LINES_KEPT: usize = 500;

/// The last sequence numbers held: `points` is `None` until the history has arrived, so the
/// first subscription asks for the whole history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub points: Option<u64>,
    pub log: Option<u64>,
}

impl Cursor {
    /// The subscription that continues this stream: the whole history when it has none yet,
    /// else exactly what came after the last numbers held.
    pub fn subscribe_message(&self, run: &RunId) -> ClientMessage {
        ClientMessage::Subscribe { run: run.clone(), after_seq: self.points, after_log_seq: self.log }
    }

    /// The server's history up to `upto_seq` replaces what is held (it is also sent when the
    /// trainer restarted its metrics file on resume), so it is held up to there.
    pub fn replace_history(&mut self, upto_seq: u64) {
        self.points = Some(upto_seq);
    }

    /// The points of `points` not held yet, the cursor moved past the last of them; none (and
    /// the cursor unmoved) when every one is a repeat, so the series need not change.
    pub fn fresh_points(&mut self, points: Vec<SeqPoint>) -> Vec<SeqPoint> {
        let last = self.points.unwrap_or(0);
        let fresh: Vec<SeqPoint> = points.into_iter().filter(|p| p.seq > last).collect();
        if let Some(newest) = fresh.last().map(|p| p.seq) {
            self.points = Some(newest);
        }
        fresh
    }

    /// The lines of `lines` not held yet, the cursor moved past the last of them; none (and
    /// the cursor unmoved) when every one is a repeat, so the log need not change.
    pub fn fresh_log(&mut self, lines: Vec<LogLine>) -> Vec<LogLine> {
        let last = self.log.unwrap_or(0);
        let fresh: Vec<LogLine> = lines.into_iter().filter(|l| l.seq > last).collect();
        if let Some(newest) = fresh.last().map(|l| l.seq) {
            self.log = Some(newest);
        }
        fresh
    }
}

/// Appends each point to its tag's series (a new series for a new tag, up to [`MAX_TAGS`]), as
/// a bucket of one.
pub fn append_points(series: &mut Vec<Series>, points: &[SeqPoint]) {
    for p in points {
        let bucket = Bucket::of(std::slice::from_ref(&p.point));
        let Some(bucket) = bucket else { continue };
        let full = series.len() >= MAX_TAGS;
        match series.iter_mut().find(|s| s.tag == p.point.tag) {
            Some(s) => s.buckets.push(bucket),
            None if full => {}
            None => series.push(Series { tag: p.point.tag.clone(), buckets: vec![bucket] }),
        }
    }
}

/// Appends `fresh` lines to `log`, keeping its last [`LOG_LINES_KEPT`] (a long run's log
/// would otherwise grow without end in the page).
pub fn append_log(log: &mut Vec<LogLine>, fresh: Vec<LogLine>) {
    log.extend(fresh);
    let excess = log.len().saturating_sub(LOG_LINES_KEPT);
    log.drain(..excess);
}

/// The wall time of a run's first point: where its relative-time axis starts.
pub fn start_wall(series: &[Series]) -> Option<f64> {
    series.iter().filter_map(|s| s.buckets.first()).map(|b| b.first_wall).min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use scalebook_shared::metrics::MetricPoint;

    use super::*;

    fn point(seq: u64, tag: &str, value: f64) -> SeqPoint {
        SeqPoint { seq, point: MetricPoint { step: seq, epoch: 1, wall: 100.0 + seq as f64, tag: tag.into(), value } }
    }

    fn steps(series: &[Series], tag: &str) -> Vec<u64> {
        series.iter().find(|s| s.tag == tag).map(|s| s.buckets.iter().map(|b| b.last_step).collect()).unwrap_or_default()
    }

    /// What the page's stream does with an arrival of points: only fresh ones reach the series.
    fn add_points(cursor: &mut Cursor, series: &mut Vec<Series>, points: Vec<SeqPoint>) {
        let fresh = cursor.fresh_points(points);
        append_points(series, &fresh);
    }

    #[test]
    fn resumes_after_the_last_point_held_and_drops_repeats() {
        let (mut cursor, mut series) = (Cursor::default(), Vec::new());
        let run = RunId::parse("r1").unwrap();
        assert_eq!(cursor.subscribe_message(&run), ClientMessage::Subscribe { run: run.clone(), after_seq: None, after_log_seq: None });
        cursor.replace_history(2);
        add_points(&mut cursor, &mut series, vec![point(1, "Loss/train", 1.0), point(3, "Loss/train", 0.9), point(4, "Loss/valid", 0.8)]);
        // A reconnection replays from after 4; a repeat of 4 must not double it.
        add_points(&mut cursor, &mut series, vec![point(4, "Loss/valid", 0.8), point(5, "Loss/train", 0.7)]);
        assert_eq!(steps(&series, "Loss/train"), [3, 5]);
        assert_eq!(steps(&series, "Loss/valid"), [4]);
        let ClientMessage::Subscribe { after_seq, .. } = cursor.subscribe_message(&run) else { unreachable!() };
        assert_eq!(after_seq, Some(5));
        // Nothing fresh: nothing returned, the cursor stays.
        assert!(cursor.fresh_points(vec![point(5, "Loss/train", 0.7)]).is_empty());
        assert_eq!(cursor.points, Some(5));
    }

    #[test]
    fn a_run_of_thousands_of_tags_charts_at_most_max_tags() {
        let mut series = Vec::new();
        let points: Vec<SeqPoint> = (1..=20_101).map(|seq| point(seq, &format!("tag{seq}"), 1.0)).collect();
        append_points(&mut series, &points);
        assert_eq!(series.len(), MAX_TAGS);
        append_points(&mut series, &[point(20_102, "tag1", 0.5)]);
        assert_eq!(steps(&series, "tag1"), [1, 20_102], "a charted tag keeps its points");
    }

    #[test]
    fn the_log_keeps_its_tail_once() {
        let (mut cursor, mut log) = (Cursor::default(), Vec::new());
        let lines = |range: std::ops::Range<u64>| range.map(|seq| LogLine { seq, text: format!("line {seq}") }).collect::<Vec<_>>();
        for arrival in [lines(1..400), lines(300..700)] {
            let fresh = cursor.fresh_log(arrival);
            append_log(&mut log, fresh);
        }
        assert_eq!(log.len(), LOG_LINES_KEPT);
        assert_eq!(log.last().unwrap().seq, 699);
        assert!(log.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert_eq!(cursor.log, Some(699));
    }

    #[test]
    fn the_relative_axis_starts_at_the_earliest_point() {
        let mut series = Vec::new();
        append_points(&mut series, &[point(5, "b", 1.0), point(3, "a", 1.0)]);
        assert_eq!(start_wall(&series), Some(103.0));
        assert_eq!(start_wall(&[]), None);
    }
}
