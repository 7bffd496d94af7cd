//! A real Jupyter server (jupyter-server with jupyter-server-proxy, from the tests' Python
//! environment) at a JupyterHub-like base URL, started from a directory of its own, as on a
//! hub where Jupyter runs in the user's home directory.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tempfile::TempDir;

use crate::watch_lines;

/// The base URL JupyterHub gives a user's server.
pub const BASE_URL: &str = "/user/learner/";

pub struct Jupyter {
    child: Child,
    /// `http://127.0.0.1:PORT/user/learner/`.
    pub url: String,
    /// Jupyter's working directory and `HOME` (not the checkout), also where its config is.
    pub home: TempDir,
}

impl Jupyter {
    /// Starts Jupyter with `config` (Python, as in `jupyter_server_config.py`) in a fresh
    /// directory, with its own authentication off (the hub's is not what is tested here).
    pub fn start(config: &str) -> anyhow::Result<Jupyter> {
        let home = tempfile::Builder::new().prefix("scalebook-jupyter-home-").tempdir()?;
        // A free port now; if it is taken before Jupyter binds it, Jupyter tries the next ones
        // and logs the one it got, which is what is read below.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let settings = format!(
            "{config}\n\n# The test's own settings.\nc.ServerApp.base_url = {BASE_URL:?}\nc.ServerApp.ip = \"127.0.0.1\"\n\
             c.ServerApp.port = {port}\nc.ServerApp.open_browser = False\nc.IdentityProvider.token = \"\"\n\
             c.ServerApp.allow_root = True\n"
        );
        std::fs::write(home.path().join("jupyter_server_config.py"), settings)?;
        let mut child = Command::new(python())
            .args(["-m", "jupyter_server", "--config=jupyter_server_config.py"])
            .env("HOME", home.path())
            .env("JUPYTER_CONFIG_DIR", home.path())
            .env("JUPYTER_DATA_DIR", home.path().join("data"))
            .env("JUPYTER_RUNTIME_DIR", home.path().join("runtime"))
            .current_dir(home.path())
            // Its own process group: dropping it ends Jupyter and every server it proxies.
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start jupyter_server from the tests' Python (run ./scalebook.sh test)")?;
        let stderr = child.stderr.take().context("no stderr")?;
        // Jupyter logs its URL once it listens.
        let rx = watch_lines(stderr, |line| {
            if std::env::var_os("SCALEBOOK_TEST_VERBOSE").is_some() {
                eprintln!("[jupyter] {line}");
            }
            line.find("http://127.0.0.1:").map(|at| line[at..].split_whitespace().next().unwrap_or_default().to_owned())
        });
        let mut jupyter = Jupyter { child, url: String::new(), home };
        let deadline = Instant::now() + Duration::from_secs(120);
        while jupyter.url.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                bail!("Jupyter did not say where it listens within 120 s")
            };
            match rx.recv_timeout(left) {
                Ok(url) => jupyter.url = url.split(BASE_URL).next().unwrap_or_default().to_owned() + BASE_URL,
                Err(_) => bail!("Jupyter did not say where it listens (did it start? see its output above)"),
            }
        }
        Ok(jupyter)
    }

    /// A file Jupyter's config wrote into its working directory.
    pub fn read(&self, name: &str) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.home.path().join(name))?)
    }
}

impl Drop for Jupyter {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).stderr(Stdio::null()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.wait();
    }
}

/// The Python with jupyter-server and jupyter-server-proxy that the test command sets up.
fn python() -> PathBuf {
    std::env::var_os("SCALEBOOK_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").unwrap_or_default();
        Path::new(&home).join(".cache/scalebook/py-venv/bin/python")
    })
}

/// The README's jupyter-server-proxy configuration (the Python block of its JupyterHub
/// section), exactly as a user would copy it.
pub fn readme_recipe(readme: &str) -> anyhow::Result<String> {
    let section = readme.split_once("### Through JupyterHub").context("README has no JupyterHub section")?.1;
    let block = section.split_once("```python\n").context("the JupyterHub section has no Python block")?.1;
    Ok(block.split_once("```").context("the Python block does not end")?.0.to_owned())
}
