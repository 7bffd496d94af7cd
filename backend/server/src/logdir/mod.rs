//! TensorBoard logdirs as runs: `scalebook tb import` turns every run of a logdir into a run
//! directory, and `serve --watch-logdir` follows a logdir live (`crate::runs::logdir::follow`),
//! so a PyTorch run of the
//! tutorial (on this machine, or writing to a cluster's shared filesystem) is listed, charted
//! and streamed like a run this server launched.
//!
//! An imported run is an ordinary run directory whose `metrics.jsonl` is copied from the
//! event files ([`copy`]); its record says where it came from ([`RunHandle::Logdir`]), which
//! is also how importing or following the same logdir again finds it instead of making a
//! second one.

pub mod copy;
mod decode;
pub mod import;
pub mod scan;

use std::path::{Path, PathBuf};

use scalebook_shared::layout::{DEFAULT_ORDER, Layout, Sizes};
use scalebook_shared::protocol::{ExecutorSpec, RunHandle, RunRecord, RunState};

use self::copy::{EventCopy, NewRecords};
use self::scan::SourceRun;
use crate::Error;
use crate::clock::now;
use crate::store::RunStore;

/// The logdir run directory a record was read from, if it was.
pub fn source_dir(record: &RunRecord) -> Option<PathBuf> {
    match &record.handle {
        Some(RunHandle::Logdir { logdir, run }) => Some(scan::run_dir(Path::new(logdir), run)),
        _ => None,
    }
}

/// Whether a run was read from a logdir rather than launched here.
pub fn is_logdir_run(record: &RunRecord) -> bool {
    matches!(record.handle, Some(RunHandle::Logdir { .. }))
}

/// Whether `source` is the event directory of a run of `store` itself (a logdir that holds
/// the runs directory): Scalebook's own runs are already runs, never imported again.
pub fn is_in_runs_dir(source: &SourceRun, store: &RunStore) -> bool {
    source.dir().starts_with(store.dir())
}

/// Creates the run directory of `source` with the points read so far (`new`, read from the
/// start of its files): `completed` for an import, `running` for a run being followed. The
/// record is written last and the directory removed if anything fails, so a half-made run is
/// never found. Its id carries the time of its first event, so it sorts with the runs of its
/// day.
pub fn create_run(store: &RunStore, source: &SourceRun, new: NewRecords, live: bool) -> Result<(RunRecord, EventCopy), Error> {
    let (first, last) = (new.contents.first_wall, new.contents.last_wall);
    let (mut record, mut copy) = start_run(store, source, first)?;
    let written = copy.append(new).map_err(Error::from).and_then(|_| finish_run(store, &mut record, first, last, live));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(store.run_dir(&record.id));
        return Err(e);
    }
    Ok((record, copy))
}

/// The directory and the record (not yet written) of a new run of `source` whose first event
/// was at `first_wall` (now, when none had a time): the start of [`create_run`], for an import
/// that copies a large run a budget at a time before [`finish_run`].
pub fn start_run(store: &RunStore, source: &SourceRun, first_wall: Option<f64>) -> Result<(RunRecord, EventCopy), Error> {
    let created_at = first_wall.unwrap_or_else(now);
    let id = store.create_run_dir(created_at)?;
    let dir = store.run_dir(&id);
    let name = match source.name.as_str() {
        "." => source.logdir.file_name().map_or_else(|| ".".to_owned(), |n| n.to_string_lossy().into_owned()),
        name => name.to_owned(),
    };
    let layout = Layout::new(Sizes::default(), DEFAULT_ORDER).expect("a one-rank layout is valid");
    let record = RunRecord {
        history: Vec::new(),
        handle: Some(RunHandle::Logdir { logdir: source.logdir.to_string_lossy().into_owned(), run: source.name.clone() }),
        // Nothing of it runs here; "local" keeps the record readable by every client.
        ..RunRecord::new(id, format!("tensorboard:{name}"), layout, ExecutorSpec::Local, created_at, RunState::Queued)
    };
    Ok((record, EventCopy::start(&dir)))
}

/// Writes the record of a run [`start_run`] began, its events copied: running from its first
/// event's time, and completed at its last one's unless `live`.
pub fn finish_run(
    store: &RunStore,
    record: &mut RunRecord,
    first_wall: Option<f64>,
    last_wall: Option<f64>,
    live: bool,
) -> Result<(), Error> {
    let created_at = first_wall.unwrap_or(record.created_at);
    record.created_at = created_at;
    record.transition(RunState::Running, created_at, None);
    if !live {
        record.transition(RunState::Completed, last_wall.unwrap_or(created_at), None);
    }
    Ok(store.write_record(record)?)
}
