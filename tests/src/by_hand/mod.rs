//! What a learner can do by hand, as their own Unix user, to a class: send the instructor's
//! class listener anything while holding the class link ([`RawFollower`]; the class listener
//! tells who a connection is by the account that made its socket), or hold the class port
//! while the instructor's Scalebook is down, or try to take its socket's place ([`Squatter`]). Each runs under `runuser` as a small
//! Python program; the follower's (`follower.py`: TLS with the link's certificate pinned, a
//! WebSocket by hand) gets the link's token on its standard input, never on a command line.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use scalebook_shared::protocol::{ClassLink, ClientMessage, ServerMessage, ServerReply};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const SCRIPT: &str = include_str!("follower.py");

/// What the raw follower met.
#[derive(Debug)]
pub enum Event {
    Message(Box<ServerMessage>),
    /// The class listener closed the connection, with its close code and reason.
    Closed {
        code: Option<u16>,
        reason: String,
    },
}

pub struct RawFollower {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl RawFollower {
    /// Connects to the class listener of `link`, as Unix user `user`, presenting the link's
    /// bearer; fails with the listener's answer when it does not open a WebSocket.
    pub async fn connect_as(user: &str, link: &ClassLink) -> anyhow::Result<RawFollower> {
        let mut child = Command::new("runuser")
            .args(["-u", user, "--", "/usr/bin/python3", "-c", SCRIPT, &link.address(), &link.fingerprint])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run the raw follower (runuser, /usr/bin/python3)")?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else { bail!("no pipes to the raw follower") };
        stdin.write_all(format!("{}\n", link.bearer()).as_bytes()).await?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.context("no answer to the upgrade")??;
        let first: serde_json::Value = serde_json::from_str(&first.context("the raw follower ended before the upgrade's answer")?)?;
        let status = first["status"].as_str().unwrap_or_default().to_owned();
        if !status.contains(" 101 ") {
            bail!("the class listener answered {status}");
        }
        Ok(RawFollower { child, stdin, lines })
    }

    pub async fn send(&mut self, message: &ClientMessage) -> anyhow::Result<()> {
        self.send_json(&serde_json::to_value(message)?).await
    }

    /// Sends any JSON, as a hand-made message would be.
    pub async fn send_json(&mut self, message: &serde_json::Value) -> anyhow::Result<()> {
        self.stdin.write_all(format!("{message}\n").as_bytes()).await.context("the raw follower is gone")
    }

    /// Reads events until `pick` finds what it looks for, within `limit`.
    pub async fn recv_until<T>(&mut self, limit: Duration, mut pick: impl FnMut(&Event) -> Option<T>) -> anyhow::Result<T> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let Ok(line) = tokio::time::timeout_at(deadline, self.lines.next_line()).await else {
                bail!("the awaited event did not come within {limit:?}");
            };
            let line = line?.context("the raw follower ended")?;
            let event: serde_json::Value = serde_json::from_str(&line)?;
            let event = match event.get("message") {
                Some(message) => Event::Message(Box::new(serde_json::from_value::<ServerReply>(message.clone())?.message)),
                None => Event::Closed {
                    code: event["close"].as_u64().map(|c| c as u16),
                    reason: event["reason"].as_str().unwrap_or_default().into(),
                },
            };
            if let Some(found) = pick(&event) {
                return Ok(found);
            }
            if matches!(event, Event::Closed { .. }) {
                bail!("the class listener closed the connection: {event:?}");
            }
        }
    }
}

impl Drop for RawFollower {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A port held by another user: listening, never answering, until dropped.
pub struct Squatter {
    child: Child,
}

impl Squatter {
    /// Binds 127.0.0.1:`port` as Unix user `user`, and holds it until dropped.
    pub async fn hold(user: &str, port: u16) -> anyhow::Result<Squatter> {
        let script = "import socket, sys\n\
            s = socket.socket()\n\
            s.bind(('127.0.0.1', int(sys.argv[1])))\n\
            s.listen()\n\
            print('holding', flush=True)\n\
            sys.stdin.read()\n";
        let mut child = Command::new("runuser")
            .args(["-u", user, "--", "/usr/bin/python3", "-c", script, &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run the squatter (runuser, /usr/bin/python3)")?;
        let stdout = child.stdout.take().context("no pipe from the squatter")?;
        let held = tokio::time::timeout(Duration::from_secs(30), BufReader::new(stdout).lines().next_line()).await;
        match held.context("the squatter did not bind in time")?? {
            Some(line) if line == "holding" => Ok(Squatter { child }),
            other => bail!("the squatter could not hold port {port}: {other:?}"),
        }
    }
}

impl Squatter {
    /// Tries, as Unix user `user`, to put a socket of their own at `path` (removing whatever
    /// is there first, as a squatter would): what the system answered, when it refused.
    pub async fn take_socket(user: &str, path: &std::path::Path) -> anyhow::Result<Option<String>> {
        let script = "import os, socket, sys\n\
            path = sys.argv[1]\n\
            try:\n    os.unlink(path)\nexcept FileNotFoundError:\n    pass\n\
            except OSError as e:\n    print(e.strerror)\n    sys.exit()\n\
            try:\n    socket.socket(socket.AF_UNIX).bind(path)\n    print('taken')\n\
            except OSError as e:\n    print(e.strerror)\n";
        let path = path.to_str().context("a socket path in UTF-8")?;
        let output = Command::new("runuser")
            .args(["-u", user, "--", "/usr/bin/python3", "-c", script, path])
            .output()
            .await
            .context("cannot run the squatter (runuser, /usr/bin/python3)")?;
        let answer = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        Ok((answer != "taken").then_some(answer))
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
