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
    /// Opens (creating if needed) the runs directory, made its owner's only: what is in it
    /// (a learner's runs, their logs, the kept class link) is nobody else's business, and a
    /// directory nobody else may enter keeps even the files of older versions to its owner.
    /// The path is made absolute, because the trainer is handed paths inside it.
    pub fn open(dir: &Path) -> io::Result<RunStore> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
                Ok(()) => tracing::info!("the runs directory {} is now yours only (it was mode {mode:o})", dir.display()),
                Err(e) => tracing::warn!("the runs directory {} stays readable by others (mode {mode:o}): {e}", dir.display()),
            }
        }
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

/// Opens `relative` inside `dir` for reading without following any symbolic link on the way:
/// not the file's, not a directory's between. A link a job left in its run directory
/// (`out.log` -> `/etc/passwd`, `profile` -> elsewhere) is refused, never served, and so is
/// anything but a plain file (a FIFO would hold the reader forever).
pub fn open_beneath(dir: &Path, relative: &Path) -> io::Result<std::fs::File> {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::Mode;
    use std::path::Component;

    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let names: Vec<_> = relative
        .components()
        .map(|part| match part {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a plain relative path", relative.display()))),
        })
        .collect::<Result<_, _>>()?;
    let mut fd = open(dir, flags | OFlag::O_DIRECTORY, Mode::empty())?;
    for (at, name) in names.iter().enumerate() {
        let kind = if at + 1 == names.len() { OFlag::O_NONBLOCK } else { OFlag::O_DIRECTORY };
        fd = openat(&fd, *name, flags | kind, Mode::empty()).map_err(|errno| match errno {
            // What O_NOFOLLOW answers for a link, said as what it means.
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                io::Error::new(io::ErrorKind::PermissionDenied, "it is a symbolic link, which is never followed")
            }
            errno => errno.into(),
        })?;
    }
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "it is not a plain file"));
    }
    Ok(file)
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
    fn open_beneath_opens_plain_files_and_refuses_every_link_and_escape() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(run.join("profile")).unwrap();
        std::fs::write(run.join("out.log"), "log").unwrap();
        std::fs::write(run.join("profile/rank0.trace.json"), "{}").unwrap();
        std::fs::write(dir.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), run.join("job.log")).unwrap();
        std::os::unix::fs::symlink("rank0.trace.json", run.join("profile/rank3.trace.json")).unwrap();
        std::os::unix::fs::symlink(run.join("profile"), run.join("maps")).unwrap();
        nix::unistd::mkfifo(&run.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();

        let read = |relative: &str| {
            open_beneath(&run, Path::new(relative)).and_then(|mut f| {
                let mut text = String::new();
                f.read_to_string(&mut text).map(|_| text)
            })
        };
        assert_eq!(read("out.log").unwrap(), "log");
        assert_eq!(read("profile/rank0.trace.json").unwrap(), "{}");
        for refused in ["job.log", "profile/rank3.trace.json", "maps/rank0.trace.json", "fifo", "profile", "../secret", "/etc/passwd"] {
            let e = read(refused).unwrap_err();
            assert!(matches!(e.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::InvalidInput), "{refused}: {e}");
        }
        assert_eq!(read("missing").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_runs_directory_is_its_owners_only_whether_made_or_found() {
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let made = dir.path().join("new/runs");
        RunStore::open(&made).unwrap();
        assert_eq!(mode(&made), 0o700);
        let found = dir.path().join("old");
        std::fs::create_dir(&found).unwrap();
        std::fs::set_permissions(&found, std::fs::Permissions::from_mode(0o755)).unwrap();
        RunStore::open(&found).unwrap();
        assert_eq!(mode(&found), 0o700, "a runs directory of an older version is made private");
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
