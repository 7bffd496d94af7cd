//! Following a file that another process appends lines to, numbering the lines from 1.
//!
//! Line numbers are the sequence numbers browsers resume from, so they must be what any reader
//! of the file would count: only complete lines (ending in `\n`) are returned; a line still
//! being written waits for its newline. A file that was replaced (the trainer rewrites
//! `metrics.jsonl` through a rename when it resumes) or that shrank is read again from the
//! start, and the caller is told so.
//!
//! The follower keeps a sparse index of where lines start, so a reader far behind can read
//! pages from any line on ([`Pages`]) without reading the file from its start.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most bytes one poll reads; a large backlog is read over several polls.
const MAX_READ_PER_POLL: u64 = 1 << 20;
/// Bytes kept of one line; the rest of an absurdly long line is dropped.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Lines between two entries of the index.
pub const INDEX_EVERY: u64 = 1024;

#[derive(Debug)]
pub struct LineFollower {
    path: PathBuf,
    /// The inode read so far; a different one means the file was replaced.
    inode: Option<u64>,
    /// Bytes consumed (complete lines plus the pending partial line).
    offset: u64,
    /// Complete lines returned so far (the last line's number).
    lines: u64,
    partial: Vec<u8>,
    /// The partial line outgrew [`MAX_LINE_BYTES`]; skip until its newline.
    truncating: bool,
    /// `(n, offset)`: line `n + 1` starts at byte `offset`, every [`INDEX_EVERY`] lines.
    index: Vec<(u64, u64)>,
}

/// What one poll found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Follow {
    /// The file was replaced or shrank: earlier lines no longer hold, numbering restarted.
    pub reset: bool,
    /// New complete lines with their numbers.
    pub lines: Vec<(u64, String)>,
    /// More bytes are waiting beyond this poll's read limit.
    pub more: bool,
}

impl LineFollower {
    pub fn new(path: &Path) -> LineFollower {
        LineFollower { path: path.to_owned(), inode: None, offset: 0, lines: 0, partial: Vec::new(), truncating: false, index: Vec::new() }
    }

    /// The number of the last complete line read.
    pub fn line_count(&self) -> u64 {
        self.lines
    }

    /// The lines after line `after` (at most up to the last complete one read), to be read a
    /// page at a time; `None` when the file is no longer the one this follower read.
    pub fn pages_after(&self, after: u64) -> io::Result<Option<Pages>> {
        let file = File::open(&self.path)?;
        if Some(file.metadata()?.ino()) != self.inode {
            return Ok(None);
        }
        let (line, offset) = self.index.iter().rev().find(|(n, _)| *n <= after).copied().unwrap_or((0, 0));
        let mut reader = BufReader::new(file);
        reader.seek(SeekFrom::Start(offset))?;
        Ok(Some(Pages { reader, line, after, upto: self.lines }))
    }

    /// Reads what was appended since the last poll. A file that does not exist (yet) has no
    /// lines.
    pub fn poll(&mut self) -> io::Result<Follow> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Follow::default()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let mut follow = Follow::default();
        if self.inode.is_some_and(|inode| inode != meta.ino()) || meta.len() < self.offset {
            *self = LineFollower::new(&self.path);
            follow.reset = true;
        }
        self.inode = Some(meta.ino());
        if meta.len() == self.offset {
            return Ok(follow);
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.take(MAX_READ_PER_POLL).read_to_end(&mut bytes)?;
        let mut end = self.offset;
        self.offset += bytes.len() as u64;
        follow.more = self.offset < meta.len();
        for chunk in bytes.split_inclusive(|&b| b == b'\n') {
            end += chunk.len() as u64;
            let (body, complete) = match chunk.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (chunk, false),
            };
            if !self.truncating {
                let room = MAX_LINE_BYTES.saturating_sub(self.partial.len());
                self.partial.extend_from_slice(&body[..body.len().min(room)]);
                self.truncating = body.len() > room;
            }
            if complete {
                self.lines += 1;
                follow.lines.push((self.lines, String::from_utf8_lossy(&self.partial).into_owned()));
                self.partial.clear();
                self.truncating = false;
                if self.lines.is_multiple_of(INDEX_EVERY) {
                    self.index.push((self.lines, end));
                }
            }
        }
        Ok(follow)
    }

    /// Polls until the end of the file, for a reader that needs everything at once.
    pub fn poll_to_end(&mut self) -> io::Result<Follow> {
        let mut all = self.poll()?;
        while all.more {
            let next = self.poll()?;
            if next.reset {
                all = next;
            } else {
                all.lines.extend(next.lines);
                all.more = next.more;
            }
        }
        Ok(all)
    }
}

/// A file's lines from some line on, read a page at a time by whoever is behind, without the
/// follower's lock: at most [`MAX_LINE_BYTES`] of a line are kept, as the follower keeps.
pub struct Pages {
    reader: BufReader<File>,
    /// The number of the last line read.
    line: u64,
    /// Lines up to this one are skipped.
    after: u64,
    /// The last line to read.
    upto: u64,
}

impl Pages {
    /// The next at most `max` lines, empty once every line up to the end was read.
    pub fn next_page(&mut self, max: usize) -> io::Result<Vec<(u64, String)>> {
        let mut page = Vec::new();
        let mut line = Vec::new();
        while self.line < self.upto && page.len() < max {
            line.clear();
            if !read_line(&mut self.reader, &mut line)? {
                // The file ended early (it was cut meanwhile): there is no more.
                self.upto = self.line;
                break;
            }
            self.line += 1;
            if self.line > self.after {
                page.push((self.line, String::from_utf8_lossy(&line).into_owned()));
            }
        }
        Ok(page)
    }

    /// The number of the last line this reader will read.
    pub fn upto(&self) -> u64 {
        self.upto
    }
}

/// Reads one line without its newline, keeping its first [`MAX_LINE_BYTES`]; `false` at the
/// end of the file before a newline.
fn read_line(reader: &mut BufReader<File>, line: &mut Vec<u8>) -> io::Result<bool> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        let (used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, Some(at)),
            None => (buf.len(), None),
        };
        let body = &buf[..done.unwrap_or(used)];
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&body[..body.len().min(room)]);
        reader.consume(used);
        if done.is_some() {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A path in a fresh directory that lives as long as the returned guard.
    fn temp_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("followed");
        (dir, path)
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
    }

    fn lines(follow: &Follow) -> Vec<(u64, &str)> {
        follow.lines.iter().map(|(n, l)| (*n, l.as_str())).collect()
    }

    #[test]
    fn numbers_complete_lines_and_waits_for_the_rest_of_a_partial_one() {
        let (_dir, path) = temp_path();
        let mut tail = LineFollower::new(&path);
        assert_eq!(tail.poll().unwrap(), Follow::default());
        append(&path, "a\nb\nhal");
        assert_eq!(lines(&tail.poll().unwrap()), [(1, "a"), (2, "b")]);
        assert!(tail.poll().unwrap().lines.is_empty());
        append(&path, "f\n\nc\n");
        assert_eq!(lines(&tail.poll().unwrap()), [(3, "half"), (4, ""), (5, "c")]);
        assert_eq!(tail.line_count(), 5);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_replaced_or_shrunk_file_is_read_again_from_the_start() {
        let (_dir, path) = temp_path();
        let mut tail = LineFollower::new(&path);
        append(&path, "1\n2\n3\n");
        assert_eq!(tail.poll().unwrap().lines.len(), 3);
        // What the trainer does on resume: write the kept lines elsewhere, rename over.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, "1\n2\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        append(&path, "3b\n");
        let follow = tail.poll().unwrap();
        assert!(follow.reset);
        assert_eq!(lines(&follow), [(1, "1"), (2, "2"), (3, "3b")]);
        // Truncation in place.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(2).unwrap();
        let follow = tail.poll().unwrap();
        assert!(follow.reset);
        assert_eq!(lines(&follow), [(1, "1")]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn pages_from_any_line_match_what_the_follower_read() {
        let (_dir, path) = temp_path();
        let mut tail = LineFollower::new(&path);
        let text: String = (1..=3000).map(|n| format!("line {n}\n")).collect();
        append(&path, &text);
        append(&path, "partial");
        tail.poll_to_end().unwrap();
        assert_eq!(tail.index.len(), 2);
        for after in [0, 1, 1023, 1024, 1025, 2999, 3000] {
            let mut pages = tail.pages_after(after).unwrap().unwrap();
            let mut read = Vec::new();
            loop {
                let page = pages.next_page(700).unwrap();
                if page.is_empty() {
                    break;
                }
                assert!(page.len() <= 700);
                read.extend(page);
            }
            let want: Vec<(u64, String)> = (after + 1..=3000).map(|n| (n, format!("line {n}"))).collect();
            assert_eq!(read, want, "after {after}");
        }
        // A replaced file is not the one the follower indexed.
        let other = path.with_extension("new");
        std::fs::write(&other, "other\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(tail.pages_after(0).unwrap().is_none());
    }

    #[test]
    fn overlong_lines_are_cut_but_still_count_as_one_line() {
        let (_dir, path) = temp_path();
        let mut tail = LineFollower::new(&path);
        append(&path, &"x".repeat(MAX_LINE_BYTES + 10));
        assert!(tail.poll().unwrap().lines.is_empty());
        append(&path, "yyy\nnext\n");
        let follow = tail.poll_to_end().unwrap();
        assert_eq!(follow.lines.len(), 2);
        assert_eq!(follow.lines[0].1.len(), MAX_LINE_BYTES);
        assert_eq!((follow.lines[1].0, follow.lines[1].1.as_str()), (2, "next"));
        std::fs::remove_file(&path).unwrap();
    }
}
