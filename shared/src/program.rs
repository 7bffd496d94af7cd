//! How Scalebook's programs start themselves again: the server its runs' supervisor, the
//! trainer's launcher its ranks.

use std::path::PathBuf;

/// What Linux's `/proc/self/exe` appends once the program's file was replaced or removed.
const DELETED: &str = " (deleted)";

/// The path to start this program again from, given what the system reports as this
/// process's own (`std::env::current_exe`). Once the file was replaced under a running
/// process (a rebuild, or an install writing aside and renaming into place: a class's server
/// runs for hours), Linux reports the old path with " (deleted)" appended, and starting that
/// fails, so every later run of that server failed to start. The file now at the path is the
/// program built again, and is what to start.
pub fn restartable(current: PathBuf) -> PathBuf {
    match current.to_str().and_then(|path| path.strip_suffix(DELETED)) {
        Some(path) => PathBuf::from(path),
        None => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_program_is_started_from_its_path_again() {
        let replaced = PathBuf::from("/cache/target/release/scalebook-train (deleted)");
        assert_eq!(restartable(replaced), PathBuf::from("/cache/target/release/scalebook-train"));
        let intact = PathBuf::from("/usr/local/bin/scalebook");
        assert_eq!(restartable(intact.clone()), intact);
    }
}
