//! `scalebook tb import`: every run of a logdir becomes a completed run directory. Runs already
//! imported (or followed) are left as they are, so importing twice changes nothing. Every new
//! run's files are read before anything is written: a damaged file stops the import with
//! nothing written, and the message names the file, the byte and the rule.

use std::collections::BTreeSet;
use std::path::Path;

use scalebook_shared::protocol::{RunId, RunRecord};

use super::copy::{NewRecords, Progress, read_new};
use super::scan::{self, SourceRun};
use super::{create_run, is_in_runs_dir, source_dir};
use crate::Error;
use crate::store::RunStore;

/// A run of the logdir, with the run it was imported as before, if it was.
#[derive(Debug, Clone)]
pub struct Found {
    pub source: SourceRun,
    pub existing: Option<RunId>,
}

impl Found {
    /// The bytes an import reads for it.
    pub fn bytes_to_read(&self) -> u64 {
        match self.existing {
            Some(_) => 0,
            None => self.source.files.iter().filter_map(|name| std::fs::metadata(self.source.dir().join(name)).ok()).map(|m| m.len()).sum(),
        }
    }
}

/// What became of one run.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// `skipped`: what was left unread of damaged files (each `file: why`), when allowed.
    Imported {
        record: Box<RunRecord>,
        points: usize,
        tags: usize,
        images: usize,
        skipped: Vec<String>,
    },
    AlreadyThere {
        id: RunId,
    },
}

/// The runs of `logdir` (which must hold some), each with its earlier import.
pub fn find(logdir: &Path, store: &RunStore) -> Result<Vec<Found>, Error> {
    let logdir = scan::resolve(logdir)?;
    let runs = scan::scan_some(&logdir)?;
    let records = store.load_all()?;
    Ok(runs
        .into_iter()
        .filter(|source| !is_in_runs_dir(source, store))
        .map(|source| {
            let existing = records.iter().find(|r| source_dir(r).as_deref() == Some(source.dir().as_path())).map(|r| r.id.clone());
            Found { source, existing }
        })
        .collect())
}

/// Imports the runs `find` found, calling `read_bytes` as their files are read. A damaged
/// file (a bad checksum, an impossible length, a last record cut short) stops the import
/// with nothing written, unless `allow_damaged`: then what could be read is imported and
/// what was skipped is said.
pub fn import(
    store: &RunStore,
    found: Vec<Found>,
    allow_damaged: bool,
    read_bytes: &mut dyn FnMut(u64),
) -> Result<Vec<(SourceRun, Outcome)>, Error> {
    let mut read = Vec::new();
    for Found { source, existing } in found {
        let new = match existing {
            Some(id) => Err(id),
            None => Ok(read_new(&source, &Progress::default(), u64::MAX, read_bytes)?),
        };
        if let Ok(new) = &new
            && let Some((name, why)) = skipped(new).into_iter().next()
            && !allow_damaged
        {
            let message = format!("{why}; nothing was imported (--allow-damaged imports what can be read)");
            return Err(Error::Logdir { path: source.dir().join(name), message });
        }
        read.push((source, new));
    }
    let mut outcomes = Vec::new();
    for (source, new) in read {
        let outcome = match new {
            Err(id) => Outcome::AlreadyThere { id },
            Ok(new) => {
                let skipped = skipped(&new).into_iter().map(|(name, why)| format!("{name}: {why}")).collect();
                let (points, images) = (new.points.len(), new.images);
                let tags = new.points.iter().map(|p| p.tag.as_str()).collect::<BTreeSet<_>>().len();
                let (record, _) = create_run(store, &source, new, false)?;
                tracing::debug!("{}: imported as run {}", source.dir().display(), record.id);
                Outcome::Imported { record: Box::new(record), points, tags, images, skipped }
            }
        };
        outcomes.push((source, outcome));
    }
    Ok(outcomes)
}

/// What a whole read of a run's files left unread, by file: damage, and bytes after the last
/// complete record (the file ends inside one, for good: nothing is writing it).
fn skipped(new: &NewRecords) -> Vec<(String, String)> {
    let damaged = new.damaged.iter().map(|(name, why)| (name.clone(), why.clone()));
    let cut = new
        .unread
        .iter()
        .filter(|(name, _)| !new.damaged.contains_key(*name))
        .map(|(name, bytes)| (name.clone(), format!("its last {bytes} bytes are a record cut short")));
    damaged.chain(cut).collect()
}
