//! One run's metric series and log tail as they arrive, with the sequence numbers that make
//! resuming exact: a point or line at or below the last number held is a repeat and dropped.
//! Which arrivals are fresh is decided by `scalebook_page::runs::stream` (tested natively);
//! here are the signals the page draws from.

use std::sync::{Arc, Mutex};

use leptos::prelude::*;
use scalebook_page::runs::stream::{Cursor, append_log, append_points};
use scalebook_shared::protocol::{ClientMessage, LogLine, RunId, SeqPoint, Series};

pub use scalebook_page::runs::stream::start_wall;

/// Reference-counted signals, so a stream outlives the component that first asked for it.
#[derive(Clone)]
pub struct RunStream {
    pub series: ArcRwSignal<Vec<Series>>,
    pub log: ArcRwSignal<Vec<LogLine>>,
    cursor: Arc<Mutex<Cursor>>,
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
        self.cursor().subscribe_message(run)
    }

    /// The server's history up to `upto_seq` replaces what is held (it is also sent when the
    /// trainer restarted its metrics file on resume).
    pub fn replace_history(&self, upto_seq: u64, series: Vec<Series>) {
        self.set_cursor(|c| c.replace_history(upto_seq));
        self.series.set(series);
    }

    /// Adds the points not held yet; the series' signal changes only when some are new.
    pub fn add_points(&self, points: Vec<SeqPoint>) {
        let mut cursor = self.cursor();
        let fresh = cursor.fresh_points(points);
        if fresh.is_empty() {
            return;
        }
        self.set_cursor(|c| c.points = cursor.points);
        self.series.update(|series| append_points(series, &fresh));
    }

    /// Adds the log lines not held yet; the log's signal changes only when some are new.
    pub fn add_log(&self, lines: Vec<LogLine>) {
        let mut cursor = self.cursor();
        let fresh = cursor.fresh_log(lines);
        if fresh.is_empty() {
            return;
        }
        self.set_cursor(|c| c.log = cursor.log);
        self.log.update(|log| append_log(log, fresh));
    }
}
