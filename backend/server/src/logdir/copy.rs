//! Copying a logdir run's scalars into its Scalebook run directory's `metrics.jsonl`, where
//! the server's tail and stream pick them up like a trainer's points.
//!
//! Each copy reads only what the event files gained since the last one (a record still being
//! written waits for the next copy), appends its points, then records how far it got in
//! `logdir.json`: bytes read of each file, and the length of `metrics.jsonl` then. A copy cut
//! short between the two (a server killed) leaves `metrics.jsonl` longer than recorded; the
//! next copy cuts it back first and appends the same points again, so every point reaches
//! the file exactly once, in the files' order.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use scalebook_shared::rundir;
use scalebook_shared::tfevents;
use serde::{Deserialize, Serialize};

pub use super::decode::Decoded;
use super::decode::decode;
use super::scan::SourceRun;
use crate::Error;
use crate::store::write_json_atomic;

/// How far a run's event files have been copied (`logdir.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Bytes read of each event file, by name: the end of its last complete record.
    pub files: BTreeMap<String, u64>,
    /// The length of `metrics.jsonl` once their points were appended.
    pub metrics_bytes: u64,
    /// Files no longer read, by name, with why: a damaged record stops its file, once.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stopped: BTreeMap<String, String>,
}

/// What a run's event files gained since a [`Progress`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRecords {
    /// The scalars, as the lines of `metrics.jsonl` they become (encoded as they are read, so
    /// a read holds its bytes, never a point and a tag each), and what else the events held.
    pub contents: Decoded,
    /// Files found damaged by this read, by name, with the error (the byte and the rule).
    pub damaged: BTreeMap<String, String>,
    /// Bytes left unread at the end of each file that has some: a record still being written,
    /// or one cut short for good (damage, to an import).
    pub unread: BTreeMap<String, u64>,
    /// The read stopped at its budget: more is waiting.
    pub more: bool,
    /// Bytes read of each file after this read.
    files: BTreeMap<String, u64>,
}

impl NewRecords {
    /// Whether any file was read further than `since` (points or not: images, a new empty
    /// file), or was found damaged.
    fn advances(&self, since: &Progress) -> bool {
        self.files != since.files || !self.damaged.is_empty()
    }
}

/// Bytes of an event file read at once (more for a record that is longer, up to
/// [`tfevents::MAX_PAYLOAD`]): memory stays bounded whatever the file's size.
const CHUNK_BYTES: u64 = 1 << 20;

/// Reads what `source`'s event files gained since `progress`, at most about `budget` bytes,
/// calling `read_bytes` with the bytes read. A record still being written waits for the next
/// read; a damaged one (bad checksum, impossible length) stops its file, named in `damaged`.
pub fn read_new(source: &SourceRun, progress: &Progress, budget: u64, read_bytes: &mut dyn FnMut(u64)) -> Result<NewRecords, Error> {
    let dir = source.dir();
    let mut new = NewRecords { files: progress.files.clone(), ..NewRecords::default() };
    let mut left = budget;
    // One buffer for every chunk.
    let mut bytes = Vec::new();
    for name in source.files.iter().filter(|name| !progress.stopped.contains_key(*name)) {
        let path = dir.join(name);
        let io_error = |e: io::Error| Error::Logdir { path: path.clone(), message: format!("cannot read it: {e}") };
        let mut file = File::open(&path).map_err(io_error)?;
        let len = file.metadata().map_err(io_error)?.len();
        let mut at = progress.files.get(name).copied().unwrap_or(0);
        if len < at {
            tracing::warn!(
                "{}: shrank from {at} to {len} bytes since it was read; only what is appended after byte {at} is read",
                path.display()
            );
            continue;
        }
        while len - at >= tfevents::HEADER as u64 {
            if left == 0 {
                new.more = true;
                break;
            }
            // A chunk, whose first record's header says how long that record is.
            let chunk = (len - at).min(CHUNK_BYTES.min(left)).max(tfevents::HEADER as u64);
            read_into(&mut bytes, &mut file, at, chunk).map_err(io_error)?;
            let first = match tfevents::record_size(&bytes, at) {
                Ok(size) => size,
                Err(e) => {
                    new.damaged.insert(name.clone(), e.to_string());
                    break;
                }
            };
            if first > len - at {
                break;
            }
            if first > bytes.len() as u64 {
                // A record longer than the chunk: read whole.
                read_into(&mut bytes, &mut file, at, first).map_err(io_error)?;
            }
            read_bytes(bytes.len() as u64);
            left = left.saturating_sub(bytes.len() as u64);
            let (decoded, visited) = decode(&bytes, at);
            new.contents.append(decoded);
            // Damage stops the file where it starts: the records before it were read.
            match visited {
                Ok(resume_at) => at = resume_at.max(at),
                Err(e) => {
                    if let scalebook_shared::Error::EventFile { offset, .. } = &e {
                        at = (*offset).max(at);
                    }
                    new.damaged.insert(name.clone(), e.to_string());
                    break;
                }
            }
        }
        if at < len {
            new.unread.insert(name.clone(), len - at);
        }
        new.files.insert(name.clone(), at);
    }
    Ok(new)
}

/// Reads `n` bytes of `file` from byte `from` into `buffer`, in place of what it held.
fn read_into(buffer: &mut Vec<u8>, file: &mut File, from: u64, n: u64) -> io::Result<()> {
    buffer.clear();
    // Room for exactly what is read: a long record is held once, not in a buffer doubled past it.
    buffer.reserve_exact(usize::try_from(n).unwrap_or(0));
    file.seek(SeekFrom::Start(from))?;
    file.take(n).read_to_end(buffer)?;
    Ok(())
}

/// The copy of one run's event files into its run directory.
#[derive(Debug)]
pub struct EventCopy {
    run_dir: PathBuf,
    progress: Progress,
}

impl EventCopy {
    /// The copy into a new run directory: nothing copied yet.
    pub fn start(run_dir: &Path) -> EventCopy {
        EventCopy { run_dir: run_dir.to_owned(), progress: Progress::default() }
    }

    /// The copy into a run directory an earlier copy wrote: it goes on where that one got to,
    /// and `metrics.jsonl` is cut back to what was recorded (see the module's note).
    pub fn resume(run_dir: &Path) -> Result<EventCopy, Error> {
        let path = run_dir.join(rundir::LOGDIR_PROGRESS);
        let text =
            std::fs::read_to_string(&path).map_err(|e| Error::Logdir { path: path.clone(), message: format!("cannot read it: {e}") })?;
        let progress: Progress = serde_json::from_str(&text).map_err(|e| Error::Logdir { path: path.clone(), message: e.to_string() })?;
        let metrics = run_dir.join(rundir::METRICS);
        let written = std::fs::metadata(&metrics).map_or(0, |m| m.len());
        if written > progress.metrics_bytes {
            tracing::info!(
                "{}: cutting back to {} bytes, the points copied before the last record of progress",
                metrics.display(),
                progress.metrics_bytes
            );
            File::options().write(true).open(&metrics).and_then(|f| f.set_len(progress.metrics_bytes))?;
        } else if written < progress.metrics_bytes {
            tracing::warn!("{} is shorter than the copy left it; points already copied are not copied again", metrics.display());
        }
        Ok(EventCopy { run_dir: run_dir.to_owned(), progress })
    }

    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Appends `new` (read since [`progress`](Self::progress)) to `metrics.jsonl` and records
    /// how far the copy got. Returns the number of points appended.
    pub fn append(&mut self, new: NewRecords) -> io::Result<usize> {
        if !new.advances(&self.progress) {
            return Ok(0);
        }
        let lines = &new.contents.lines;
        if !lines.is_empty() {
            let mut metrics = File::options().create(true).append(true).open(self.run_dir.join(rundir::METRICS))?;
            metrics.write_all(lines)?;
        }
        if !new.damaged.is_empty() {
            // Said where the page shows it: the run's log.
            let mut log = File::options().create(true).append(true).open(self.run_dir.join(rundir::JOB_LOG))?;
            for (name, why) in &new.damaged {
                tracing::warn!("{}: {name}: {why}: the file is not read further", self.run_dir.display());
                writeln!(log, "scalebook: {name}: {why}: the file is not read further")?;
            }
        }
        let mut stopped = std::mem::take(&mut self.progress.stopped);
        stopped.extend(new.damaged);
        let metrics_bytes = self.progress.metrics_bytes + new.contents.lines.len() as u64;
        self.progress = Progress { files: new.files, metrics_bytes, stopped };
        write_json_atomic(&self.run_dir.join(rundir::LOGDIR_PROGRESS), &self.progress)?;
        Ok(new.contents.points)
    }

    /// Reads what `source` gained (at most [`COPY_BUDGET`] bytes) and appends it; `more` says
    /// whether more is waiting.
    pub fn copy(&mut self, source: &SourceRun) -> Result<Copied, Error> {
        let new = read_new(source, &self.progress, COPY_BUDGET, &mut |_| {})?;
        let more = new.more;
        Ok(Copied { points: self.append(new)?, more })
    }
}

/// Bytes of event files one copy reads, so a large file is copied over several passes with
/// its points written as they come, never all held at once.
pub const COPY_BUDGET: u64 = 1 << 20;

/// What one [`EventCopy::copy`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub points: usize,
    pub more: bool,
}

#[cfg(test)]
mod tests {
    use scalebook_shared::metrics::MetricPoint;
    use scalebook_shared::tfevents::{file_version_record, image_record, scalar_record};

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        source: SourceRun,
        run_dir: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let logdir = dir.path().join("logdir");
            let run_dir = dir.path().join("run");
            std::fs::create_dir_all(logdir.join("a")).unwrap();
            std::fs::create_dir_all(&run_dir).unwrap();
            let source = SourceRun { logdir, name: "a".into(), files: vec!["events.out.tfevents.1.h.1.0".into()] };
            std::fs::write(source.dir().join(&source.files[0]), file_version_record(100.0)).unwrap();
            Fixture { _dir: dir, source, run_dir }
        }

        fn append(&self, bytes: &[u8]) {
            let path = self.source.dir().join(&self.source.files[0]);
            File::options().append(true).open(path).unwrap().write_all(bytes).unwrap();
        }

        fn steps(&self) -> Vec<u64> {
            let text = std::fs::read_to_string(self.run_dir.join(rundir::METRICS)).unwrap_or_default();
            text.lines().map(|l| serde_json::from_str::<MetricPoint>(l).unwrap().step).collect()
        }
    }

    #[test]
    fn each_point_is_copied_once_and_a_partial_record_waits() {
        let f = Fixture::new();
        let mut copy = EventCopy::start(&f.run_dir);
        let points = |copy: &mut EventCopy| copy.copy(&f.source).unwrap().points;
        assert_eq!(points(&mut copy), 0);
        f.append(&scalar_record(101.0, 1, "loss", 1.0));
        let second = scalar_record(102.0, 2, "loss", 0.5);
        f.append(&second[..10]);
        assert_eq!(points(&mut copy), 1);
        assert_eq!(points(&mut copy), 0);
        f.append(&second[10..]);
        assert_eq!(points(&mut copy), 1);
        assert_eq!(f.steps(), [1, 2]);
        let file_len = std::fs::metadata(f.source.dir().join(&f.source.files[0])).unwrap().len();
        assert_eq!(copy.progress().files[&f.source.files[0]], file_len);
    }

    #[test]
    fn a_copy_cut_short_is_redone_exactly_once() {
        let f = Fixture::new();
        let mut copy = EventCopy::start(&f.run_dir);
        f.append(&scalar_record(101.0, 1, "loss", 1.0));
        copy.copy(&f.source).unwrap();
        // A server killed after appending step 2's point, before recording its progress.
        let saved = std::fs::read(f.run_dir.join(rundir::LOGDIR_PROGRESS)).unwrap();
        f.append(&scalar_record(102.0, 2, "loss", 0.5));
        copy.copy(&f.source).unwrap();
        std::fs::write(f.run_dir.join(rundir::LOGDIR_PROGRESS), saved).unwrap();
        assert_eq!(f.steps(), [1, 2]);
        let mut resumed = EventCopy::resume(&f.run_dir).unwrap();
        assert_eq!(f.steps(), [1]);
        assert_eq!(resumed.copy(&f.source).unwrap().points, 1);
        assert_eq!(f.steps(), [1, 2]);
    }

    #[test]
    fn a_damaged_file_is_named_with_the_byte_and_the_rule() {
        let f = Fixture::new();
        f.append(b"this is not a record at all");
        let new = read_new(&f.source, &Progress::default(), u64::MAX, &mut |_| {}).unwrap();
        let why = &new.damaged[&f.source.files[0]];
        let expected = format!("byte {}: the record's length fails its checksum", file_version_record(100.0).len());
        assert!(why.starts_with(&expected), "{why}");
    }

    #[test]
    fn an_impossible_length_stops_its_file_once_with_a_line_in_the_log_and_one_chunk_read() {
        let f = Fixture::new();
        f.append(&scalar_record(101.0, 1, "loss", 1.0));
        // A record that claims 4 GB with a good length checksum, then a sparse 1 GiB tail.
        let huge = (4u64 << 30).to_le_bytes();
        let mut header = huge.to_vec();
        header.extend_from_slice(&scalebook_shared::tfevents::masked_crc32c(&huge).to_le_bytes());
        f.append(&header);
        let path = f.source.dir().join(&f.source.files[0]);
        let len = std::fs::metadata(&path).unwrap().len();
        File::options().write(true).open(&path).unwrap().set_len(len + (1 << 30)).unwrap();
        let mut copy = EventCopy::start(&f.run_dir);
        let mut read = 0;
        let new = read_new(&f.source, copy.progress(), COPY_BUDGET, &mut |n| read += n).unwrap();
        assert!(read <= CHUNK_BYTES, "{read} bytes read");
        assert_eq!(copy.append(new).unwrap(), 1);
        let name = &f.source.files[0];
        assert!(copy.progress().stopped[name].contains("more than the"), "{:?}", copy.progress().stopped);
        let log = std::fs::read_to_string(f.run_dir.join(rundir::JOB_LOG)).unwrap();
        assert!(log.starts_with(&format!("scalebook: {name}: byte ")) && log.contains("not read further"), "{log}");
        // Stopped: the next copies read nothing of it and say nothing again.
        let mut read = 0;
        let again = read_new(&f.source, copy.progress(), COPY_BUDGET, &mut |n| read += n).unwrap();
        assert_eq!((read, again.contents.points, again.damaged.len()), (0, 0, 0));
        assert_eq!(copy.copy(&f.source).unwrap().points, 0);
        assert_eq!(std::fs::read_to_string(f.run_dir.join(rundir::JOB_LOG)).unwrap(), log);
    }

    #[test]
    fn a_record_longer_than_a_chunk_is_read_whole_between_the_records_around_it() {
        let f = Fixture::new();
        let image = image_record(102.0, 2, "map", &vec![7; 3 * CHUNK_BYTES as usize / 2], 360, 720);
        // The first chunk starts with short records and ends inside the image; a second image
        // starts a chunk of its own.
        let scalars = |from: u64| -> Vec<u8> { (from..from + 5000).flat_map(|step| scalar_record(100.0, step, "loss", 1.0)).collect() };
        for part in [scalars(0), image.clone(), image, scalars(5000)] {
            f.append(&part);
        }
        let new = read_new(&f.source, &Progress::default(), u64::MAX, &mut |_| {}).unwrap();
        assert!(new.damaged.is_empty(), "{:?}", new.damaged);
        assert_eq!((new.contents.points, new.contents.images), (10_000, 2));
    }

    #[test]
    fn a_large_file_is_read_a_budget_at_a_time() {
        let f = Fixture::new();
        let one = scalar_record(101.0, 1, "loss", 1.0);
        let records: Vec<u8> = (0..3000).flat_map(|_| one.clone()).collect();
        f.append(&records);
        let mut copy = EventCopy::start(&f.run_dir);
        let mut total = 0;
        let mut passes = 0;
        while let Ok(Copied { points, more }) = read_new(&f.source, copy.progress(), 50_000, &mut |_| {}).map(|new| {
            let more = new.more;
            Copied { points: copy.append(new).unwrap(), more }
        }) {
            total += points;
            passes += 1;
            if !more {
                break;
            }
        }
        assert_eq!(total, 3000);
        assert!(passes > 1, "{passes}");
        assert_eq!(f.steps().len(), 3000);
    }
}
