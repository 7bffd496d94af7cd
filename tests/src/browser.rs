//! Headless Chromium through chromedriver, with the flags that keep it off the network.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fantoccini::elements::Element;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long a wait for the page may take before it fails. Generous: the page usually answers
/// in well under a second, but the test command must stay green with a build running beside
/// it on two cores, and a condition that holds returns at once anyway.
pub const WAIT: Duration = Duration::from_secs(90);

pub struct Browser {
    pub client: Client,
    _driver: DriverGuard,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a session. A port found free can be taken
    /// by another process before chromedriver binds it, so a failed start is tried again on
    /// another port.
    pub async fn start() -> anyhow::Result<Browser> {
        let mut last = None;
        for _ in 0..3 {
            match Browser::start_once().await {
                Ok(browser) => return Ok(browser),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("chromedriver did not start")))
    }

    async fn start_once() -> anyhow::Result<Browser> {
        let port = free_port()?;
        // Its own process group, so dropping the guard also ends the Chromium it started.
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {CHROMEDRIVER} (is chromium-driver installed?)"))?;
        let mut guard = DriverGuard(driver);
        let profile = tempfile::Builder::new().prefix("scalebook-chromium-").tempdir()?;
        let caps = json!({
            // Keep the page's console, for `console_errors`.
            "goog:loggingPrefs": { "browser": "ALL" },
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900", format!("--user-data-dir={}", profile.path().display()),
                ],
            }
        });
        let caps = caps.as_object().cloned().context("capabilities")?;
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            match ClientBuilder::new(HttpConnector::new()).capabilities(caps.clone()).connect(&url).await {
                Ok(client) => break client,
                Err(e) if Instant::now() > deadline => bail!("chromedriver did not start a session: {e}"),
                // Exited, most likely because its port was taken meanwhile.
                Err(e) if matches!(guard.0.try_wait(), Ok(Some(_))) => bail!("chromedriver exited: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        Ok(Browser { client, _driver: guard, _profile: profile })
    }

    /// The page's console errors (and uncaught exceptions) since the last call: chromedriver
    /// hands each log entry out once.
    pub async fn console_errors(&self) -> anyhow::Result<Vec<String>> {
        let log = self.client.issue_cmd(BrowserLog).await.context("reading the browser's console log")?;
        let entries = log.as_array().cloned().unwrap_or_default();
        let severe = entries.iter().filter(|e| e["level"] == "SEVERE");
        Ok(severe.map(|e| e["message"].as_str().unwrap_or_default().to_owned()).collect())
    }

    /// Waits for `css` to match and for its text to satisfy `pred`; returns the text.
    pub async fn wait_text(&self, css: &str, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        self.wait_text_for(css, pred, WAIT).await
    }

    /// As [`Browser::wait_text`], with its own time limit.
    pub async fn wait_text_for(&self, css: &str, pred: impl Fn(&str) -> bool, limit: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + limit;
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
        self.wait_attr_for(css, name, pred, WAIT).await
    }

    /// As [`Browser::wait_attr`], with its own time limit.
    pub async fn wait_attr_for(&self, css: &str, name: &str, pred: impl Fn(&str) -> bool, limit: Duration) -> anyhow::Result<String> {
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
        let deadline = Instant::now() + WAIT;
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

    /// Waits for an element matching `css` to exist, and returns it: the page renders blocks
    /// asynchronously, so an element is never assumed to be there already.
    pub async fn find(&self, css: &str) -> anyhow::Result<Element> {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.client.find(Locator::Css(css)).await {
                Ok(el) => return Ok(el),
                Err(e) if Instant::now() > deadline => bail!("`{css}` never appeared: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Waits for `css` and clicks it.
    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        self.find(css).await?.click().await?;
        Ok(())
    }

    /// Waits for the `<select>` matching `css` to offer `value`, and selects it.
    pub async fn select(&self, css: &str, value: &str) -> anyhow::Result<()> {
        self.find(&format!("{css} option[value='{value}']")).await?;
        self.find(css).await?.select_by_value(value).await?;
        Ok(())
    }

    /// The attribute `name` of the first element matching `css`, if both exist.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.client.find(Locator::Css(css)).await.ok()?.attr(name).await.ok().flatten()
    }

    /// Runs `script` in the page and returns its value.
    pub async fn eval(&self, script: &str) -> anyhow::Result<serde_json::Value> {
        Ok(self.client.execute(script, vec![]).await?)
    }

    /// Waits for the JavaScript expression `condition` to be true.
    pub async fn wait_eval(&self, condition: &str) -> anyhow::Result<()> {
        self.wait_eval_for(condition, WAIT).await
    }

    /// As [`Browser::wait_eval`], with its own time limit.
    pub async fn wait_eval_for(&self, condition: &str, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        let script = format!("return Boolean({condition})");
        loop {
            if self.eval(&script).await.is_ok_and(|v| v == serde_json::Value::Bool(true)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("`{condition}` did not become true within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends keys (text, or WebDriver key codes such as `\u{E014}` for the right arrow) to
    /// the element matching `css`.
    pub async fn keys(&self, css: &str, keys: &str) -> anyhow::Result<()> {
        self.find(css).await?.send_keys(keys).await?;
        Ok(())
    }

    /// Sets the value of a form field at once and fires one `input` event, as a paste does
    /// (typing a long text key by key is slow and fires an event per character).
    pub async fn paste_into(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let el = self.find(css).await?;
        let script = "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', { bubbles: true }));";
        self.client.execute(script, vec![serde_json::to_value(&el)?, serde_json::Value::from(text)]).await?;
        Ok(())
    }

    /// Replaces the value of an input, firing the `input` events the page listens to.
    pub async fn type_into(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let el = self.find(css).await?;
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

/// A port free on 127.0.0.1 now (another process may take it before it is bound).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// WebDriver's code for the right arrow key.
pub const ARROW_RIGHT: &str = "\u{E014}";

/// chromedriver's log endpoint, with the console messages of the page.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({ "type": "browser" }).to_string()))
    }
}
