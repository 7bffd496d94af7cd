//! A real JupyterHub, as a class holds one: DummyAuthenticator, LocalProcessSpawner and
//! configurable-http-proxy, from the environment `scalebook.sh test` sets up (as root) where
//! every user can run it. Each user of the class is a real Unix user (made when missing) with a
//! fresh home for the test, in which the Hub starts their own Jupyter server as them. A browser
//! comes in through the Hub's login form, and a user's WebSocket to a Scalebook behind the Hub
//! carries the cookies the Hub gave that user's browser, as their page's does.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures_util::{SinkExt, StreamExt};
use scalebook_shared::protocol::{ClientMessage, PROTOCOL_VERSION, ServerMessage, ServerReply};
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::install::User;
use crate::jupyter::readme_recipe;
use crate::{Browser, free_port, watch_lines, workspace_root};

/// The home a user made by these tests has between runs (none, as `User::unprivileged` makes it).
const NO_HOME: &str = "/nonexistent";
/// How the scratch directory of a Hub begins: a user whose home is in one was made by a test.
const SCRATCH_PREFIX: &str = "scalebook-hub-";
/// Every user's password: DummyAuthenticator takes any, and the login form wants one.
const PASSWORD: &str = "class";
/// How long the Hub may take to start a user's Jupyter server and the Scalebook behind the
/// page asked for: each is a new process on two cores shared with builds.
const SPAWN: Duration = Duration::from_secs(180);

/// Where `scalebook.sh test` sets up JupyterHub (`SCALEBOOK_JUPYTERHUB`): `venv/` (Debian's
/// Python with jupyterhub, jupyter-server and jupyter-server-proxy) and `chp/`
/// (configurable-http-proxy), readable by everyone.
pub fn environment() -> PathBuf {
    std::env::var_os("SCALEBOOK_JUPYTERHUB").map_or_else(|| PathBuf::from("/opt/scalebook-jupyterhub"), PathBuf::from)
}

/// The README's jupyter-server-proxy block (see [`readme_recipe`]) with its install prefix
/// set to `prefix`, as an instructor who installed there hands it out.
pub fn readme_recipe_for(prefix: &Path) -> anyhow::Result<String> {
    let recipe = readme_recipe(&std::fs::read_to_string(workspace_root().join("README.md"))?)?;
    let placeholder = "SCALEBOOK = \"/opt/scalebook\"";
    ensure!(recipe.contains(placeholder), "the README's recipe names the install as {placeholder}");
    Ok(recipe.replace(placeholder, &format!("SCALEBOOK = {:?}", prefix.display().to_string())))
}

/// One user of the Hub and the home the test gave them.
struct Member {
    user: User,
    home: PathBuf,
}

pub struct Hub {
    child: Child,
    /// `http://127.0.0.1:PORT`: the Hub's proxy, where every user comes in.
    pub url: String,
    members: Vec<Member>,
    /// The output of the Hub and of everything it starts (its proxy, the users' Jupyter
    /// servers and what they start in turn inherit it).
    log: PathBuf,
    /// The Hub's own directory, the log and the users' homes; removed when dropped.
    scratch: TempDir,
}

impl Hub {
    /// Starts the Hub for the Unix users `names` (made when missing), each with a new empty
    /// home of the test's; `None` unless this process is root, the only one who may start
    /// servers as other users.
    pub fn start(names: &[&str]) -> anyhow::Result<Option<Hub>> {
        if User::current()?.uid != 0 {
            return Ok(None);
        }
        let environment = environment();
        let (venv, proxy) = (environment.join("venv/bin"), environment.join("chp/node_modules/.bin/configurable-http-proxy"));
        ensure!(
            venv.join("jupyterhub").is_file() && proxy.is_file(),
            "no JupyterHub in {}: `./scalebook.sh test` sets it up, as root",
            environment.display()
        );
        let mut members = Vec::new();
        let scratch = tempfile::Builder::new().prefix(SCRATCH_PREFIX).tempdir()?;
        set_mode(scratch.path(), 0o755)?;
        for name in names {
            let user = User::unprivileged(name)?.context("only root makes users")?;
            let home = scratch.path().join("home").join(name);
            std::fs::create_dir_all(&home)?;
            std::os::unix::fs::chown(&home, Some(user.uid), Some(user.gid))?;
            set_mode(&home, 0o700)?;
            set_home(&user.name, &home)?;
            members.push(Member { user, home });
        }

        let dir = scratch.path().join("hub");
        std::fs::create_dir(&dir)?;
        let allowed = names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
        let (port, hub_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let config = format!(
            "c.JupyterHub.bind_url = \"http://127.0.0.1:{port}\"\n\
             c.JupyterHub.hub_bind_url = \"http://127.0.0.1:{hub_port}\"\n\
             c.ConfigurableHTTPProxy.api_url = \"http://127.0.0.1:{api_port}\"\n\
             c.ConfigurableHTTPProxy.command = [{proxy:?}]\n\
             c.JupyterHub.authenticator_class = \"dummy\"\n\
             c.Authenticator.allowed_users = {{{allowed}}}\n\
             c.JupyterHub.spawner_class = \"localprocess\"\n\
             c.Spawner.cmd = [{:?}]\n\
             c.Spawner.start_timeout = {secs}\n\
             c.Spawner.http_timeout = {secs}\n\
             # Single-user servers outlive a restart of the Hub, as a class wants them to.\n\
             c.JupyterHub.cleanup_servers = False\n",
            venv.join("jupyterhub-singleuser"),
            secs = SPAWN.as_secs(),
        );
        std::fs::write(dir.join("jupyterhub_config.py"), config)?;

        let log = scratch.path().join("hub.log");
        let (output, input) = std::io::pipe()?;
        let child = Command::new(venv.join("jupyterhub"))
            .args(["-f", "jupyterhub_config.py"])
            // A clean environment: nothing of the build's (LIBTORCH, cargo's LD_LIBRARY_PATH,
            // pyenv's PATH) reaches the users' servers, which keep the Hub's PATH.
            .env_clear()
            .env("HOME", &dir)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(&dir)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(input.try_clone()?)
            .stderr(input)
            .spawn()
            .context("cannot start JupyterHub")?;
        let hub = Hub { child, url: format!("http://127.0.0.1:{port}"), members, log, scratch };
        let file = std::fs::File::create(&hub.log)?;
        let rx = watch_lines(output, move |line| {
            let _ = writeln!(&mut &file, "{line}");
            if std::env::var_os("SCALEBOOK_TEST_VERBOSE").is_some() {
                eprintln!("[hub] {line}");
            }
            line.contains("JupyterHub is now running at").then(String::new)
        });
        if rx.recv_timeout(Duration::from_secs(120)).is_err() {
            let said = std::fs::read_to_string(&hub.log).unwrap_or_default();
            bail!("JupyterHub did not start within 120 s; it said:\n{said}");
        }
        Ok(Some(hub))
    }

    fn member(&self, name: &str) -> &Member {
        self.members.iter().find(|m| m.user.name == name).unwrap_or_else(|| panic!("{name} is not a user of this Hub"))
    }

    pub fn user(&self, name: &str) -> &User {
        &self.member(name).user
    }

    /// `name`'s home: where their Jupyter server runs and their Scalebook keeps its runs.
    pub fn home(&self, name: &str) -> &Path {
        &self.member(name).home
    }

    /// Writes `name`'s `~/.jupyter/jupyter_server_config.py`, theirs as if they wrote it.
    pub fn write_jupyter_config(&self, name: &str, config: &str) -> anyhow::Result<()> {
        let member = self.member(name);
        let dir = member.home.join(".jupyter");
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("jupyter_server_config.py");
        std::fs::write(&file, config)?;
        for path in [&dir, &file] {
            std::os::unix::fs::chown(path, Some(member.user.uid), Some(member.user.gid))?;
        }
        Ok(())
    }

    /// Makes `relative` in `name`'s home a directory of `name`'s that others may enter but not
    /// list or write (mode 711), and lets others through the home to it (`chmod o+x ~`), as
    /// README has an instructor make the class socket's directory.
    pub fn reachable_dir(&self, name: &str, relative: &str) -> anyhow::Result<PathBuf> {
        let member = self.member(name);
        let dir = member.home.join(relative);
        std::fs::create_dir_all(&dir)?;
        std::os::unix::fs::chown(&dir, Some(member.user.uid), Some(member.user.gid))?;
        set_mode(&dir, 0o711)?;
        set_mode(&member.home, 0o711)?;
        Ok(dir)
    }

    /// Writes `text` to `relative` in `name`'s home, readable by them alone (their own file of
    /// mode 600, in directories of mode 700 made as needed), as the README has a learner keep a
    /// secret.
    pub fn write_private(&self, name: &str, relative: &str, text: &str) -> anyhow::Result<PathBuf> {
        let member = self.member(name);
        let file = member.home.join(relative);
        let mut made = Vec::new();
        let mut dir = file.parent().context("a file in the home")?.to_owned();
        while !dir.exists() {
            made.push(dir.clone());
            dir = dir.parent().context("a directory in the home")?.to_owned();
        }
        for dir in made.iter().rev() {
            std::fs::create_dir(dir)?;
            set_mode(dir, 0o700)?;
        }
        std::fs::write(&file, text)?;
        set_mode(&file, 0o600)?;
        for path in made.iter().chain([&file]) {
            std::os::unix::fs::chown(path, Some(member.user.uid), Some(member.user.gid))?;
        }
        Ok(file)
    }

    /// Every file and directory under `dir` that its owner's group or others may read, write
    /// or enter (links are not followed).
    pub fn open_to_others(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        use std::os::unix::fs::PermissionsExt;
        let (mut open, mut left) = (Vec::new(), vec![dir.to_owned()]);
        while let Some(path) = left.pop() {
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.is_symlink() {
                continue;
            }
            if meta.permissions().mode() & 0o077 != 0 {
                open.push(path.clone());
            }
            if meta.is_dir() {
                for entry in std::fs::read_dir(&path)? {
                    left.push(entry?.path());
                }
            }
        }
        Ok(open)
    }

    /// Logs `name` in through the Hub's login form in `browser`, starts their server and opens
    /// `path` under it (`scalebook/`), as a user following a link to it does; waits until the
    /// browser is there.
    pub async fn open_as(&self, browser: &Browser, name: &str, path: &str) -> anyhow::Result<()> {
        let target = format!("/user/{name}/{path}");
        let spawn = format!("/hub/spawn/{name}?{}", query("next", &target));
        browser.client.goto(&format!("{}/hub/login?{}", self.url, query("next", &spawn))).await?;
        browser.type_into("#username_input", name).await?;
        browser.type_into("#password_input", PASSWORD).await?;
        browser.click("#login_submit").await?;
        browser.wait_eval_for(&format!("location.pathname === {target:?} && document.readyState === 'complete'"), SPAWN).await
    }

    /// A WebSocket to the Scalebook of `name`'s proxy entry `entry`, through the Hub, with the
    /// cookies the Hub gave `browser` (which must be on a page of that server), after `hello`.
    pub async fn socket(&self, browser: &Browser, name: &str, entry: &str) -> anyhow::Result<PageSocket> {
        let cookies = browser.client.get_all_cookies().await?;
        let cookie = cookies.iter().map(|c| format!("{}={}", c.name(), c.value())).collect::<Vec<_>>().join("; ");
        let url = format!("{}/user/{name}/{entry}/api/ws", self.url.replacen("http", "ws", 1));
        let mut request = url.into_client_request()?;
        request.headers_mut().insert("Cookie", cookie.parse()?);
        let (mut ws, _) = tokio_tungstenite::connect_async(request).await.with_context(|| format!("no WebSocket to {name}'s {entry}"))?;
        let hello = ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None };
        ws.send(Message::text(serde_json::to_string(&hello)?)).await?;
        Ok(PageSocket { ws })
    }

    /// Every log of the class: the Hub's output (which holds its proxy's, each Jupyter
    /// server's and each Scalebook's) and every `*.log` file under the users' homes (the runs'
    /// logs), each with its path.
    pub fn logs(&self) -> anyhow::Result<Vec<(PathBuf, String)>> {
        let mut logs = vec![(self.log.clone(), std::fs::read_to_string(&self.log)?)];
        let mut pending: Vec<PathBuf> = self.members.iter().map(|m| m.home.clone()).collect();
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                let metadata = std::fs::symlink_metadata(&path)?;
                if metadata.is_dir() {
                    pending.push(path);
                } else if metadata.is_file() && path.extension().is_some_and(|e| e == "log") {
                    logs.push((path.clone(), String::from_utf8_lossy(&std::fs::read(&path)?).into_owned()));
                }
            }
        }
        Ok(logs)
    }
}

impl Drop for Hub {
    /// The Hub leaves the users' servers running (`cleanup_servers = False`), each in a
    /// session of its own, and their Scalebooks' runs outlive them: every process that runs
    /// with a home in this Hub's scratch directory, and all they started, is ended.
    fn drop(&mut self) {
        let pids = processes_of(self.scratch.path());
        signal("-TERM", &pids);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && pids.iter().any(|pid| alive(*pid)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        signal("-KILL", &pids);
        let _ = self.child.wait();
        for member in &self.members {
            let _ = set_home(&member.user.name, Path::new(NO_HOME));
        }
    }
}

/// A page's WebSocket to a Scalebook behind the Hub.
pub struct PageSocket {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl PageSocket {
    /// Reads messages until `pick` finds what it looks for in one, within `limit`.
    /// Sends `message` as the page would.
    pub async fn send(&mut self, message: &ClientMessage) -> anyhow::Result<()> {
        self.ws.send(Message::text(serde_json::to_string(message)?)).await?;
        Ok(())
    }

    pub async fn recv_until<T>(&mut self, limit: Duration, mut pick: impl FnMut(&ServerMessage) -> Option<T>) -> anyhow::Result<T> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, self.ws.next()).await else {
                bail!("the awaited message did not come within {limit:?}");
            };
            let Message::Text(text) = next.context("the WebSocket closed")?? else { continue };
            let reply: ServerReply = serde_json::from_str(text.as_str()).with_context(|| format!("not a server message: {text}"))?;
            if let Some(found) = pick(&reply.message) {
                return Ok(found);
            }
        }
    }
}

/// `name=value`, the value escaped for a query.
fn query(name: &str, value: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new()).append_pair(name, value).finish()
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Points user `name`'s home at `home`. Only a user the tests made is changed (home
/// [`NO_HOME`], or one in an earlier Hub's scratch directory): a real account is left alone.
fn set_home(name: &str, home: &Path) -> anyhow::Result<()> {
    let output = Command::new("getent").args(["passwd", name]).output().context("cannot run getent")?;
    let entry = String::from_utf8(output.stdout)?;
    let current = entry.trim().split(':').nth(5).with_context(|| format!("no passwd entry for {name}"))?.to_owned();
    let ours = std::env::temp_dir().join(SCRATCH_PREFIX);
    ensure!(
        current == NO_HOME || current.starts_with(&*ours.to_string_lossy()),
        "user {name} has the home {current}: a real account, not one made by the tests (run them where no {name} exists)"
    );
    let status = Command::new("usermod").arg("--home").arg(home).arg(name).status().context("cannot run usermod")?;
    ensure!(status.success(), "usermod --home {} {name} failed ({status})", home.display());
    Ok(())
}

/// Every process whose `HOME` lies under `dir`, with all their descendants.
fn processes_of(dir: &Path) -> Vec<u32> {
    let home = format!("HOME={}", dir.display());
    let under = format!("{home}/");
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else { continue };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let ours = environ.split(|b| *b == 0).any(|var| var == home.as_bytes() || var.starts_with(under.as_bytes()));
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (name) state ppid ...`: the name may hold spaces, so read after its `)`.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        all.push((pid, parent, ours));
    }
    let mut chosen: Vec<u32> = all.iter().filter(|(_, _, ours)| *ours).map(|(pid, _, _)| *pid).collect();
    let mut grew = true;
    while grew {
        let children: Vec<u32> = all
            .iter()
            .filter(|(pid, parent, _)| !chosen.contains(pid) && parent.is_some_and(|p| chosen.contains(&p)))
            .map(|(pid, _, _)| *pid)
            .collect();
        grew = !children.is_empty();
        chosen.extend(children);
    }
    chosen
}

fn signal(which: &str, pids: &[u32]) {
    if !pids.is_empty() {
        let _ = Command::new("kill").arg(which).args(pids.iter().map(u32::to_string)).stderr(Stdio::null()).status();
    }
}

/// Whether `pid` still runs (a zombie waiting for its parent does not).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').is_some_and(|(_, rest)| rest.split_whitespace().next() != Some("Z"))
}
