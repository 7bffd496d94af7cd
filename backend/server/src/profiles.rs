//! A run's step profiles: the Chrome-trace file each rank's profiler leaves in the run's
//! profile directory. Only names of the trainer's own form ([`trace_file`]) are listed or
//! served, so no request reaches any other file.
//!
//! Their [`summary`] is computed here, once per set of files, and kept beside them: a page
//! learns where the steps' time went without downloading hundreds of MB of trace.

use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use scalebook_shared::profile::trace::{EXCERPT_PIXELS, ExcerptOf, ProfileSummary, RankSummary, RankTrace, Window};
use scalebook_shared::profile::{trace_file, trace_rank};
use scalebook_shared::rundir::PROFILE_DIR;
use serde::{Deserialize, Serialize};

use crate::store;

/// The summary kept beside the traces (not a trace's name, so never listed nor served as one).
const SUMMARY_FILE: &str = "summary.json";
/// Bytes read from a trace at a time.
const READ_BUFFER: usize = 1 << 20;

/// The traces of the run in `run_dir` by rank: none before its profiled steps are done (or
/// when it profiles none). The directory is read off the async workers.
pub async fn list(run_dir: &Path) -> io::Result<Vec<RankTrace>> {
    let dir = run_dir.join(PROFILE_DIR);
    tokio::task::spawn_blocking(move || list_dir(&dir)).await.map_err(io::Error::other)?
}

fn list_dir(dir: &Path) -> io::Result<Vec<RankTrace>> {
    Ok(trace_files(dir)?.into_iter().map(|(rank, meta)| RankTrace { rank, bytes: meta.len() }).collect())
}

/// The trace files in `dir` by rank, with what the directory says of each.
fn trace_files(dir: &Path) -> io::Result<Vec<(usize, std::fs::Metadata)>> {
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
            traces.push((rank, entry.metadata()?));
        }
    }
    traces.sort_by_key(|(rank, _)| *rank);
    Ok(traces)
}

/// The summary of the run's profile in `run_dir` (empty before its traces are written).
/// Computed from the traces as streams, one run at a time however many pages ask (a trace
/// of hundreds of MB takes seconds and little memory), then kept in `profile/summary.json`
/// with the traces' sizes and times, so later requests read it back until a trace changes.
pub async fn summary(run_dir: &Path) -> io::Result<ProfileSummary> {
    let dir = run_dir.to_owned();
    let kept = move || -> io::Result<(Vec<Stamp>, Option<ProfileSummary>)> {
        let stamps = stamps(&dir.join(PROFILE_DIR))?;
        let summary = read_kept(&dir).filter(|k| k.stamps == stamps).map(|k| k.summary);
        Ok((stamps, summary))
    };
    match tokio::task::spawn_blocking(kept.clone()).await.map_err(io::Error::other)?? {
        (stamps, _) if stamps.is_empty() => return Ok(ProfileSummary::default()),
        (_, Some(summary)) => return Ok(summary),
        _ => {}
    }
    let _turn = summarising().acquire().await.map_err(io::Error::other)?;
    let dir = run_dir.to_owned();
    tokio::task::spawn_blocking(move || {
        // Another request may have computed it while this one waited for its turn.
        let (stamps, summary) = kept()?;
        if let Some(summary) = summary {
            return Ok(summary);
        }
        let kept = Kept { summary: summarise(&dir, &stamps), stamps };
        keep(&dir, &kept);
        Ok(kept.summary)
    })
    .await
    .map_err(io::Error::other)?
}

/// Rank `rank`'s trace of the run in `run_dir` as a timeline draws it ([`ExcerptOf`]): the
/// whole trace at `pixels` columns, with `window` (in the file's own clock) at as many of its
/// own, as Chrome-trace JSON; `None` when the run has no trace of that rank. Read as a stream
/// (the whole trace's span comes from the summary), two at a time at most. The whole trace at
/// a page's width ([`EXCERPT_PIXELS`]), the first thing every page asks, is kept beside the
/// trace until the trace changes ([`prepare`] makes it as a run ends).
pub async fn excerpt(run_dir: &Path, rank: usize, window: Option<Window>, pixels: u32) -> io::Result<Option<String>> {
    let summary = summary(run_dir).await?;
    let Some(whole) = summary.ranks.iter().find(|r| r.rank == rank).map(|r| Window::new(r.first_us, r.last_us)) else {
        return Ok(None);
    };
    let kept = (window.is_none() && pixels == EXCERPT_PIXELS).then(|| Path::new(PROFILE_DIR).join(format!("excerpt{rank}.json")));
    let dir = run_dir.to_owned();
    let read_kept = {
        let (dir, kept) = (dir.clone(), kept.clone());
        move || -> io::Result<Option<String>> {
            let Some(kept) = kept else { return Ok(None) };
            let stamp = stamps(&dir.join(PROFILE_DIR))?.into_iter().find(|s| s.rank == rank);
            let file = store::open_beneath(&dir, &kept).ok();
            let read: Option<KeptExcerpt> = file.and_then(|f| serde_json::from_reader(io::BufReader::new(f)).ok());
            Ok(read.filter(|k| Some(&k.stamp) == stamp.as_ref()).map(|k| k.json))
        }
    };
    if let Some(json) = tokio::task::spawn_blocking(read_kept.clone()).await.map_err(io::Error::other)?? {
        return Ok(Some(json));
    }
    let _turn = excerpting().acquire().await.map_err(io::Error::other)?;
    tokio::task::spawn_blocking(move || {
        // Another request may have kept it while this one waited for its turn.
        if let Some(json) = read_kept()? {
            return Ok(Some(json));
        }
        let stamp = stamps(&dir.join(PROFILE_DIR))?.into_iter().find(|s| s.rank == rank);
        let file = store::open_beneath(&dir, &Path::new(PROFILE_DIR).join(trace_file(rank)))?;
        let excerpt = ExcerptOf { whole, window, pixels }.read(io::BufReader::with_capacity(READ_BUFFER, file));
        let json = excerpt.map_err(io::Error::other)?.to_json();
        if let (Some(kept), Some(stamp)) = (kept, stamp) {
            let path = dir.join(kept);
            if let Err(e) = store::write_json_atomic(&path, &KeptExcerpt { stamp, json: json.clone() }) {
                tracing::warn!("the excerpt is not kept in {}: {e}", path.display());
            }
        }
        Ok(Some(json))
    })
    .await
    .map_err(io::Error::other)?
}

/// Makes what the pages of a run's profile ask first, so that none waits: the summary, and
/// each rank's whole trace at a page's width.
pub async fn prepare(run_dir: &Path) -> io::Result<()> {
    for rank in summary(run_dir).await?.ranks.iter().map(|r| r.rank) {
        excerpt(run_dir, rank, None, EXCERPT_PIXELS).await?;
    }
    Ok(())
}

/// A whole-trace excerpt kept beside its trace, with the trace as it was read.
#[derive(Serialize, Deserialize)]
struct KeptExcerpt {
    stamp: Stamp,
    json: String,
}

/// Excerpts read at once, at most: each is one pass over a trace, a core's work.
fn excerpting() -> &'static tokio::sync::Semaphore {
    static TURN: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
    &TURN
}

/// One summary computed at a time: each streams its traces at the disk's pace, and the
/// async workers (everyone else's messages) keep the rest of the machine.
fn summarising() -> &'static tokio::sync::Semaphore {
    static TURN: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);
    &TURN
}

/// A trace file as the summary saw it: rank, size and modification time (ns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    rank: usize,
    bytes: u64,
    modified_ns: u128,
}

#[derive(Serialize, Deserialize)]
struct Kept {
    stamps: Vec<Stamp>,
    summary: ProfileSummary,
}

/// The traces in `dir` (plain files of the trainer's names only), by rank.
fn stamps(dir: &Path) -> io::Result<Vec<Stamp>> {
    let stamp = |(rank, meta): (usize, std::fs::Metadata)| -> io::Result<Stamp> {
        let modified_ns = meta.modified()?.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Ok(Stamp { rank, bytes: meta.len(), modified_ns })
    };
    trace_files(dir)?.into_iter().map(stamp).collect()
}

fn summarise(run_dir: &Path, stamps: &[Stamp]) -> ProfileSummary {
    let (mut ranks, mut unread) = (Vec::new(), Vec::new());
    for stamp in stamps {
        let relative = Path::new(PROFILE_DIR).join(trace_file(stamp.rank));
        let read = store::open_beneath(run_dir, &relative)
            .map_err(|e| e.to_string())
            .and_then(|file| RankSummary::read(stamp.rank, io::BufReader::with_capacity(READ_BUFFER, file)).map_err(|e| e.to_string()));
        match read {
            Ok(rank) => ranks.push(rank),
            Err(e) => unread.push(format!("rank {}: {e}", stamp.rank)),
        }
    }
    ProfileSummary::new(ranks, unread)
}

fn read_kept(run_dir: &Path) -> Option<Kept> {
    let file = store::open_beneath(run_dir, &Path::new(PROFILE_DIR).join(SUMMARY_FILE)).ok()?;
    serde_json::from_reader(io::BufReader::new(file)).ok()
}

/// Keeps the summary beside the traces. A run directory this server cannot write to just
/// goes without.
fn keep(run_dir: &Path, kept: &Kept) {
    let path = run_dir.join(PROFILE_DIR).join(SUMMARY_FILE);
    if let Err(e) = store::write_json_atomic(&path, kept) {
        tracing::warn!("the profile summary is not kept in {}: {e}", path.display());
    }
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
