//! A `scalebook serve` process on a free port.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::{workspace_binary, workspace_root};

pub struct Server {
    child: Child,
    /// The URL the server printed, e.g. `http://127.0.0.1:41234/?token=3f9c...`: what a user
    /// opens.
    pub url: String,
    /// The access token from that URL, for API calls and the WebSocket.
    pub token: String,
}

impl Server {
    /// Starts the server with `extra` arguments after `serve --port 0` and waits for the
    /// line that announces its URL.
    pub fn start(extra: &[&str]) -> anyhow::Result<Server> {
        let mut child = Command::new(workspace_binary("scalebook")?)
            .args(["serve", "--port", "0"])
            .args(extra)
            .current_dir(workspace_root())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start scalebook serve")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("Scalebook is ready: ") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => {
                let token = url.split_once("?token=").map(|(_, token)| token.to_owned()).unwrap_or_default();
                Ok(Server { child, url, token })
            }
            Err(_) => {
                let _ = child.kill();
                bail!("scalebook serve did not announce its URL within 30 s")
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
