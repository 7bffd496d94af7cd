//! `scalebook.sh install` as an instructor runs it, and the install as a learner uses it: as
//! another Unix user, with a home of their own and a clean environment, talking to the server
//! over HTTP and the WebSocket like the page does.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures_util::{SinkExt, StreamExt};
use scalebook_shared::protocol::RunRecord;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::workspace_root;

/// `./scalebook.sh install PREFIX`, to run in `caller` (so a relative `prefix` is relative to it).
pub fn install_command(caller: &Path, prefix: &Path) -> Command {
    let mut command = Command::new(workspace_root().join("scalebook.sh"));
    command.arg("install").arg(prefix).current_dir(caller).stdin(Stdio::null());
    command
}

/// Installs into `prefix` as [`install_command`] says, failing unless the install succeeds.
pub fn install(caller: &Path, prefix: &Path) -> anyhow::Result<()> {
    let status = install_command(caller, prefix).status().context("cannot run scalebook.sh install")?;
    ensure!(status.success(), "scalebook.sh install {} failed ({status})", prefix.display());
    Ok(())
}

/// A Unix user of this machine, whom commands can be run as.
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Whether the user is someone else than this process (whose commands then switch to them).
    other: bool,
}

impl User {
    /// The unprivileged user `name`, made when missing (a system user with a group of its own,
    /// no home and no login shell: the tests give it a home); `None` unless this process is
    /// root, the only one who may act as another user.
    pub fn unprivileged(name: &str) -> anyhow::Result<Option<User>> {
        if id(&["-u"])? != "0" {
            return Ok(None);
        }
        if id(&["-u", name]).is_err() {
            let status = Command::new("useradd")
                .args(["--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name])
                .status()
                .context("cannot run useradd")?;
            ensure!(status.success(), "useradd {name} failed ({status})");
        }
        Ok(Some(User { name: name.to_owned(), uid: id(&["-u", name])?.parse()?, gid: id(&["-g", name])?.parse()?, other: true }))
    }

    /// The user this process runs as.
    pub fn current() -> anyhow::Result<User> {
        Ok(User { name: id(&["-un"])?, uid: id(&["-u"])?.parse()?, gid: id(&["-g"])?.parse()?, other: false })
    }

    /// `program`, started in `home` as this user, with an environment of only `HOME=home`, a
    /// system `PATH` and the variables in `env`: nothing of this process's environment (the
    /// build's `LIBTORCH`, cargo's `LD_LIBRARY_PATH`) reaches it, as nothing of the builder's
    /// reaches a learner.
    pub fn command(&self, home: &Path, program: impl AsRef<std::ffi::OsStr>, env: &[(&str, &str)]) -> Command {
        let mut command = if self.other {
            let mut setpriv = Command::new("setpriv");
            setpriv.arg(format!("--reuid={}", self.uid)).arg(format!("--regid={}", self.gid)).args(["--init-groups", "--", "env"]);
            setpriv
        } else {
            Command::new("env")
        };
        command.arg("-i").arg(format!("HOME={}", home.display())).arg("PATH=/usr/local/bin:/usr/bin:/bin");
        command.args(env.iter().map(|(name, value)| format!("{name}={value}"))).arg(program).current_dir(home);
        command
    }
}

/// What `id ARGS` prints.
fn id(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("id").args(args).stderr(Stdio::null()).output().context("cannot run id")?;
    ensure!(output.status.success(), "id {} failed", args.join(" "));
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// `PREFIX/bin/scalebook --port 0` running as a user, and what it printed.
pub struct InstalledServer {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub token: String,
}

impl InstalledServer {
    /// Starts the launcher as `user` in `home` (warnings only in its log) and reads its ready
    /// line.
    pub fn start(user: &User, home: &Path, prefix: &Path) -> anyhow::Result<InstalledServer> {
        let mut child = user
            .command(home, prefix.join("bin/scalebook"), &[("RUST_LOG", "warn")])
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start the installed scalebook")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let url = match scalebook_harness::announced(stdout, Duration::from_secs(60)) {
            Ok(announcement) => announcement.url,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the installed scalebook did not say it was ready: {e}");
            }
        };
        let token = scalebook_harness::token_of(&url).with_context(|| format!("no token in {url}"))?.to_owned();
        let addr = scalebook_harness::origin_of(&url).unwrap_or_default().trim_start_matches("http://").to_owned();
        Ok(InstalledServer { child, addr, token })
    }

    /// `GET path` with the token as a bearer header: the status and the body.
    pub fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let mut stream = std::net::TcpStream::connect(&self.addr)?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n", self.addr, self.token);
        stream.write_all(request.as_bytes())?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let (head, body) = response.split_once("\r\n\r\n").with_context(|| format!("no HTTP response to {path}: {response}"))?;
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).with_context(|| format!("no status in {head}"))?;
        Ok((status, body.to_owned()))
    }

    /// Launches `config` with `overrides` over the WebSocket, as the page does, and returns the
    /// new run's id.
    pub async fn launch(&self, config: &str, overrides: &[&str]) -> anyhow::Result<String> {
        let mut request = format!("ws://{}/api/ws", self.addr).into_client_request()?;
        request.headers_mut().insert("Authorization", format!("Bearer {}", self.token).parse()?);
        let (mut ws, _) = tokio_tungstenite::connect_async(request).await?;
        let launch = serde_json::json!({ "id": "launch", "type": "launch", "config": config, "overrides": overrides });
        ws.send(Message::text(launch.to_string())).await?;
        // The answer carries the request's id; other messages (welcome, run lists) go by.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let Ok(Some(message)) = tokio::time::timeout_at(deadline, ws.next()).await else {
                bail!("no answer to the launch within 60 s");
            };
            let Message::Text(text) = message? else { continue };
            let reply: serde_json::Value = serde_json::from_str(text.as_str())?;
            if reply["id"] == "launch" {
                ensure!(reply["type"] == "launched", "launch refused: {reply}");
                return reply["run"].as_str().map(str::to_owned).with_context(|| format!("no run in {reply}"));
            }
        }
    }

    /// Polls `GET /api/runs/ID` until the run has ended, within `limit`.
    pub async fn wait_until_ended(&self, run: &str, limit: Duration) -> anyhow::Result<RunRecord> {
        let deadline = Instant::now() + limit;
        loop {
            let (status, body) = self.get(&format!("/api/runs/{run}"))?;
            ensure!(status == 200, "GET /api/runs/{run}: {status} {body}");
            let record: RunRecord = serde_json::from_str(&body)?;
            if record.state().is_final() {
                return Ok(record);
            }
            ensure!(Instant::now() < deadline, "run {run} has not ended within {limit:?}: {:?}", record.state());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for InstalledServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every path under `dir` whose mode is not what an install for everyone gives: directories
/// 755, files 644, or 755 for programs and libraries.
pub fn not_world_readable(dir: &Path) -> anyhow::Result<Vec<(PathBuf, u32)>> {
    use std::os::unix::fs::PermissionsExt;
    let mut wrong = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path)?;
        let mode = metadata.permissions().mode() & 0o7777;
        if metadata.is_dir() {
            pending.extend(std::fs::read_dir(&path)?.map(|entry| entry.map(|e| e.path())).collect::<Result<Vec<_>, _>>()?);
        }
        let fine = match metadata.is_dir() {
            true => mode == 0o755,
            false => metadata.is_file() && (mode == 0o644 || mode == 0o755),
        };
        if !fine {
            wrong.push((path, mode));
        }
    }
    Ok(wrong)
}
