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

use crate::Error;
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
pub fn point_lines(points: Vec<SeqPoint>) -> Result<Vec<(u64, String)>, Error> {
    let line = |p: SeqPoint| serde_json::to_string(&p.point).map(|text| (p.seq, text));
    points.into_iter().map(line).collect::<Result<_, _>>().map_err(|e| Error::ClassRule { field: "points", rule: e.to_string() })
}

/// Runs `work` on the copy's file or directory at `path` on a blocking thread; what fails is
/// said of that path.
async fn blocking<T: Send + 'static>(path: PathBuf, work: impl FnOnce(&Path) -> std::io::Result<T> + Send + 'static) -> Result<T, Error> {
    let at = path.clone();
    match tokio::task::spawn_blocking(move || work(&at)).await {
        Ok(done) => done.map_err(|source| Error::ClassCopy { path, source }),
        Err(e) => Err(Error::ClassCopy { path, source: std::io::Error::other(e) }),
    }
}

/// Makes a copy's directory (or finds it again) and counts the lines its metrics and log hold.
pub async fn open(dir: PathBuf) -> Result<(u64, u64), Error> {
    blocking(dir, |dir| {
        std::fs::create_dir_all(dir)?;
        let count = |name: &str| -> std::io::Result<u64> {
            let mut follower = LineFollower::new(&dir.join(name));
            follower.poll_to_end()?;
            Ok(follower.line_count())
        };
        Ok((count(rundir::METRICS)?, count(rundir::JOB_LOG)?))
    })
    .await
}

/// Appends `text` to the copy's file at `path`.
pub async fn append(path: PathBuf, text: String) -> Result<(), Error> {
    if text.is_empty() {
        return Ok(());
    }
    blocking(path, move |path| std::fs::OpenOptions::new().create(true).append(true).open(path)?.write_all(text.as_bytes())).await
}

/// Empties the copy's metrics (its run rewrote them: the copy starts again from the first line).
pub async fn restart(dir: &Path) -> Result<(), Error> {
    blocking(dir.join(rundir::METRICS), |path| std::fs::write(path, b"")).await
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
