//! Harness for end-to-end tests: the real `scalebook` server process, a real headless Chromium
//! driven over WebDriver, a prefix-stripping proxy like JupyterHub's, scratch directories
//! with generated training data, installs made by `scalebook.sh install`, a real JupyterHub
//! serving Unix users of its own, and a plain static file server for the static edition.
//! Everything is torn down when its handle drops, so a failing test leaves no process behind.

mod browser;
pub mod by_hand;
pub mod hub;
pub mod install;
pub mod jupyter;
pub mod notebook;
mod proxy;
mod scratch;
mod server;
mod static_site;

pub use browser::{ARROW_RIGHT, Browser, WAIT, free_port};
pub use proxy::PrefixProxy;
pub use scratch::{with_project_data, with_tiny_data};
pub use server::Server;
pub use static_site::StaticSite;
// The workspace root (the server is started there, so it finds `static/` and `config/`), and a
// binary this workspace builds: found as the server's own tests and benchmarks find them.
pub use scalebook_harness::{workspace as workspace_root, workspace_binary};

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
