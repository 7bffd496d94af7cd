//! `scalebook tb import`: every run of a logdir becomes a completed run directory. Runs already
//! imported (or followed) are left as they are, so importing twice changes nothing. Every new
//! run's files are read before anything is written: a damaged file stops the import with
//! nothing written, and the message names the file, the byte and the rule.

use std::collections::BTreeSet;
use std::path::Path;

use scalebook_shared::protocol::{RunId, RunRecord};

use super::copy::{Progress, read_new};
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
    Imported { record: Box<RunRecord>, points: usize, tags: usize, images: usize },
    AlreadyThere { id: RunId },
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

/// Imports the runs `find` found, calling `read_bytes` as their files are read.
pub fn import(store: &RunStore, found: Vec<Found>, read_bytes: &mut dyn FnMut(u64)) -> Result<Vec<(SourceRun, Outcome)>, Error> {
    let mut read = Vec::new();
    for Found { source, existing } in found {
        let new = match existing {
            Some(id) => Err(id),
            None => Ok(read_new(&source, &Progress::default(), read_bytes)?),
        };
        read.push((source, new));
    }
    let mut outcomes = Vec::new();
    for (source, new) in read {
        let outcome = match new {
            Err(id) => Outcome::AlreadyThere { id },
            Ok(new) => {
                let (points, images) = (new.points.len(), new.images);
                let tags = new.points.iter().map(|p| p.tag.as_str()).collect::<BTreeSet<_>>().len();
                let (record, _) = create_run(store, &source, new, false)?;
                tracing::debug!("{}: imported as run {}", source.dir().display(), record.id);
                Outcome::Imported { record: Box::new(record), points, tags, images }
            }
        };
        outcomes.push((source, outcome));
    }
    Ok(outcomes)
}
