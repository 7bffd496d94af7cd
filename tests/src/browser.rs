//! Headless Chromium through chromedriver, with the flags that keep it off the network.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

pub struct Browser {
    pub client: Client,
    _driver: DriverGuard,
    _profile: TempDir,
}

impl Browser {
    pub async fn start() -> anyhow::Result<Browser> {
        let port = free_port()?;
        // Its own process group, so dropping the guard also ends the Chromium it started.
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {CHROMEDRIVER} (is chromium-driver installed?)"))?;
        let profile = TempDir::new("scalebook-chromium")?;
        let caps = json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900", format!("--user-data-dir={}", profile.0.display()),
                ],
            }
        });
        let caps = caps.as_object().cloned().context("capabilities")?;
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        let guard = DriverGuard(driver);
        let client = loop {
            match ClientBuilder::new(HttpConnector::new()).capabilities(caps.clone()).connect(&url).await {
                Ok(client) => break client,
                Err(e) if Instant::now() > deadline => bail!("chromedriver did not start a session: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        Ok(Browser { client, _driver: guard, _profile: profile })
    }

    /// Waits for `css` to match and for its text to satisfy `pred`; returns the text.
    pub async fn wait_text(&self, css: &str, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                last = el.text().await.unwrap_or_default();
                if pred(&last) {
                    return Ok(last);
                }
            }
            if Instant::now() > deadline {
                bail!("`{css}` never showed the expected text; last seen: {last:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Replaces the value of an input, firing the `input` events the page listens to.
    pub async fn type_into(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let el = self.client.find(Locator::Css(css)).await?;
        el.clear().await?;
        el.send_keys(text).await?;
        Ok(())
    }

    pub async fn close(self) -> anyhow::Result<()> {
        Ok(self.client.close().await?)
    }
}

/// Kills chromedriver's whole process group (chromedriver and its Chromium) when dropped.
struct DriverGuard(Child);

impl Drop for DriverGuard {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A fresh profile directory per browser, removed afterwards.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(prefix: &str) -> anyhow::Result<TempDir> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.subsec_nanos();
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
