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

    /// Waits for `css` to match and for its attribute `name` to satisfy `pred`; returns it.
    pub async fn wait_attr(&self, css: &str, name: &str, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        self.wait_attr_for(css, name, pred, Duration::from_secs(20)).await
    }

    /// As [`Browser::wait_attr`], with its own time limit.
    pub async fn wait_attr_for(
        &self,
        css: &str,
        name: &str,
        pred: impl Fn(&str) -> bool,
        limit: Duration,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + limit;
        let mut last = None;
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                last = el.attr(name).await.ok().flatten();
                if let Some(value) = last.as_deref().filter(|v| pred(v)) {
                    return Ok(value.to_owned());
                }
            }
            if Instant::now() > deadline {
                bail!("`{css}` never had the expected `{name}`; last seen: {last:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the form field matching `css` to hold a value satisfying `pred`.
    pub async fn wait_value(&self, css: &str, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = None;
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                last = el.prop("value").await.ok().flatten();
                if let Some(value) = last.as_deref().filter(|v| pred(v)) {
                    return Ok(value.to_owned());
                }
            }
            if Instant::now() > deadline {
                bail!("`{css}` never held the expected value; last seen: {last:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The attribute `name` of the first element matching `css`, if both exist.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.client.find(Locator::Css(css)).await.ok()?.attr(name).await.ok().flatten()
    }

    /// Runs `script` in the page and returns its value.
    pub async fn eval(&self, script: &str) -> anyhow::Result<serde_json::Value> {
        Ok(self.client.execute(script, vec![]).await?)
    }

    /// Sends keys (text, or WebDriver key codes such as `\u{E014}` for the right arrow) to
    /// the element matching `css`.
    pub async fn keys(&self, css: &str, keys: &str) -> anyhow::Result<()> {
        self.client.find(Locator::Css(css)).await?.send_keys(keys).await?;
        Ok(())
    }

    /// Sets the value of a form field at once and fires one `input` event, as a paste does
    /// (typing a long text key by key is slow and fires an event per character).
    pub async fn paste_into(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let el = self.client.find(Locator::Css(css)).await?;
        let script = "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', { bubbles: true }));";
        self.client.execute(script, vec![serde_json::to_value(&el)?, serde_json::Value::from(text)]).await?;
        Ok(())
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

/// WebDriver's code for the right arrow key.
pub const ARROW_RIGHT: &str = "\u{E014}";
