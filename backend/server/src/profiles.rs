//! A run's step profiles: the Chrome-trace file each rank's profiler leaves in the run's
//! profile directory. Only names of the trainer's own form ([`trace_file`]) are listed or
//! served, so no request reaches any other file.

use std::io;
use std::path::{Path, PathBuf};

use scalebook_shared::profile::trace::RankTrace;
use scalebook_shared::profile::{trace_file, trace_rank};
use scalebook_shared::rundir::PROFILE_DIR;

/// The traces of the run in `run_dir` by rank: none before its profiled steps are done (or
/// when it profiles none). The directory is read off the async workers.
pub async fn list(run_dir: &Path) -> io::Result<Vec<RankTrace>> {
    let dir = run_dir.join(PROFILE_DIR);
    tokio::task::spawn_blocking(move || list_dir(&dir)).await.map_err(io::Error::other)?
}

fn list_dir(dir: &Path) -> io::Result<Vec<RankTrace>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut traces = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some(rank) = entry.file_name().to_str().and_then(rank_of_file) else { continue };
        // A plain file only: not a directory, nor a link that could point anywhere.
        if entry.file_type()?.is_file() {
            traces.push(RankTrace { rank, bytes: entry.metadata()?.len() });
        }
    }
    traces.sort_by_key(|t| t.rank);
    Ok(traces)
}

/// The rank whose trace `name` is, if it is exactly what [`trace_file`] names.
fn rank_of_file(name: &str) -> Option<usize> {
    trace_rank(name).filter(|rank| trace_file(*rank) == name)
}

/// The path of the trace of rank `text` (a rank as the list gives it: `0`, `12`) in
/// `run_dir`, or `None` when `text` is not such a number.
pub fn file(run_dir: &Path, text: &str) -> Option<PathBuf> {
    let rank = text.parse::<usize>().ok().filter(|rank| rank.to_string() == text)?;
    Some(run_dir.join(PROFILE_DIR).join(trace_file(rank)))
}

/// The rule for [`file`]'s ranks, for an error message.
pub const RANK_RULE: &str = "a rank is a whole number as the profile list gives it (0, 1, ...)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_rank_numbers_name_a_trace() {
        let run = Path::new("/runs/r1");
        assert_eq!(file(run, "3"), Some(PathBuf::from("/runs/r1/profile/rank3.trace.json")));
        for bad in ["", "+3", "03", "-1", "3.0", "../3", "rank3.trace.json", "3/..", " 3", "99999999999999999999999"] {
            assert_eq!(file(run, bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn the_list_holds_the_ranks_trace_files_only() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list(dir.path()).await.unwrap().is_empty());
        let profile = dir.path().join(PROFILE_DIR);
        std::fs::create_dir_all(profile.join("rank5.trace.json")).unwrap();
        for name in ["rank1.trace.json", "rank0.trace.json", "rank01.trace.json", "rank2.trace.json.tmp", "notes.txt"] {
            std::fs::write(profile.join(name), "[]").unwrap();
        }
        std::os::unix::fs::symlink("/etc/hostname", profile.join("rank4.trace.json")).unwrap();
        let ranks: Vec<(usize, u64)> = list(dir.path()).await.unwrap().into_iter().map(|t| (t.rank, t.bytes)).collect();
        assert_eq!(ranks, [(0, 2), (1, 2)]);
    }
}
