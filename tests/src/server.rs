//! A `scalebook serve` process on a free port, started in the workspace or in a scratch
//! working directory of its own (with its own runs and data), serving the workspace's page:
//! the harness's server ([`Served`]) with the address the browser and the proxy dial.

use std::net::SocketAddr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use anyhow::Context;
use scalebook_harness::{Serve, Served};

use crate::{workspace_binary, workspace_root};

/// The harness's server (its `url`, `token` and the rest, through `Deref`), with its address
/// parsed and its working directory.
pub struct Server {
    served: Served,
    pub addr: SocketAddr,
    /// The server's working directory: where its runs directory is and where trainer
    /// processes resolve relative data paths.
    pub workdir: PathBuf,
}

impl Server {
    /// Starts the server in the workspace with `extra` arguments after `serve --port 0`. Its
    /// runs go to the workspace's `runs/`, beside a developer's own, so they are left alone
    /// when it stops.
    pub fn start(extra: &[&str]) -> anyhow::Result<Server> {
        Server::start_with(&workspace_root(), extra, true)
    }

    /// Starts the server with `workdir` as its working directory (its runs go to
    /// `workdir/runs`, stopped with it), serving the workspace's page and configs.
    pub fn start_in(workdir: &Path, extra: &[&str]) -> anyhow::Result<Server> {
        Server::start_with(workdir, extra, false)
    }

    fn start_with(workdir: &Path, extra: &[&str], keep_runs: bool) -> anyhow::Result<Server> {
        let root = workspace_root().canonicalize()?;
        // Warnings only: a line per request would drown the test output.
        let serve = Serve::new(workspace_binary("scalebook")?).env("RUST_LOG", "warn").static_dir(root.join("static"));
        let serve = serve.args(extra).current_dir(workdir);
        let served = match keep_runs {
            true => serve.keep_runs().start()?,
            false => serve.start()?,
        };
        let addr = served.addr().parse().with_context(|| format!("no address in {}", served.url))?;
        Ok(Server { served, addr, workdir: workdir.to_owned() })
    }

    /// The page of chapter `slug`, with the token in the fragment beside the chapter's route
    /// (`#/slug&token=...`, as a user's link to a chapter reads).
    pub fn chapter_url(&self, slug: &str) -> String {
        format!("http://{}/#/{slug}&token={}", self.addr, self.token)
    }
}

impl Deref for Server {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.served
    }
}
