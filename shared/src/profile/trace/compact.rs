//! A trace's timed events as the reader found them, written compactly beside the trace: 28
//! bytes an event (thread, name, category, start, duration) and, at the end, the names, the
//! threads and the base time once. The server writes it during the pass that summarises a
//! trace; then a timeline window is read from it in a tenth of the time the trace's JSON
//! takes to parse, and the first window does not wait for a second pass over the JSON.
//!
//! What the file was made from is the writer's to say (`source`), and the reader's to check:
//! a compact file is only as good as the trace it was made from.

use std::collections::HashMap;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};

use serde::{Deserialize, Serialize};

use super::Trace;
use super::read::{Event, Thread};

/// Bytes of one event.
const EVENT_BYTES: usize = 28;

/// What follows the events: everything written once.
#[derive(Serialize, Deserialize)]
struct Tail {
    source: String,
    events: u64,
    names: Vec<String>,
    threads: Vec<Thread>,
    base_ns: Option<f64>,
}

/// Writes the events of one trace, as they are read, to `out`.
pub struct CompactWriter<W: Write> {
    out: W,
    ids: HashMap<String, u32>,
    names: Vec<String>,
    events: u64,
    /// The first write that failed: the rest are not tried, and [`CompactWriter::finish`]
    /// returns it.
    failed: Option<io::Error>,
}

impl<W: Write> CompactWriter<W> {
    pub fn new(out: W) -> CompactWriter<W> {
        CompactWriter { out, ids: HashMap::new(), names: Vec::new(), events: 0, failed: None }
    }

    pub(super) fn push(&mut self, event: &Event) {
        if self.failed.is_some() {
            return;
        }
        let (name, category) = (self.id(&event.name), self.id(&event.category));
        let mut bytes = [0; EVENT_BYTES];
        bytes[..4].copy_from_slice(&u32::try_from(event.thread).unwrap_or(u32::MAX).to_le_bytes());
        bytes[4..8].copy_from_slice(&name.to_le_bytes());
        bytes[8..12].copy_from_slice(&category.to_le_bytes());
        bytes[12..20].copy_from_slice(&event.start.to_le_bytes());
        bytes[20..].copy_from_slice(&event.dur.to_le_bytes());
        match self.out.write_all(&bytes) {
            Ok(()) => self.events += 1,
            Err(e) => self.failed = Some(e),
        }
    }

    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.ids.insert(name.to_owned(), id);
        self.names.push(name.to_owned());
        id
    }

    /// Writes what the events need once, the threads and base time of `trace` (read in the
    /// same pass) and `source`, and hands the output back.
    pub(super) fn finish(mut self, trace: &Trace, source: &str) -> io::Result<W> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let tail = Tail {
            source: source.to_owned(),
            events: self.events,
            names: self.names,
            threads: trace.threads.clone(),
            base_ns: trace.base_ns,
        };
        let text = serde_json::to_vec(&tail).map_err(io::Error::other)?;
        self.out.write_all(&text)?;
        self.out.write_all(&(text.len() as u64).to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A compact file opened: what it was made from, and its events to read.
pub struct Compact<R> {
    reader: R,
    tail: Tail,
}

impl<R: Read + Seek> Compact<R> {
    /// Reads the end of the file: an error for one that is not whole.
    pub fn open(mut reader: R) -> io::Result<Compact<R>> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("not a compact trace: {what}"));
        let len = reader.seek(SeekFrom::End(0))?;
        let mut word = [0; 8];
        reader.seek(SeekFrom::End(-8)).map_err(|_| invalid("too short"))?;
        reader.read_exact(&mut word)?;
        let tail_len = u64::from_le_bytes(word);
        let tail_at = len.checked_sub(8).and_then(|end| end.checked_sub(tail_len)).ok_or_else(|| invalid("its end"))?;
        reader.seek(SeekFrom::Start(tail_at))?;
        let mut text = Vec::new();
        (&mut reader).take(tail_len).read_to_end(&mut text)?;
        let tail: Tail = serde_json::from_slice(&text).map_err(|e| invalid(&e.to_string()))?;
        if tail.events.checked_mul(EVENT_BYTES as u64) != Some(tail_at) {
            return Err(invalid("its events"));
        }
        reader.seek(SeekFrom::Start(0))?;
        Ok(Compact { reader, tail })
    }

    /// What the writer said it was made from.
    pub fn source(&self) -> &str {
        &self.tail.source
    }

    /// Hands each event to `sink` in the order they were written; the trace without its events.
    pub(super) fn events(self, mut sink: impl FnMut(Event)) -> io::Result<Trace> {
        let Compact { reader, tail } = self;
        let mut reader = BufReader::with_capacity(1 << 20, reader);
        let name = |id: &[u8]| -> io::Result<String> {
            let id = u32::from_le_bytes(id.try_into().unwrap_or_default());
            let found = tail.names.get(usize::try_from(id).unwrap_or(usize::MAX));
            found.cloned().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not a compact trace: a name it does not list"))
        };
        let float = |bytes: &[u8]| f64::from_le_bytes(bytes.try_into().unwrap_or_default());
        let mut bytes = [0; EVENT_BYTES];
        for _ in 0..tail.events {
            reader.read_exact(&mut bytes)?;
            let thread = usize::try_from(u32::from_le_bytes(bytes[..4].try_into().unwrap_or_default())).unwrap_or(usize::MAX);
            sink(Event {
                thread,
                name: name(&bytes[4..8])?,
                category: name(&bytes[8..12])?,
                start: float(&bytes[12..20]),
                dur: float(&bytes[20..]),
            });
        }
        Ok(Trace { threads: tail.threads, events: Vec::new(), base_ns: tail.base_ns })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::profile::trace::read::stream_events;

    #[test]
    fn a_trace_written_compactly_reads_back_as_it_was_read() {
        let text = r#"{"traceEvents": [
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
            {"ph": "X", "cat": "user_annotation", "name": "step 0", "pid": 1, "tid": 2, "ts": 100.5, "dur": 1000},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 500, "dur": 100},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 700, "dur": 0.25}
        ], "baseTimeNanoseconds": 5000}"#;
        let mut writer = CompactWriter::new(Vec::new());
        let mut events = Vec::new();
        let trace = stream_events(text.as_bytes(), |event| {
            writer.push(&event);
            events.push(event);
        })
        .unwrap();
        let bytes = writer.finish(&trace, "rank 0, 1234 bytes").unwrap();
        let compact = Compact::open(Cursor::new(bytes.clone())).unwrap();
        assert_eq!(compact.source(), "rank 0, 1234 bytes");
        let mut read = Vec::new();
        let back = compact.events(|event| read.push(event)).unwrap();
        assert_eq!((read, back), (events, trace));
        // Cut anywhere, or not a compact file at all: an error, never events that are wrong.
        for cut in [0, 7, 8, 30, bytes.len() - 1] {
            assert!(Compact::open(Cursor::new(bytes[..cut].to_vec())).is_err(), "cut at {cut}");
        }
        assert!(Compact::open(Cursor::new(text.as_bytes().to_vec())).is_err());
    }
}
