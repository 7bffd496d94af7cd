//! A class's run copied line for line from the server it trains on (the instructor's runs on a
//! follower, a learner's shared run on the instructor's): the copy's `metrics.jsonl` and
//! `job.log` hold the other side's lines at the same line numbers. Line numbers are the
//! protocol's sequence numbers, so a copy's length is where its stream resumes after a lost
//! connection, and each point is written exactly once. A line that carries nothing here (damaged
//! by a crash mid-write, or a log line no longer kept) is kept as an empty line, so the numbers
//! stay aligned.

use std::io::Write;
use std::path::{Path, PathBuf};

use scalebook_shared::protocol::SeqPoint;
use scalebook_shared::rundir;

use crate::stream::tail::LineFollower;

/// The text that appends numbered `lines` (in order) to a file of `held` lines, and the lines it
/// will then hold: lines already held are skipped, and a number that carries nothing here
/// becomes an empty line, so the numbers stay the same on both sides.
pub fn numbered(held: u64, lines: impl IntoIterator<Item = (u64, String)>) -> (String, u64) {
    let mut text = String::new();
    let mut upto = held;
    for (seq, line) in lines.into_iter().filter(|(seq, _)| *seq > held) {
        text.extend(std::iter::repeat_n("\n", (seq - upto - 1) as usize));
        text.push_str(&line);
        text.push('\n');
        upto = seq;
    }
    (text, upto)
}

/// `points` as numbered metrics lines.
pub fn point_lines(points: Vec<SeqPoint>) -> Result<Vec<(u64, String)>, String> {
    points.into_iter().map(|p| Ok((p.seq, serde_json::to_string(&p.point).map_err(|e| e.to_string())?))).collect()
}

/// Makes a copy's directory (or finds it again) and counts the lines its metrics and log hold.
pub async fn open(dir: PathBuf) -> Result<(u64, u64), String> {
    let shown = dir.display().to_string();
    let counted = tokio::task::spawn_blocking(move || -> std::io::Result<(u64, u64)> {
        std::fs::create_dir_all(&dir)?;
        let count = |name: &str| -> std::io::Result<u64> {
            let mut follower = LineFollower::new(&dir.join(name));
            follower.poll_to_end()?;
            Ok(follower.line_count())
        };
        Ok((count(rundir::METRICS)?, count(rundir::JOB_LOG)?))
    });
    counted.await.map_err(|e| e.to_string())?.map_err(|e| format!("cannot keep a class run's copy in {shown}: {e}"))
}

/// Appends `text` to the copy's file at `path`.
pub async fn append(path: PathBuf, text: String) -> Result<(), String> {
    if text.is_empty() {
        return Ok(());
    }
    let write = move || std::fs::OpenOptions::new().create(true).append(true).open(&path)?.write_all(text.as_bytes());
    tokio::task::spawn_blocking(write).await.map_err(|e| e.to_string())?.map_err(|e| format!("cannot write a class run's copy: {e}"))
}

/// Empties the copy's metrics (its run rewrote them: the copy starts again from the first line).
pub async fn restart(dir: &Path) -> Result<(), String> {
    let path = dir.join(rundir::METRICS);
    tokio::task::spawn_blocking(move || std::fs::write(path, b"")).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_numbers_once_each() {
        let line = |seq: u64| (seq, format!("l{seq}"));
        assert_eq!(numbered(2, [line(1), line(2), line(3), line(6)]), ("l3\n\n\nl6\n".to_owned(), 6));
        assert_eq!(numbered(6, [line(5), line(6)]), (String::new(), 6));
    }
}
