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

use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::rundir;
use scalebook_shared::tfevents;
use serde::{Deserialize, Serialize};

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
}

/// What a run's event files gained since a [`Progress`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRecords {
    pub points: Vec<MetricPoint>,
    /// Image summaries (listed, not copied).
    pub images: usize,
    /// The earliest and latest wall times of the events read.
    pub first_wall: Option<f64>,
    pub last_wall: Option<f64>,
    /// Bytes read of each file after this read.
    files: BTreeMap<String, u64>,
}

impl NewRecords {
    /// Whether any file was read further than `since` (points or not: images, a new empty
    /// file).
    fn advances(&self, since: &Progress) -> bool {
        self.files != since.files
    }
}

/// Reads what `source`'s event files gained since `progress`, calling `read_bytes` with the
/// bytes read from each file. A damaged record is an error naming its file and byte.
pub fn read_new(source: &SourceRun, progress: &Progress, read_bytes: &mut dyn FnMut(u64)) -> Result<NewRecords, Error> {
    let dir = source.dir();
    let mut new = NewRecords { files: progress.files.clone(), ..NewRecords::default() };
    for name in &source.files {
        let path = dir.join(name);
        let offset = progress.files.get(name).copied().unwrap_or(0);
        let io_error = |e: io::Error| Error::Logdir { path: path.clone(), message: format!("cannot read it: {e}") };
        let mut file = File::open(&path).map_err(io_error)?;
        let len = file.metadata().map_err(io_error)?.len();
        if len < offset {
            tracing::warn!(
                "{}: shrank from {offset} to {len} bytes since it was read; only what is appended after byte {offset} is read",
                path.display()
            );
            continue;
        }
        file.seek(SeekFrom::Start(offset)).map_err(io_error)?;
        let mut bytes = Vec::new();
        file.take(len - offset).read_to_end(&mut bytes).map_err(io_error)?;
        read_bytes(bytes.len() as u64);
        let contents = tfevents::read(&bytes, offset).map_err(|e| Error::Logdir { path: path.clone(), message: e.to_string() })?;
        for wall in contents.events.iter().map(|e| e.wall_time) {
            new.first_wall = Some(new.first_wall.map_or(wall, |w| w.min(wall)));
            new.last_wall = Some(new.last_wall.map_or(wall, |w| w.max(wall)));
        }
        new.points.extend(contents.points());
        new.images += contents.images().len();
        new.files.insert(name.clone(), contents.resume_at);
    }
    Ok(new)
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
        let mut lines = Vec::new();
        for point in &new.points {
            serde_json::to_writer(&mut lines, point).map_err(io::Error::other)?;
            lines.push(b'\n');
        }
        if !lines.is_empty() {
            let mut metrics = File::options().create(true).append(true).open(self.run_dir.join(rundir::METRICS))?;
            metrics.write_all(&lines)?;
        }
        self.progress = Progress { files: new.files, metrics_bytes: self.progress.metrics_bytes + lines.len() as u64 };
        write_json_atomic(&self.run_dir.join(rundir::LOGDIR_PROGRESS), &self.progress)?;
        Ok(new.points.len())
    }

    /// Reads what `source` gained and appends it.
    pub fn copy(&mut self, source: &SourceRun) -> Result<usize, Error> {
        let new = read_new(source, &self.progress, &mut |_| {})?;
        Ok(self.append(new)?)
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::tfevents::{file_version_record, scalar_record};

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
        assert_eq!(copy.copy(&f.source).unwrap(), 0);
        f.append(&scalar_record(101.0, 1, "loss", 1.0));
        let second = scalar_record(102.0, 2, "loss", 0.5);
        f.append(&second[..10]);
        assert_eq!(copy.copy(&f.source).unwrap(), 1);
        assert_eq!(copy.copy(&f.source).unwrap(), 0);
        f.append(&second[10..]);
        assert_eq!(copy.copy(&f.source).unwrap(), 1);
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
        assert_eq!(resumed.copy(&f.source).unwrap(), 1);
        assert_eq!(f.steps(), [1, 2]);
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_and_the_byte() {
        let f = Fixture::new();
        f.append(b"this is not a record at all");
        let err = read_new(&f.source, &Progress::default(), &mut |_| {}).unwrap_err().to_string();
        let path = f.source.dir().join(&f.source.files[0]);
        let expected = format!("{}: byte {}: the record's length fails its checksum", path.display(), file_version_record(100.0).len());
        assert!(err.starts_with(&expected), "{err}");
    }
}
