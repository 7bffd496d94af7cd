//! Starting `scalebook serve` ([`Serve`]) and the server that runs ([`Served`]): on a free
//! port unless told a socket, printing its links with their tokens, and stopped with the runs
//! it left when dropped.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use scalebook_shared::protocol::RunId;
use scalebook_shared::rundir;

use crate::announce::{announced, origin_of, token_of};
use crate::runs::stop_left_runs;

/// How long a server may take to say it is ready: it takes well under a second alone, but a
/// test run keeps both cores of a small machine busy with trainers and browsers.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// How to start a server. The paths set here are defaults: the same flag among
/// [`args`](Serve::args) wins, so a test can point one server at another's runs directory.
#[derive(Clone, Debug)]
pub struct Serve {
    binary: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    current_dir: PathBuf,
    /// Flags with a path, each at most once, given unless `args` has the flag.
    paths: Vec<(&'static str, PathBuf)>,
    log: Option<PathBuf>,
    keep_runs: bool,
}

impl Serve {
    /// `binary serve`, started in the workspace (as users run it) with the workspace's
    /// `config/ViT.yaml`.
    pub fn new(binary: impl Into<PathBuf>) -> Serve {
        let workspace = crate::workspace();
        let yaml = workspace.join("config/ViT.yaml");
        Serve {
            binary: binary.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: workspace,
            paths: vec![("--yaml-config", yaml)],
            log: None,
            keep_runs: false,
        }
    }

    /// Adds `args` after `serve` and the harness's own flags.
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Serve {
        self.args.extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Sets `name` in the server's environment.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Serve {
        self.env.push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets each of `vars` in the server's environment.
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(self, vars: impl IntoIterator<Item = (K, V)>) -> Serve {
        vars.into_iter().fold(self, |serve, (name, value)| serve.env(name, value))
    }

    /// The server's working directory (the workspace unless set): where relative paths,
    /// its default runs directory among them, are resolved, for the trainers it starts too.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Serve {
        self.current_dir = dir.into();
        self
    }

    /// `--static-dir`: what it serves as the page.
    pub fn static_dir(self, dir: impl Into<PathBuf>) -> Serve {
        self.path("--static-dir", dir.into())
    }

    /// `--runs-dir` (else `runs` in its working directory).
    pub fn runs_dir(self, dir: impl Into<PathBuf>) -> Serve {
        self.path("--runs-dir", dir.into())
    }

    /// `--yaml-config` (else the workspace's `config/ViT.yaml`).
    pub fn yaml_config(self, file: impl Into<PathBuf>) -> Serve {
        self.path("--yaml-config", file.into())
    }

    /// `--data-root`: where runs may read datasets.
    pub fn data_root(self, dir: impl Into<PathBuf>) -> Serve {
        self.path("--data-root", dir.into())
    }

    /// Writes the server's stderr (warnings, the request log) to `file` instead of this
    /// process's stderr; the file is printed when a panic drops the server, and when it fails
    /// to start.
    pub fn log_to(mut self, file: impl Into<PathBuf>) -> Serve {
        self.log = Some(file.into());
        self
    }

    /// Leaves the runs in its runs directory going when the server is dropped: for a runs
    /// directory that is not the test's own (the workspace's, which holds a developer's runs).
    pub fn keep_runs(mut self) -> Serve {
        self.keep_runs = true;
        self
    }

    fn path(mut self, flag: &'static str, path: PathBuf) -> Serve {
        self.paths.retain(|(given, _)| *given != flag);
        self.paths.push((flag, path));
        self
    }

    /// Whether `args` holds `flag`, alone or as `flag=VALUE`.
    fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|arg| arg == flag || arg.to_str().and_then(|arg| arg.strip_prefix(flag)).is_some_and(|r| r.starts_with('=')))
    }

    /// The value `args` gives `flag`, else the one set here.
    fn value(&self, flag: &str) -> Option<PathBuf> {
        let in_args = self.args.iter().zip(self.args.iter().skip(1)).find(|(arg, _)| *arg == flag).map(|(_, value)| value.into());
        let joined = || self.args.iter().find_map(|arg| arg.to_str()?.strip_prefix(flag)?.strip_prefix('=').map(PathBuf::from));
        in_args.or_else(joined).or_else(|| self.paths.iter().find(|(given, _)| *given == flag).map(|(_, path)| path.clone()))
    }

    /// The runs directory the server will use, as an absolute path when the working
    /// directory is one.
    pub fn runs_dir_used(&self) -> PathBuf {
        self.current_dir.join(self.value("--runs-dir").unwrap_or_else(|| "runs".into()))
    }

    /// The command [`start`](Serve::start) runs, for a test that expects the server to refuse
    /// to start: `serve`, the paths set here, `--port 0` (unless `args` asks for a port or a
    /// Unix socket), `--print-links` (so the links come with their tokens through a pipe),
    /// then `args`.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command.arg("serve");
        for (flag, path) in self.paths.iter().filter(|(flag, _)| !self.has(flag)) {
            command.arg(flag).arg(path);
        }
        if !self.has("--port") && !self.has("--unix-socket") {
            command.args(["--port", "0"]);
        }
        if !self.has("--print-links") {
            command.arg("--print-links");
        }
        command.args(&self.args).envs(self.env.iter().map(|(name, value)| (name, value))).current_dir(&self.current_dir);
        command
    }

    /// Starts the server and waits (up to 120 s) until it says it is ready. Fails, with its
    /// log when there is one, when it exits or stays silent instead.
    pub fn start(self) -> io::Result<Served> {
        let mut command = self.command();
        command.stdin(Stdio::null()).stdout(Stdio::piped());
        if let Some(log) = &self.log {
            command.stderr(std::fs::File::create(log)?);
        }
        let binary = self.binary.display();
        let mut child = command.spawn().map_err(|e| io::Error::new(e.kind(), format!("cannot start {binary} serve: {e}")))?;
        let stdout = child.stdout.take().ok_or_else(|| io::Error::other("no stdout"))?;
        let announcement = match announced(stdout, READY_WITHIN) {
            Ok(announcement) => announcement,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait().map_or_else(|e| e.to_string(), |status| status.to_string());
                let log = self.log.as_ref().map(|log| format!("; its log:\n{}", std::fs::read_to_string(log).unwrap_or_default()));
                return Err(io::Error::new(e.kind(), format!("{binary} serve was not ready ({e}; {status}){}", log.unwrap_or_default())));
            }
        };
        let (url, viewer_url) = (announcement.url, announcement.viewer_url.unwrap_or_default());
        Ok(Served {
            child,
            origin: origin_of(&url).unwrap_or_default().to_owned(),
            token: token_of(&url).unwrap_or_default().to_owned(),
            viewer_token: token_of(&viewer_url).unwrap_or_default().to_owned(),
            url,
            viewer_url,
            class_link: announcement.class_link,
            runs_dir: self.runs_dir_used(),
            log: self.log,
            stop_runs: !self.keep_runs,
        })
    }
}

/// A running server and what it printed. Dropping it kills the server and, unless it was
/// started with [`Serve::keep_runs`] or [`kill`](Served::kill)ed, the runs it left going.
pub struct Served {
    child: Child,
    /// What followed `Scalebook is ready: `, e.g. `http://127.0.0.1:41234/#token=3f9c...`:
    /// what a user opens.
    pub url: String,
    /// `http://127.0.0.1:PORT` (empty on a Unix socket).
    pub origin: String,
    /// The instructor's token from `url` (empty when it has none).
    pub token: String,
    /// The viewer link it printed, and its token (empty when it printed none).
    pub viewer_url: String,
    pub viewer_token: String,
    /// The class link it printed (with `--class-listen`).
    pub class_link: Option<String>,
    pub runs_dir: PathBuf,
    log: Option<PathBuf>,
    stop_runs: bool,
}

impl Served {
    /// The server's process id (for its memory in `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `host:port` (empty on a Unix socket).
    pub fn addr(&self) -> &str {
        self.origin.trim_start_matches("http://")
    }

    /// The WebSocket URL with `token`.
    pub fn ws_url(&self, token: &str) -> String {
        format!("ws://{}/api/ws?token={token}", self.addr())
    }

    /// Run `id`'s directory.
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.runs_dir.join(id.as_str())
    }

    /// The lines of run `id`'s metrics file: one point each.
    pub fn metrics_lines(&self, id: &RunId) -> usize {
        std::fs::read_to_string(self.run_dir(id).join(rundir::METRICS)).unwrap_or_default().lines().count()
    }

    /// The file its stderr goes to, when it was given one.
    pub fn log(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// Kills the server outright (no graceful shutdown), as a crash or `kill -9` would; its
    /// runs go on.
    pub fn kill(mut self) -> io::Result<()> {
        self.stop_runs = false;
        self.child.kill()?;
        self.child.wait().map(drop)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking()
            && let Some(log) = &self.log
        {
            eprintln!("--- the server's log:\n{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        if self.stop_runs {
            stop_left_runs(&self.runs_dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(serve: &Serve) -> Vec<String> {
        serve.command().get_args().map(|arg| arg.to_string_lossy().into_owned()).collect()
    }

    /// A stand-in for the server: `sh serve ARGS...` runs the script `serve` in `dir`.
    fn stand_in(dir: &Path, script: &str) -> Serve {
        std::fs::write(dir.join("serve"), script).unwrap();
        Serve::new("/bin/sh").current_dir(dir)
    }

    #[test]
    fn what_a_started_server_prints_is_read_into_its_fields() {
        let dir = tempfile::tempdir().unwrap();
        let script = "echo 'Viewer link (share it): http://127.0.0.1:9/base/#token=77'\n\
                      echo 'Scalebook is ready: http://127.0.0.1:9/base/#token=3f'\n\
                      exec sleep 60\n";
        let served = stand_in(dir.path(), script).start().unwrap();
        assert_eq!((served.origin.as_str(), served.addr(), served.token.as_str()), ("http://127.0.0.1:9", "127.0.0.1:9", "3f"));
        assert_eq!((served.viewer_url.as_str(), served.viewer_token.as_str()), ("http://127.0.0.1:9/base/#token=77", "77"));
        assert_eq!((served.class_link.as_deref(), served.ws_url("77")), (None, "ws://127.0.0.1:9/api/ws?token=77".to_owned()));
        assert_eq!(served.runs_dir, dir.path().join("runs"));
        let pid = served.pid();
        drop(served);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the server outlived its handle");
    }

    #[test]
    fn a_server_that_exits_before_it_is_ready_fails_at_once_with_its_status_and_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let failed = stand_in(dir.path(), "echo 'error: no such flag' >&2\nexit 2\n").log_to(&log).start().err().unwrap();
        assert_eq!(failed.kind(), io::ErrorKind::UnexpectedEof);
        let message = failed.to_string();
        assert!(message.contains("exit status: 2") && message.ends_with("its log:\nerror: no such flag\n"), "{message}");
    }

    #[test]
    fn a_plain_server_gets_a_free_port_its_links_and_the_workspace_config() {
        let serve = Serve::new("scalebook").args(["--viewer-runs", "2"]);
        let yaml = crate::workspace().join("config/ViT.yaml").display().to_string();
        assert_eq!(args(&serve), ["serve", "--yaml-config", &yaml, "--port", "0", "--print-links", "--viewer-runs", "2"]);
        assert_eq!(serve.runs_dir_used(), crate::workspace().join("runs"));
    }

    #[test]
    fn a_flag_among_the_args_wins_over_the_same_path_set_on_the_builder() {
        let serve = Serve::new("scalebook").current_dir("/w").runs_dir("/mine/runs").static_dir("/s").runs_dir("/tmp/runs").args([
            "--runs-dir",
            "shared",
            "--yaml-config=/y.yaml",
            "--unix-socket",
            "/tmp/s",
            "--print-links",
        ]);
        let expected =
            ["serve", "--static-dir", "/s", "--runs-dir", "shared", "--yaml-config=/y.yaml", "--unix-socket", "/tmp/s", "--print-links"];
        assert_eq!(args(&serve), expected);
        assert_eq!(serve.runs_dir_used(), Path::new("/w/shared"));
        assert_eq!(Serve::new("scalebook").runs_dir("/tmp/runs").runs_dir_used(), Path::new("/tmp/runs"));
    }
}
