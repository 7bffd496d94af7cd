//! The Python tools the tutorial's users read our files with (h5py, TensorBoard's own event
//! reader). `./scalebook.sh test` provides the interpreter (SCALEBOOK_PYTHON) with them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> PathBuf {
    std::env::var_os("SCALEBOOK_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").expect("HOME is set");
        PathBuf::from(home).join(".cache/scalebook/py-venv/bin/python")
    })
}

/// Runs `script` with `arg` as `sys.argv[1]`; its standard output.
pub fn run_python(script: &str, arg: &Path) -> String {
    let out = Command::new(python()).arg("-c").arg(script).arg(arg).output().expect("the test Python (run ./scalebook.sh test)");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
