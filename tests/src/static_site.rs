//! A plain static file server, with no Scalebook anywhere: Python's `http.server` over a
//! directory, as a learner or a project page would serve the static edition. It keeps the
//! request lines it logs, so a test can say what the page asked for and what it got.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use crate::watch_lines;

pub struct StaticSite {
    child: Child,
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl StaticSite {
    /// Serves `root` on a free port of 127.0.0.1; returns once the server listens.
    pub fn serve(root: &Path) -> anyhow::Result<StaticSite> {
        // Port 0: the server picks a free port and says which (unbuffered, `-u`, so it says so
        // at once).
        let mut child = Command::new("python3")
            .args(["-u", "-m", "http.server", "--bind", "127.0.0.1", "0", "--directory"])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start python3 -m http.server")?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        // Its log: one line per request, `"GET /path HTTP/1.1" 200 -`.
        let _log = watch_lines(child.stderr.take().context("no stderr")?, move |line| {
            if let (Some(start), Ok(mut kept)) = (line.find("\"GET "), kept.lock()) {
                kept.push(line[start..].to_owned());
            }
            None
        });
        let ports = watch_lines(child.stdout.take().context("no stdout")?, |line| {
            // "Serving HTTP on 127.0.0.1 port 41235 (http://127.0.0.1:41235/) ..."
            line.split_once(" port ").and_then(|(_, rest)| rest.split_whitespace().next()).map(str::to_owned)
        });
        let mut site = StaticSite { child, port: 0, requests };
        let port = ports.recv_timeout(Duration::from_secs(30)).context("http.server never said which port it listens on")?;
        site.port = port.parse().with_context(|| format!("http.server's port {port:?}"))?;
        Ok(site)
    }

    /// The address of `path` (starting with `/`) on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The request lines logged so far (`"GET /path HTTP/1.1" 200 -`).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for StaticSite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
