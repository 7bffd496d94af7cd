//! Harness for end-to-end tests: the real `scalebook` server process, a real headless Chromium
//! driven over WebDriver, a prefix-stripping proxy like JupyterHub's, scratch directories
//! with generated training data, installs made by `scalebook.sh install`, and a real JupyterHub
//! serving Unix users of its own. Everything is torn down when its handle drops, so a failing
//! test leaves no process behind.

mod browser;
pub mod hub;
pub mod install;
pub mod jupyter;
pub mod notebook;
mod proxy;
mod scratch;
mod server;

pub use browser::{ARROW_RIGHT, Browser, WAIT, free_port};
pub use proxy::PrefixProxy;
pub use scratch::with_tiny_data;
pub use server::Server;

use std::path::PathBuf;

/// Reads `output` line by line on a thread of its own (so the child never blocks on a full
/// pipe) and sends what `pick` finds in a line; `pick` may also echo lines.
fn watch_lines(
    output: impl std::io::Read + Send + 'static,
    pick: impl Fn(&str) -> Option<String> + Send + 'static,
) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(output).lines().map_while(Result::ok) {
            if let Some(found) = pick(&line) {
                let _ = tx.send(found);
            }
        }
    });
    rx
}

/// The workspace root: the server is started from here so it finds `static/` and `config/`.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A binary built by this workspace (`scalebook`, `scalebook-train`). Integration tests run
/// from `<target>/<profile>/deps/`, and cargo puts the workspace's binaries one level up.
pub fn workspace_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or_else(|| anyhow::anyhow!("test binary {} has no target directory", exe.display()))?;
    let path = profile_dir.join(name);
    anyhow::ensure!(path.is_file(), "{} is not built; run `cargo build --bins` first", path.display());
    Ok(path)
}
