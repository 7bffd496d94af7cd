//! A `scalebook serve` process on a free port, started in the workspace or in a scratch
//! working directory of its own (with its own runs and data).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::{watch_lines, workspace_binary, workspace_root};

pub struct Server {
    child: Child,
    /// The URL the server printed, e.g. `http://127.0.0.1:41234/#token=3f9c...`: what a user
    /// opens.
    pub url: String,
    /// The access token from that URL, for API calls and the WebSocket.
    pub token: String,
    pub addr: SocketAddr,
    /// The server's working directory: where its runs directory is and where trainer
    /// processes resolve relative data paths.
    pub workdir: PathBuf,
}

impl Server {
    /// Starts the server in the workspace with `extra` arguments after `serve --port 0`.
    pub fn start(extra: &[&str]) -> anyhow::Result<Server> {
        Server::start_in(&workspace_root(), extra)
    }

    /// Starts the server with `workdir` as its working directory (its runs go to
    /// `workdir/runs`), serving the workspace's page and configs.
    pub fn start_in(workdir: &Path, extra: &[&str]) -> anyhow::Result<Server> {
        let root = workspace_root().canonicalize()?;
        let mut child = Command::new(workspace_binary("scalebook")?)
            .args(["serve", "--port", "0"])
            // Warnings only: a line per request would drown the test output.
            .env("RUST_LOG", "warn")
            .arg("--static-dir")
            .arg(root.join("static"))
            .arg("--yaml-config")
            .arg(root.join("config/ViT.yaml"))
            .args(extra)
            .current_dir(workdir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start scalebook serve")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let rx = watch_lines(stdout, |line| line.strip_prefix("Scalebook is ready: ").map(|url| url.trim().to_owned()));
        let Ok(url) = rx.recv_timeout(Duration::from_secs(120)) else {
            let _ = child.kill();
            bail!("scalebook serve did not announce its URL within 120 s");
        };
        let token = url.split_once("#token=").map(|(_, token)| token.to_owned()).unwrap_or_default();
        let host = url.trim_start_matches("http://").split('/').next().unwrap_or_default();
        let addr = host.parse().with_context(|| format!("no address in {url}"))?;
        Ok(Server { child, url, token, addr, workdir: workdir.to_owned() })
    }
}

impl Server {
    /// The page of chapter `slug`, with the token in the fragment beside the chapter's route
    /// (`#/slug&token=...`, as a user's link to a chapter reads).
    pub fn chapter_url(&self, slug: &str) -> String {
        format!("http://{}/#/{slug}&token={}", self.addr, self.token)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
