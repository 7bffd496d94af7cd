//! Finding the runs of a logdir as TensorBoard does: a run is a directory that holds event
//! files (`events.out.tfevents.*`), named by its path relative to the logdir (`.` for the
//! logdir itself), and its files are read in name order, which is the order they were started
//! (the name begins with the start time).

use std::path::{Path, PathBuf};

use scalebook_shared::tfevents;

use crate::Error;

/// The rule a logdir must follow, for messages.
const LOGDIR_RULE: &str = "a logdir is a directory holding TensorBoard event files (events.out.tfevents.*), in it or in its subdirectories (one run per directory)";

/// One run of a logdir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRun {
    /// The logdir, absolute and without symbolic links.
    pub logdir: PathBuf,
    /// TensorBoard's name of the run: its directory relative to the logdir.
    pub name: String,
    /// The event files' names, in order.
    pub files: Vec<String>,
}

impl SourceRun {
    /// The directory holding the run's event files.
    pub fn dir(&self) -> PathBuf {
        run_dir(&self.logdir, &self.name)
    }
}

/// The directory of the run `name` of `logdir`.
pub fn run_dir(logdir: &Path, name: &str) -> PathBuf {
    if name == "." { logdir.to_owned() } else { logdir.join(name) }
}

/// `logdir` as runs are recorded against it: absolute, symbolic links resolved. It must be a
/// directory.
pub fn resolve(logdir: &Path) -> Result<PathBuf, Error> {
    let refused = |message: String| Error::Logdir { path: logdir.to_owned(), message };
    let resolved = std::fs::canonicalize(logdir).map_err(|e| refused(format!("cannot open it ({e}): {LOGDIR_RULE}")))?;
    if !resolved.is_dir() {
        return Err(refused(format!("not a directory: {LOGDIR_RULE}")));
    }
    Ok(resolved)
}

/// Every run under `logdir` (resolved by [`resolve`]), in name order; none is not an error
/// here (a followed logdir may still be empty). Symbolic links to directories are not
/// followed, so a link back up the tree cannot loop.
pub fn scan(logdir: &Path) -> Result<Vec<SourceRun>, Error> {
    let mut runs = Vec::new();
    let mut pending = vec![logdir.to_owned()];
    while let Some(dir) = pending.pop() {
        let unreadable = |e: std::io::Error| Error::Logdir { path: dir.clone(), message: format!("cannot list it: {e}") };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(unreadable)? {
            let entry = entry.map_err(unreadable)?;
            let name = entry.file_name();
            let kind = entry.file_type().map_err(unreadable)?;
            match name.to_str() {
                _ if kind.is_dir() => pending.push(entry.path()),
                Some(name) if tfevents::is_event_file(name) && entry.path().is_file() => files.push(name.to_owned()),
                _ => {}
            }
        }
        if !files.is_empty() {
            files.sort();
            let name = match dir.strip_prefix(logdir) {
                Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
                Ok(relative) => relative.to_string_lossy().into_owned(),
                Err(_) => dir.to_string_lossy().into_owned(),
            };
            runs.push(SourceRun { logdir: logdir.to_owned(), name, files });
        }
    }
    runs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(runs)
}

/// [`scan`], refusing a logdir without any event file.
pub fn scan_some(logdir: &Path) -> Result<Vec<SourceRun>, Error> {
    let runs = scan(logdir)?;
    if runs.is_empty() {
        return Err(Error::Logdir { path: logdir.to_owned(), message: format!("no event files: {LOGDIR_RULE}") });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_the_directories_holding_event_files_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = resolve(dir.path()).unwrap();
        for file in [
            "events.out.tfevents.2.host.1.0",
            "base/1GPU/00/logs/events.out.tfevents.20.host.7.0",
            "base/1GPU/00/logs/events.out.tfevents.10.host.7.0",
            "base/1GPU/00/logs/notes.txt",
            "empty/readme.md",
            "mp/events.out.tfevents.5.host.3.0",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
        std::os::unix::fs::symlink(&root, root.join("mp/loop")).unwrap();
        let runs = scan(&root).unwrap();
        let names: Vec<(&str, &[String])> = runs.iter().map(|r| (r.name.as_str(), r.files.as_slice())).collect();
        assert_eq!(
            names,
            [
                (".", &["events.out.tfevents.2.host.1.0".to_owned()][..]),
                ("base/1GPU/00/logs", &["events.out.tfevents.10.host.7.0".to_owned(), "events.out.tfevents.20.host.7.0".to_owned()][..]),
                ("mp", &["events.out.tfevents.5.host.3.0".to_owned()][..]),
            ]
        );
        assert_eq!(runs[1].dir(), root.join("base/1GPU/00/logs"));
        assert_eq!(runs[0].dir(), root);
    }

    #[test]
    fn a_logdir_must_be_a_directory_with_event_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nowhere");
        let err = resolve(&missing).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: cannot open it", missing.display())) && err.contains("events.out.tfevents.*"), "{err}");
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(resolve(&file).unwrap_err().to_string().contains("not a directory"));
        let root = resolve(dir.path()).unwrap();
        let err = scan_some(&root).unwrap_err().to_string();
        assert!(err.contains("no event files: a logdir is a directory holding TensorBoard event files"), "{err}");
    }
}
