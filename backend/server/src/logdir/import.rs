//! `scalebook tb import`: every run of a logdir becomes a completed run directory. Runs already
//! imported (or followed) are left as they are, so importing twice changes nothing. A run is
//! copied a budget at a time (memory stays small however large its files), and a damaged file
//! stops the import and removes the runs it made: nothing is left, and the message names the
//! file, the byte and the rule.

use std::collections::BTreeSet;
use std::path::Path;

use scalebook_shared::protocol::{RunId, RunRecord};

use super::copy::{COPY_BUDGET, NewRecords, Progress, read_new};
use super::scan::{self, SourceRun};
use super::{finish_run, is_in_runs_dir, source_dir, start_run};
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

/// Imports the runs `find` found, calling `read_bytes` as their files are read. Each run is
/// copied [`COPY_BUDGET`] bytes at a time, so memory stays bounded whatever the files' size. A
/// damaged file (a bad checksum, an impossible length, a last record cut short) stops the
/// import and removes every run it made, so nothing is written, unless `allow_damaged`: then
/// what could be read is imported and what was skipped is said.
pub fn import(
    store: &RunStore,
    found: Vec<Found>,
    allow_damaged: bool,
    read_bytes: &mut dyn FnMut(u64),
) -> Result<Vec<(SourceRun, Outcome)>, Error> {
    let mut outcomes = Vec::new();
    let mut made = Vec::new();
    for Found { source, existing } in found {
        let outcome = match existing {
            Some(id) => Ok(Outcome::AlreadyThere { id }),
            None => import_run(store, &source, allow_damaged, read_bytes, &mut made),
        };
        match outcome {
            Ok(outcome) => outcomes.push((source, outcome)),
            Err(e) => {
                for id in made {
                    let _ = std::fs::remove_dir_all(store.run_dir(&id));
                }
                return Err(e);
            }
        }
    }
    Ok(outcomes)
}

/// Imports one run, a budget at a time; its id joins `made` as soon as its directory exists.
fn import_run(
    store: &RunStore,
    source: &SourceRun,
    allow_damaged: bool,
    read_bytes: &mut dyn FnMut(u64),
    made: &mut Vec<RunId>,
) -> Result<Outcome, Error> {
    let refuse = |name: &str, why: &str| {
        let message = format!("{why}; nothing was imported (--allow-damaged imports what can be read)");
        Err(Error::Logdir { path: source.dir().join(name), message })
    };
    let mut new = read_new(source, &Progress::default(), COPY_BUDGET, read_bytes)?;
    let (mut record, mut copy) = start_run(store, source, new.contents.first_wall)?;
    made.push(record.id.clone());
    let (mut first, mut last) = (new.contents.first_wall, new.contents.last_wall);
    let (mut points, mut images, mut tags, mut skipped_files) = (0, 0, BTreeSet::new(), Vec::new());
    loop {
        // What is cut short counts only once the files are read to their ends.
        let done = !new.more;
        for (name, why) in skipped(&new).into_iter().filter(|(name, _)| done || new.damaged.contains_key(name)) {
            if !allow_damaged {
                return refuse(&name, &why);
            }
            skipped_files.push(format!("{name}: {why}"));
        }
        first = first.into_iter().chain(new.contents.first_wall).reduce(f64::min);
        last = last.into_iter().chain(new.contents.last_wall).reduce(f64::max);
        points += new.contents.points;
        images += new.contents.images;
        tags.append(&mut new.contents.tags);
        copy.append(new)?;
        if done {
            break;
        }
        new = read_new(source, copy.progress(), COPY_BUDGET, read_bytes)?;
    }
    finish_run(store, &mut record, first, last, false)?;
    tracing::debug!("{}: imported as run {}", source.dir().display(), record.id);
    Ok(Outcome::Imported { record: Box::new(record), points, tags: tags.len(), images, skipped: skipped_files })
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use scalebook_shared::protocol::RunState;
    use scalebook_shared::tfevents;

    use super::*;

    /// A logdir with runs `a` (`scalars` scalars, more than one copy budget's worth) and `b`
    /// (a few, its last record cut short when `cut`).
    fn logdir(dir: &Path, scalars: u64, cut: bool) -> PathBuf {
        let logdir = dir.join("logdir");
        for run in ["a", "b"] {
            std::fs::create_dir_all(logdir.join(run)).unwrap();
        }
        let mut a = tfevents::file_version_record(1.0);
        for step in 0..scalars {
            a.extend(tfevents::scalar_record(2.0 + step as f64, step, "loss", 0.5));
        }
        std::fs::write(logdir.join("a").join(tfevents::file_name(1, "h", 1)), a).unwrap();
        let mut b = tfevents::file_version_record(1.0);
        b.extend(tfevents::scalar_record(3.0, 1, "loss", 0.25));
        if cut {
            b.truncate(b.len() - 2);
        }
        std::fs::write(logdir.join("b").join(tfevents::file_name(1, "h", 1)), b).unwrap();
        logdir
    }

    #[test]
    fn a_run_larger_than_a_budget_is_imported_whole_and_damage_leaves_no_run_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::open(&dir.path().join("runs")).unwrap();
        // About 4.5 MB: two budgets.
        let scalars = COPY_BUDGET / 40 + 10_000;
        let whole = logdir(&dir.path().join("whole"), scalars, false);
        let mut read = 0;
        let outcomes = import(&store, find(&whole, &store).unwrap(), false, &mut |n| read += n).unwrap();
        let Outcome::Imported { record, points, .. } = &outcomes[0].1 else { panic!("{outcomes:?}") };
        assert_eq!(*points as u64, scalars);
        assert!(read > COPY_BUDGET, "{read}");
        let lines = std::fs::read_to_string(store.run_dir(&record.id).join("metrics.jsonl")).unwrap().lines().count();
        assert_eq!(lines as u64, scalars);
        assert_eq!((record.state(), record.created_at, record.ended_at), (RunState::Completed, 1.0, Some(1.0 + scalars as f64)));

        // A cut file in the second run: both runs are gone again, the first one included.
        let other = RunStore::open(&dir.path().join("runs2")).unwrap();
        let cut = logdir(&dir.path().join("cut"), scalars, true);
        let err = import(&other, find(&cut, &other).unwrap(), false, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("record cut short") && err.contains("--allow-damaged"), "{err}");
        assert_eq!(std::fs::read_dir(other.dir()).unwrap().count(), 0);
    }
}
