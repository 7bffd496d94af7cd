//! The one way the end-to-end tests, the server's tests and the load benchmarks start a real
//! `scalebook serve`: [`Serve`] builds the command and starts it, [`Served`] is the running
//! server with what it printed (its links and tokens), and stops it, and the runs it left, when
//! dropped.
//!
//! It stands apart from the server crate on purpose: the server's tests use it as a
//! dev-dependency, and the end-to-end tests should meet the server only as users do, through
//! its binary and what it prints. What is particular to one user (the server tests' WebSocket
//! client, the browser tests' workspace page, the benchmarks' statistics) stays with that user.

mod announce;
mod class_runs;
mod finished;
mod runs;
mod serve;
pub mod slurm;
mod trace;

pub use announce::{Announcement, READY, announced, origin_of, token_of};
pub use class_runs::write_class_runs;
pub use finished::{STEP_TAGS, write_finished_run};
pub use runs::stop_left_runs;
pub use serve::{Serve, Served};
pub use trace::write_kineto_trace;

use std::io;
use std::path::{Path, PathBuf};

/// The workspace root: servers start here by default, as users run them, so they find
/// `config/` and `static/`. Found at run time, upwards from the test's package (cargo and
/// nextest start a test there): a path compiled in would make every test that links this
/// crate build again in each new clone of the project.
pub fn workspace() -> PathBuf {
    let package = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| std::env::current_dir().unwrap_or_default(), PathBuf::from);
    let package = package.canonicalize().unwrap_or(package);
    package.ancestors().find(|dir| dir.join("scalebook.sh").is_file()).map_or(package.clone(), Path::to_path_buf)
}

/// A binary this workspace builds (`scalebook`, `scalebook-train`), found from the running
/// program: integration tests run from `<target>/<profile>/deps/` and examples from
/// `<target>/<profile>/examples/`, and cargo puts the workspace's binaries one level up.
pub fn workspace_binary(name: &str) -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir =
        exe.parent().and_then(|dir| dir.parent()).ok_or_else(|| io::Error::other(format!("{} has no target directory", exe.display())))?;
    let path = profile_dir.join(name);
    match path.is_file() {
        true => Ok(path),
        false => Err(io::Error::other(format!("{} is not built: run `cargo build --bins` first", path.display()))),
    }
}
