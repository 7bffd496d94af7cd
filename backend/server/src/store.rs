//! The runs directory: one sub-directory per run, named by its id, holding `run.json` (the
//! record) beside the trainer's outputs. It is the only source of truth about runs: the server
//! keeps no other state that a restart would need.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use scalebook_shared::protocol::{RunId, RunRecord};
use scalebook_shared::rundir;
use serde::Serialize;

use crate::clock;

#[derive(Debug, Clone)]
pub struct RunStore {
    dir: PathBuf,
}

impl RunStore {
    /// Opens (creating if needed) the runs directory. The path is made absolute, because the
    /// trainer is handed paths inside it.
    pub fn open(dir: &Path) -> io::Result<RunStore> {
        std::fs::create_dir_all(dir)?;
        Ok(RunStore { dir: std::fs::canonicalize(dir)? })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of run `id`. A [`RunId`] admits no separator or dot-dot, so this stays
    /// inside the runs directory whatever id a client sent.
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.dir.join(id.as_str())
    }

    /// A served file of run `id`, or `None` for a name outside [`rundir::SERVED`].
    pub fn served_file(&self, id: &RunId, name: &str) -> Option<PathBuf> {
        rundir::SERVED.contains(&name).then(|| self.run_dir(id).join(name))
    }

    /// Creates the directory of a new run and returns its id: the UTC creation time plus a
    /// counter, so ids sort by age and two runs created in the same second still differ.
    pub fn create_run_dir(&self, now: f64) -> io::Result<RunId> {
        let stamp = clock::compact_utc(now as u64);
        for n in 1..=10_000 {
            let Ok(id) = RunId::parse(&format!("{stamp}-{n}")) else { break };
            match std::fs::create_dir(self.run_dir(&id)) {
                Ok(()) => return Ok(id),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!("no free run id for {stamp} in {}", self.dir.display())))
    }

    pub fn write_record(&self, record: &RunRecord) -> io::Result<()> {
        write_json_atomic(&self.run_dir(&record.id).join(rundir::RECORD), record)
    }

    /// Every run whose directory holds a readable record, oldest first. A directory that is
    /// not a run (a stray file, a half-deleted run) is logged as a warning and skipped, so one
    /// damaged run never hides the others.
    pub fn load_all(&self) -> io::Result<Vec<RunRecord>> {
        let mut records = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| RunId::parse(n).ok()) else { continue };
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let path = entry.path().join(rundir::RECORD);
            match read_record(&path) {
                Ok(record) if record.id == id => records.push(record),
                Ok(record) => tracing::warn!("{} names run {}, not {id}; skipped", path.display(), record.id),
                Err(e) => tracing::warn!("skipping run {id}: {e}"),
            }
        }
        records.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(records)
    }
}

fn read_record(path: &Path) -> io::Result<RunRecord> {
    let text = std::fs::read_to_string(path).map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))
}

/// Writes `value` as JSON to `path` through a temporary file and a rename, so a reader (or a
/// server killed mid-write) never sees half a file.
pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    text.push(b'\n');
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// The last `max_bytes` of a file as text (empty when it does not exist): what the state
/// mapping reads the trainer's last words from.
pub fn read_tail(path: &Path, max_bytes: u64) -> io::Result<String> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max_bytes)))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a fresh directory that lives as long as the returned guard.
    fn temp_store() -> (tempfile::TempDir, RunStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::open(dir.path()).unwrap();
        (dir, store)
    }

    #[test]
    fn new_runs_get_distinct_time_ordered_ids() {
        let (_dir, store) = temp_store();
        let a = store.create_run_dir(1_700_000_000.0).unwrap();
        let b = store.create_run_dir(1_700_000_000.5).unwrap();
        let c = store.create_run_dir(1_700_000_001.0).unwrap();
        assert_eq!(a.as_str(), "20231114-221320-1");
        assert_eq!(b.as_str(), "20231114-221320-2");
        assert!(a < b && b < c);
        assert!(store.run_dir(&c).is_dir());
        std::fs::remove_dir_all(store.dir()).unwrap();
    }

    #[test]
    fn only_allow_listed_files_are_served() {
        let (_dir, store) = temp_store();
        let id = RunId::parse("r1").unwrap();
        assert_eq!(store.served_file(&id, "metrics.jsonl"), Some(store.dir().join("r1/metrics.jsonl")));
        for name in ["exit.json", "../run.json", "checkpoints", "", "/etc/passwd"] {
            assert_eq!(store.served_file(&id, name), None, "{name}");
        }
        std::fs::remove_dir_all(store.dir()).unwrap();
    }

    #[test]
    fn the_tail_is_the_end_of_the_file() {
        let (_dir, store) = temp_store();
        let path = store.dir().join("log");
        assert_eq!(read_tail(&path, 10).unwrap(), "");
        std::fs::write(&path, "first line\nsecond line\n").unwrap();
        assert_eq!(read_tail(&path, 12).unwrap(), "second line\n");
        assert_eq!(read_tail(&path, 1000).unwrap(), "first line\nsecond line\n");
        std::fs::remove_dir_all(store.dir()).unwrap();
    }
}
