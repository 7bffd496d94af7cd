//! A Chrome trace cut into its events as it is read, a chunk at a time, the events of a chunk
//! read on every core at once. An event in the plain form is read in one pass where it lies
//! ([`plain`]); for any other, a small scan (strings and brackets, nothing more) finds where
//! its JSON ends, and serde_json reads it from that slice. serde_json reading from an
//! `io::Read` takes a call per byte, which was 40 % of the time to summarise a 230 MB trace.
//! Memory stays a chunk plus the largest event, whatever the file's size.

use std::io::{self, Read};

use serde::de::{Error as _, IgnoredAny};

use super::lenient::{Entry, Key, RawEvent, Scalar};
use super::plain;
use super::value_end::ValueEnd;

/// How much is read at a time.
const CHUNK: usize = 1 << 20;

/// Bytes of a chunk read on one thread at least: less is not worth a thread.
const PART_BYTES: usize = 64 << 10;

/// Reads the trace in `reader` (the object form with `traceEvents`, or a bare list of events,
/// whose closing bracket may be missing), handing each event to `sink` in the file's order;
/// returns the file's `baseTimeNanoseconds` (what Kineto counts its timestamps from), if it has
/// one. Entries that are not objects are skipped; text that is not such JSON is an error.
pub(super) fn events(reader: impl Read, sink: impl FnMut(RawEvent<'_>)) -> Result<Option<f64>, serde_json::Error> {
    events_on(reader, std::thread::available_parallelism().map_or(1, |n| n.get()), sink)
}

/// [`events`], the events of a chunk read on at most `threads` threads.
fn events_on(reader: impl Read, threads: usize, mut sink: impl FnMut(RawEvent<'_>)) -> Result<Option<f64>, serde_json::Error> {
    let mut scan = Scanner { reader, buf: Vec::new(), pos: 0, end: 0, eof: false, threads };
    let base = match scan.next_byte()? {
        Some(b'[') => {
            scan.list(&mut sink, true)?;
            None
        }
        Some(b'{') => scan.object(&mut sink)?,
        _ => return Err(invalid("a Chrome trace: an object with `traceEvents`, or a list of events")),
    };
    match scan.next_byte()? {
        None => Ok(base),
        Some(_) => Err(invalid("nothing after the trace")),
    }
}

fn invalid(expected: &str) -> serde_json::Error {
    serde_json::Error::custom(format!("expected {expected}"))
}

/// The index of the first byte at or after `from` in `bytes` that is not white space.
fn skip_space(bytes: &[u8], from: usize) -> Option<usize> {
    bytes[from..].iter().position(|b| !b.is_ascii_whitespace()).map(|i| from + i)
}

/// The entries of a list read from a stretch of a chunk, up to the first that starts at or
/// after a limit, each read whole with what follows it.
struct Part<'a> {
    entries: Vec<Entry<'a>>,
    /// Where the scan stopped: after the last entry's `,`, or after the list's `]`.
    next: usize,
    closed: bool,
    /// What stopped the scan, if the stretch is not a list's entries.
    error: Option<serde_json::Error>,
}

/// Scans and reads the entries of a list in `bytes` from `from` (where an entry, or white
/// space before it, starts) until one starts at or after `limit`, the list closes, or the
/// bytes end in the middle of an entry.
fn part(bytes: &[u8], from: usize, limit: usize) -> Part<'_> {
    let mut part = Part { entries: Vec::new(), next: from, closed: false, error: None };
    let text = utf8_prefix(&bytes[from..limit.min(bytes.len())]);
    while let Some(start) = skip_space(bytes, part.next) {
        if start >= limit {
            break;
        }
        let (entry, len) = match plain::event(text.get(start - from..).unwrap_or_default()) {
            Some((event, len)) => (Ok(Entry(Some(event))), len),
            None => {
                let Some(len) = ValueEnd::default().run(&bytes[start..]) else { break };
                (serde_json::from_slice(&bytes[start..start + len]), len)
            }
        };
        let Some(after) = skip_space(bytes, start + len) else { break };
        match entry {
            Ok(entry) => part.entries.push(entry),
            Err(e) => {
                part.error = Some(e);
                break;
            }
        }
        part.next = after + 1;
        match bytes[after] {
            b',' => {}
            b']' => {
                part.closed = true;
                break;
            }
            _ => {
                part.error = Some(invalid("`,` or `]` after an event"));
                break;
            }
        }
    }
    part
}

/// The longest start of `bytes` that is UTF-8 (all of it, but for a character cut at its end
/// or bytes that are not UTF-8 at all, which serde_json then finds).
fn utf8_prefix(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_else(|e| std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default())
}

/// Where an entry of the list likely starts at or after `from`: an object after `}` and `,`.
/// A guess (the bytes may be inside a text), which the part before it confirms by ending
/// there.
fn likely_start(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let close = at + bytes.get(at..)?.iter().position(|&b| b == b'}')?;
        at = close + 1;
        let comma = skip_space(bytes, at)?;
        if bytes[comma] == b',' {
            let open = skip_space(bytes, comma + 1)?;
            if bytes[open] == b'{' {
                return Some(open);
            }
        }
    }
}

/// The entries of the list in `bytes` from `from`, as [`part`] reads them, the stretch cut
/// at likely entry starts into up to `threads` parts read at once. Parts are taken in order
/// while each ends where the next begins; a part after a wrong guess is dropped, and its
/// entries are read on the next call.
fn parts(bytes: &[u8], from: usize, threads: usize) -> Vec<Part<'_>> {
    let count = ((bytes.len() - from) / PART_BYTES).clamp(1, threads);
    let mut starts = vec![from];
    for i in 1..count {
        let guess = from + (bytes.len() - from) * i / count;
        match likely_start(bytes, guess.max(*starts.last().unwrap_or(&from) + 1)) {
            Some(start) => starts.push(start),
            None => break,
        }
    }
    let limits: Vec<usize> = starts.iter().skip(1).copied().chain([usize::MAX]).collect();
    let read: Vec<Part<'_>> = match starts.len() {
        1 => vec![part(bytes, from, usize::MAX)],
        _ => std::thread::scope(|scope| {
            let handles: Vec<_> =
                starts.iter().zip(&limits).map(|(&start, &limit)| scope.spawn(move || part(bytes, start, limit))).collect();
            handles.into_iter().map_while(|h| h.join().ok()).collect()
        }),
    };
    let mut taken: Vec<Part<'_>> = Vec::with_capacity(read.len());
    for (part, start) in read.into_iter().zip(starts) {
        if let Some(before) = taken.last()
            && (before.closed || before.error.is_some() || skip_space(bytes, before.next) != Some(start))
        {
            break;
        }
        taken.push(part);
    }
    taken
}

struct Scanner<R> {
    reader: R,
    buf: Vec<u8>,
    /// What is read and not yet taken: `buf[pos..end]`.
    pos: usize,
    end: usize,
    eof: bool,
    /// How many threads read a chunk's events.
    threads: usize,
}

impl<R: Read> Scanner<R> {
    /// Reads more after what is not yet taken (moved to the front, and the buffer grown when
    /// it is all one value); `false` at the end of the file.
    fn fill(&mut self) -> Result<bool, serde_json::Error> {
        if self.eof {
            return Ok(false);
        }
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        if self.buf.len() < self.end + CHUNK {
            self.buf.resize(self.end + CHUNK, 0);
        }
        loop {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(serde_json::Error::io(e)),
            }
        }
    }

    /// The next byte that is not white space, taken; `None` at the end of the file.
    fn next_byte(&mut self) -> Result<Option<u8>, serde_json::Error> {
        loop {
            if let Some(at) = skip_space(&self.buf[..self.end], self.pos) {
                self.pos = at + 1;
                return Ok(Some(self.buf[at]));
            }
            self.pos = self.end;
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The next value, read by serde_json, white space before it skipped.
    fn value<'s, T: serde::Deserialize<'s>>(&'s mut self) -> Result<T, serde_json::Error> {
        if self.next_byte()?.is_none() {
            return Err(invalid("a value, not the end of the file"));
        }
        self.pos -= 1;
        let mut scan = ValueEnd::default();
        let len = loop {
            if let Some(len) = scan.run(&self.buf[self.pos..self.end]) {
                break len;
            }
            if !self.fill()? {
                match scan.scalar {
                    true => break self.end - self.pos,
                    false => return Err(invalid("the rest of a value, not the end of the file")),
                }
            }
        };
        let start = self.pos;
        self.pos += len;
        serde_json::from_slice(&self.buf[start..self.pos])
    }

    /// The entries of a list whose `[` is taken, each object handed to `sink`. `lenient`: the
    /// list may end with the file, without its `]` (the bare list form allows it).
    fn list(&mut self, sink: &mut impl FnMut(RawEvent<'_>), lenient: bool) -> Result<(), serde_json::Error> {
        match self.next_byte()? {
            Some(b']') => return Ok(()),
            None if lenient => return Ok(()),
            None => return Err(invalid("`]`, not the end of the file")),
            Some(_) => self.pos -= 1,
        }
        loop {
            // Every entry now read whole, with what follows it (`,` or the list's `]`).
            let (mut next, mut closed, mut read) = (self.pos, false, 0);
            for part in parts(&self.buf[..self.end], self.pos, self.threads) {
                read += part.entries.len();
                for entry in part.entries {
                    if let Entry(Some(event)) = entry {
                        sink(event);
                    }
                }
                if let Some(error) = part.error {
                    return Err(error);
                }
                (next, closed) = (part.next, part.closed);
            }
            self.pos = next;
            if closed {
                return Ok(());
            }
            if read == 0 {
                // An entry longer than what is read, or the file's end: one entry on its own.
                if let Entry(Some(event)) = self.last_or_long_entry(lenient)? {
                    sink(event);
                }
                match self.next_byte()? {
                    Some(b',') => {}
                    Some(b']') => return Ok(()),
                    None if lenient => return Ok(()),
                    None => return Err(invalid("`]`, not the end of the file")),
                    Some(_) => return Err(invalid("`,` or `]` after an event")),
                }
            }
        }
    }

    /// The next entry of a list when no entry is read whole with what follows it: one longer
    /// than a chunk, or the last of a file that ends without its `]`. `Entry(None)` for none at
    /// all (the file ends after a `,`, which `lenient` allows).
    fn last_or_long_entry(&mut self, lenient: bool) -> Result<Entry<'_>, serde_json::Error> {
        if self.next_byte()?.is_none() {
            return match lenient {
                true => Ok(Entry(None)),
                false => Err(invalid("`]`, not the end of the file")),
            };
        }
        self.pos -= 1;
        self.value()
    }

    /// The fields of the object form, whose `{` is taken: `traceEvents` streamed to `sink`,
    /// the base time returned, every other field checked and let go.
    fn object(&mut self, sink: &mut impl FnMut(RawEvent<'_>)) -> Result<Option<f64>, serde_json::Error> {
        let (mut base, mut found) = (None, false);
        if self.next_byte()? != Some(b'}') {
            self.pos -= 1;
            loop {
                let key: Key = self.value()?;
                if self.next_byte()? != Some(b':') {
                    return Err(invalid("`:` after a key"));
                }
                match key {
                    Key::TraceEvents if self.next_byte()? == Some(b'[') => {
                        self.list(sink, false)?;
                        found = true;
                    }
                    Key::TraceEvents => return Err(invalid("`traceEvents` as a list of events")),
                    Key::BaseTime => base = self.value::<Scalar<'_>>()?.number(),
                    _ => _ = self.value::<IgnoredAny>()?,
                }
                match self.next_byte()? {
                    Some(b',') => continue,
                    Some(b'}') => break,
                    _ => return Err(invalid("`,` or `}` after a field")),
                }
            }
        }
        if !found {
            return Err(invalid("the object to have a `traceEvents` list"));
        }
        Ok(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` a few bytes at a time, as a slow pipe would hand it over.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(out.len()).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn names(text: &str, step: usize) -> Result<(Vec<String>, Option<f64>), serde_json::Error> {
        let mut names = Vec::new();
        let base = events(Trickle(text.as_bytes(), step), |e| names.push(e.name.text().unwrap_or_default()))?;
        Ok((names, base))
    }

    #[test]
    fn events_are_cut_right_across_chunks_strings_and_nesting() {
        let text = r#" { "deviceProperties": [{"name": "A100", "x": [1, {"y": "]}"}]}], "n": -1.5e3, "t": true,
          "traceEvents": [ {"name": "a \"quoted\" ]} name", "args": {"k": [1, [2]]}}, 7, {"name": "b\\"}, null,
            {"name": "c"} ], "baseTimeNanoseconds": 1700000000000000000 } "#;
        for step in [1, 2, 3, 7, 64, 4096] {
            let (names, base) = names(text, step).unwrap();
            assert_eq!(names, [r#"a "quoted" ]} name"#, "b\\", "c"], "{step} bytes at a time");
            assert_eq!(base, Some(1.7e18));
        }
        // The bare list, with or without its closing bracket.
        for text in [r#"[{"name": "a"}, {"name": "b"}]"#, r#"[{"name": "a"}, {"name": "b"},"#, r#"[{"name": "a"}, {"name": "b"}"#] {
            assert_eq!(names(text, 5).unwrap().0, ["a", "b"], "{text}");
        }
    }

    #[test]
    fn a_chunk_read_in_parts_gives_every_event_once_in_order_whatever_its_texts_hold() {
        // Names that hold what a part's start is guessed by (`}, {`), some long, so that the
        // guesses land inside texts as often as between events.
        let names: Vec<String> =
            (0..6000).map(|i| format!("e{i} }}, {{\"x\": [{}]}}, {{ {}", "}, {".repeat(i % 7), "y".repeat(i % 500))).collect();
        let events: Vec<String> =
            names.iter().map(|n| format!(r#"{{"name": {}, "args": {{"a": "}}, {{"}}}}"#, serde_json::to_string(n).unwrap())).collect();
        let text = format!(r#"{{"traceEvents": [{}], "baseTimeNanoseconds": 5}}"#, events.join(",\n  "));
        assert!(text.len() > CHUNK, "{} bytes: more than one chunk", text.len());
        for threads in [1, 2, 3, 8] {
            let mut read = Vec::new();
            let base = events_on(text.as_bytes(), threads, |e| read.push(e.name.text().unwrap_or_default())).unwrap();
            assert_eq!((read.len(), base), (names.len(), Some(5.0)), "{threads} threads");
            assert!(read == names, "{threads} threads: the events differ");
        }
    }

    #[test]
    fn what_is_not_a_trace_is_an_error_that_says_what_was_expected() {
        for (text, says) in [
            ("", "a Chrome trace"),
            ("{\"traceEvents\": [{\"name\": \"a\"}] ", "`,` or `}`"),
            ("{\"traceEvents\": [{\"name\": \"a\"}", "`]`"),
            ("{\"traceEvents\": {}}", "a list of events"),
            ("{\"events\": []}", "`traceEvents` list"),
            ("[{\"name\": \"a\"} {\"name\": \"b\"}]", "`,` or `]`"),
            ("[{\"name\": \"a\"}] x", "nothing after"),
            ("[{\"name\": \"a\", }]", "trailing comma"),
            ("[{\"name\": \"unterminated}]", "the rest of a value"),
        ] {
            let error = names(text, 3).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
