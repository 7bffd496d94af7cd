//! Following a file that another process appends lines to, numbering the lines from 1.
//!
//! Line numbers are the sequence numbers browsers resume from, so they must be what any reader
//! of the file would count: only complete lines (ending in `\n`) are returned; a line still
//! being written waits for its newline. A file that was replaced (the trainer rewrites
//! `metrics.jsonl` through a rename when it resumes) or that shrank is read again from the
//! start, and the caller is told so.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most bytes one poll reads; a large backlog is read over several polls.
const MAX_READ_PER_POLL: u64 = 8 << 20;
/// Bytes kept of one line; the rest of an absurdly long line is dropped.
pub const MAX_LINE_BYTES: usize = 1 << 20;

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
        LineFollower { path: path.to_owned(), inode: None, offset: 0, lines: 0, partial: Vec::new(), truncating: false }
    }

    /// The number of the last complete line read.
    pub fn line_count(&self) -> u64 {
        self.lines
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        self.offset += bytes.len() as u64;
        follow.more = self.offset < meta.len();
        for chunk in bytes.split_inclusive(|&b| b == b'\n') {
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
