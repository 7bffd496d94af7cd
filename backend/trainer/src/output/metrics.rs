//! `metrics.jsonl`: the run's metric points, one JSON object a line. Each line goes out in a
//! single write and is flushed at once, so the server tailing the file sees whole lines within
//! moments of the step that produced them.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use scalebook_shared::metrics::MetricPoint;

use crate::Error;

pub struct MetricsWriter {
    path: PathBuf,
    file: File,
}

impl MetricsWriter {
    /// Opens `path` for appending. With `keep_through = Some(step)` (a resumed run), points
    /// after `step` — written by the interrupted run after its last checkpoint, and about to
    /// be produced again — are dropped first, so the curve continues without duplicates.
    pub fn open(path: &Path, keep_through: Option<u64>) -> Result<MetricsWriter, Error> {
        if let Some(step) = keep_through
            && path.exists()
        {
            truncate_after(path, step)?;
        }
        let file = File::options().create(true).append(true).open(path).map_err(|e| Error::io(path, e))?;
        Ok(MetricsWriter { path: path.to_owned(), file })
    }

    pub fn write(&mut self, step: u64, epoch: u64, tag: &str, value: f64) -> Result<(), Error> {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let point = MetricPoint { step, epoch, wall, tag: tag.to_owned(), value };
        let mut line = serde_json::to_string(&point).map_err(|e| Error::io(&self.path, e.into()))?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(|e| Error::io(&self.path, e))?;
        self.file.flush().map_err(|e| Error::io(&self.path, e))
    }
}

/// Rewrites `path` keeping only the points up to `step` (and any unparsable lines dropped).
fn truncate_after(path: &Path, step: u64) -> Result<(), Error> {
    let reader = BufReader::new(File::open(path).map_err(|e| Error::io(path, e))?);
    let mut kept = String::new();
    for line in reader.lines() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if serde_json::from_str::<MetricPoint>(&line).is_ok_and(|p| p.step <= step) {
            kept.push_str(&line);
            kept.push('\n');
        }
    }
    let tmp = path.with_extension("jsonl.tmp");
    std::fs::write(&tmp, kept).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(path: &Path) -> Vec<MetricPoint> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn points_are_visible_as_soon_as_written_and_resume_drops_the_replayed_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let mut w = MetricsWriter::open(&path, None).unwrap();
        for step in 0..6 {
            w.write(step, 1, "Loss/train", step as f64).unwrap();
            // Readable by another reader right away, without closing the writer.
            assert_eq!(points(&path).len() as u64, step + 1);
        }
        drop(w);
        let mut w = MetricsWriter::open(&path, Some(3)).unwrap();
        assert_eq!(points(&path).iter().map(|p| p.step).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        w.write(4, 2, "Loss/train", 4.5).unwrap();
        let steps: Vec<_> = points(&path).iter().map(|p| (p.step, p.value)).collect();
        assert_eq!(steps, vec![(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.5)]);
    }
}
