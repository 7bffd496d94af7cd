//! A run's step profiles: the Chrome-trace file each rank's profiler leaves in the run's
//! profile directory. Only names of the trainer's own form ([`trace_file`]) are listed or
//! served, so no request reaches any other file.
//!
//! Their [`summary`] is computed here, once per set of files, and kept beside them: a page
//! learns where the steps' time went without downloading hundreds of MB of trace. The pass
//! that summarises a trace also writes its events compactly beside it (`events<R>.bin`, a
//! tenth of its size, see [`Compact`]), from which the timeline's windows are read.

use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use scalebook_shared::profile::trace::{Compact, EXCERPT_PIXELS, ExcerptOf, ProfileSummary, RankSummary, RankTrace, Window};
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
/// of hundreds of MB takes a second and little memory), then kept in `profile/summary.json`
/// with the traces' sizes and times, so later requests read it back until a trace changes.
pub async fn summary(run_dir: &Path) -> io::Result<ProfileSummary> {
    let all = |stamps: Vec<Stamp>| (!stamps.is_empty()).then_some(stamps);
    let summary = computed(run_dir, Some(SUMMARY_FILE.into()), summarising(), all, summarise).await?;
    Ok(summary.unwrap_or_default())
}

/// Rank `rank`'s trace of the run in `run_dir` as a timeline draws it ([`ExcerptOf`]): the
/// whole trace at `pixels` columns, with `window` (in the file's own clock) at as many of its
/// own, as Chrome-trace JSON; `None` when the run has no trace of that rank. Read as a stream
/// (the whole trace's span comes from the summary), two at a time at most. The whole trace at
/// a page's width ([`EXCERPT_PIXELS`]), the first thing every page asks, is kept beside the
/// trace until the trace changes ([`prepare`] makes it as a run ends).
pub async fn excerpt(run_dir: &Path, rank: usize, window: Option<Window>, pixels: u32) -> io::Result<Option<String>> {
    let summary = summary(run_dir).await?;
    match summary.ranks.iter().find(|r| r.rank == rank) {
        Some(traced) => excerpt_of(run_dir, traced, window, pixels).await,
        None => Ok(None),
    }
}

/// [`excerpt`] of the rank `traced` summarises.
async fn excerpt_of(run_dir: &Path, traced: &RankSummary, window: Option<Window>, pixels: u32) -> io::Result<Option<String>> {
    let (rank, whole) = (traced.rank, Window::new(traced.first_us, traced.last_us));
    let kept_as = (window.is_none() && pixels == EXCERPT_PIXELS).then(|| format!("excerpt{rank}.json"));
    let this_rank = move |stamps: Vec<Stamp>| -> Option<Vec<Stamp>> {
        let picked: Vec<Stamp> = stamps.into_iter().filter(|s| s.rank == rank).collect();
        (!picked.is_empty()).then_some(picked)
    };
    computed(run_dir, kept_as, excerpting(), this_rank, move |dir: &Path, stamps: &[Stamp]| {
        let of = ExcerptOf { whole, window, pixels };
        let excerpt = match stamps.first().and_then(|stamp| compact_of(dir, stamp)) {
            Some(compact) => of.read_compact(compact),
            None => {
                let file = store::open_beneath(dir, &Path::new(PROFILE_DIR).join(trace_file(rank)))?;
                of.read(io::BufReader::with_capacity(READ_BUFFER, file))
            }
        };
        Ok(excerpt.map_err(io::Error::other)?.to_json())
    })
    .await
}

/// Makes what the pages of a run's profile ask first, so that none waits: the summary, and
/// each rank's whole trace at a page's width.
pub async fn prepare(run_dir: &Path) -> io::Result<()> {
    for traced in &summary(run_dir).await?.ranks {
        excerpt_of(run_dir, traced, None, EXCERPT_PIXELS).await?;
    }
    Ok(())
}

/// What `compute` makes of the traces of the run in `run_dir` that `of` picks from all of
/// them (`None`: nothing to make), one `turn` at a time however many ask. With `kept_as`, it
/// is kept in the profile directory under that name with the stamps of the traces it was made
/// from, and read back while they are unchanged.
async fn computed<T>(
    run_dir: &Path,
    kept_as: Option<String>,
    turn: &'static tokio::sync::Semaphore,
    of: impl Fn(Vec<Stamp>) -> Option<Vec<Stamp>> + Clone + Send + 'static,
    compute: impl FnOnce(&Path, &[Stamp]) -> io::Result<T> + Send + 'static,
) -> io::Result<Option<T>>
where
    T: Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    let dir = run_dir.to_owned();
    let name = kept_as.clone();
    // The traces picked, and what is kept of them (if it is of them as they are now).
    let look = move || -> io::Result<Option<(Vec<Stamp>, Option<T>)>> {
        let Some(stamps) = of(stamps(&dir.join(PROFILE_DIR))?) else { return Ok(None) };
        let kept = kept_as.as_ref().and_then(|name| read_kept::<T>(&dir, name)).filter(|k| k.stamps == stamps).map(|k| k.value);
        Ok(Some((stamps, kept)))
    };
    match blocking(look.clone()).await? {
        None => return Ok(None),
        Some((_, Some(kept))) => return Ok(Some(kept)),
        Some((_, None)) => {}
    }
    let _turn = turn.acquire().await.map_err(io::Error::other)?;
    let dir = run_dir.to_owned();
    blocking(move || {
        // Another request may have made it while this one waited for its turn.
        let Some((stamps, kept)) = look()? else { return Ok(None) };
        if kept.is_some() {
            return Ok(kept);
        }
        let value = compute(&dir, &stamps)?;
        if let Some(name) = name {
            keep(&dir.join(PROFILE_DIR).join(name), &Kept { stamps, value: &value });
        }
        Ok(Some(value))
    })
    .await
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

/// What is kept beside the traces: a value, with the traces it was made from.
#[derive(Serialize, Deserialize)]
struct Kept<T> {
    stamps: Vec<Stamp>,
    value: T,
}

/// `work` on a thread of the blocking pool, off the async workers.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(io::Error::other)?
}

/// The traces in `dir` (plain files of the trainer's names only), by rank.
fn stamps(dir: &Path) -> io::Result<Vec<Stamp>> {
    let stamp = |(rank, meta): (usize, std::fs::Metadata)| -> io::Result<Stamp> {
        let modified_ns = meta.modified()?.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Ok(Stamp { rank, bytes: meta.len(), modified_ns })
    };
    trace_files(dir)?.into_iter().map(stamp).collect()
}

fn summarise(run_dir: &Path, stamps: &[Stamp]) -> io::Result<ProfileSummary> {
    let (mut ranks, mut unread) = (Vec::new(), Vec::new());
    for stamp in stamps {
        match summarise_rank(run_dir, stamp) {
            Ok(rank) => ranks.push(rank),
            Err(e) => unread.push(format!("rank {}: {e}", stamp.rank)),
        }
    }
    Ok(ProfileSummary::new(ranks, unread))
}

/// The summary of the trace `stamp` names, its events written compactly on the way (a run
/// directory this server cannot write to just goes without).
fn summarise_rank(run_dir: &Path, stamp: &Stamp) -> Result<RankSummary, String> {
    let relative = Path::new(PROFILE_DIR).join(trace_file(stamp.rank));
    let trace = io::BufReader::with_capacity(READ_BUFFER, store::open_beneath(run_dir, &relative).map_err(|e| e.to_string())?);
    let path = compact_path(run_dir, stamp.rank);
    let temporary = path.with_extension("bin.tmp");
    let Ok(out) = std::fs::File::create(&temporary) else {
        return RankSummary::read(stamp.rank, trace).map_err(|e| e.to_string());
    };
    let (summary, written) = RankSummary::read_writing(stamp.rank, trace, io::BufWriter::new(out), &source(stamp))
        .inspect_err(|_| drop(std::fs::remove_file(&temporary)))
        .map_err(|e| e.to_string())?;
    if let Err(e) = written.and_then(|_| std::fs::rename(&temporary, &path)) {
        tracing::warn!("{} is not kept: {e}", path.display());
        let _ = std::fs::remove_file(&temporary);
    }
    Ok(summary)
}

/// Where rank `rank`'s events are written compactly.
fn compact_path(run_dir: &Path, rank: usize) -> PathBuf {
    run_dir.join(PROFILE_DIR).join(format!("events{rank}.bin"))
}

/// What a compact file says it was made from: the trace as it was then.
fn source(stamp: &Stamp) -> String {
    serde_json::to_string(stamp).unwrap_or_default()
}

/// The compact events of the trace `stamp` names, if they were made from it as it is now.
fn compact_of(run_dir: &Path, stamp: &Stamp) -> Option<Compact<std::fs::File>> {
    let name = compact_path(run_dir, stamp.rank).file_name()?.to_owned();
    let file = store::open_beneath(run_dir, &Path::new(PROFILE_DIR).join(name)).ok()?;
    Compact::open(file).ok().filter(|compact| compact.source() == source(stamp))
}

/// What is kept in the profile directory of the run in `run_dir` under `name`, if it reads.
fn read_kept<T: serde::de::DeserializeOwned>(run_dir: &Path, name: &str) -> Option<Kept<T>> {
    let file = store::open_beneath(run_dir, &Path::new(PROFILE_DIR).join(name)).ok()?;
    serde_json::from_reader(io::BufReader::new(file)).ok()
}

/// Keeps `kept` at `path`, beside the traces. A run directory this server cannot write to
/// just goes without.
fn keep<T: Serialize>(path: &Path, kept: &Kept<&T>) {
    if let Err(e) = store::write_json_atomic(path, kept) {
        tracing::warn!("{} is not kept: {e}", path.display());
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

    #[test]
    fn compact_events_are_read_only_while_their_trace_is_as_they_were_made_from() {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join(PROFILE_DIR);
        std::fs::create_dir_all(&profile).unwrap();
        let trace = r#"[{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]"#;
        std::fs::write(profile.join(trace_file(0)), trace).unwrap();
        let stamp = stamps(&profile).unwrap().remove(0);
        let summary = summarise_rank(dir.path(), &stamp).unwrap();
        assert_eq!((summary.first_us, summary.last_us), (10.0, 15.0));
        assert!(compact_of(dir.path(), &stamp).is_some());
        assert!(!profile.join("events0.bin.tmp").exists());
        // The trace changed since: its old events are not read.
        let changed = Stamp { bytes: stamp.bytes + 1, ..stamp.clone() };
        assert!(compact_of(dir.path(), &changed).is_none());
        // Nor is a file that is not whole.
        let path = compact_path(dir.path(), 0);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(compact_of(dir.path(), &stamp).is_none());
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
