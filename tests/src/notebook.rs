//! What a learner does on a chapter page, as steps shared by the tests that drive it: launch a
//! small CPU run from the page and watch its curve.

use std::time::{Duration, Instant};

use anyhow::ensure;

use crate::Browser;

/// The per-step training loss: the first tag a run writes, and one point per step.
pub const STEP_LOSS: &str = "Step/Loss/train";

/// Switches the chapter's working config to `cpu_tiny` (its data is what [`crate::with_tiny_data`]
/// makes, and what `scalebook.sh run` makes), asks for `num_iters` steps and launches it from
/// the run block. Returns the run's id.
pub async fn launch_tiny_run(browser: &Browser, num_iters: u32) -> anyhow::Result<String> {
    browser.select(".config-editor select", "cpu_tiny").await?;
    browser.wait_value(".config-editor input[data-field=embed_dim]", |v| v == "48").await?;
    browser.type_into(".config-editor input[data-field=num_iters]", &num_iters.to_string()).await?;
    let overridden = format!("num_iters={num_iters}");
    browser.wait_text(".run-block", |t| t.contains(&overridden)).await?;
    browser.click(".run-block button.launch").await?;
    browser.wait_attr(".run-block .current-run", "data-run", |r| !r.is_empty()).await
}

/// The chart series of `run` on the chart of `tag`.
pub fn series_css(tag: &str, run: &str) -> String {
    format!(".charts figure[data-tag='{tag}'] g.series[data-key='{run}']")
}

/// How many points the page has drawn for the series matching `series` (0 before any).
pub async fn points_drawn(browser: &Browser, series: &str) -> usize {
    browser.attr(series, "data-points").await.and_then(|p| p.parse().ok()).unwrap_or(0)
}

/// Waits until the series has grown `growths` times, point by point as the trainer writes
/// them; returns the counts seen, starting with 0.
pub async fn watch_growth(browser: &Browser, series: &str, growths: usize, limit: Duration) -> anyhow::Result<Vec<usize>> {
    let mut seen = vec![0];
    let deadline = Instant::now() + limit;
    while seen.len() <= growths && Instant::now() < deadline {
        let n = points_drawn(browser, series).await;
        if n > *seen.last().unwrap_or(&0) {
            seen.push(n);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ensure!(seen.len() > growths, "the curve did not grow point by point within {limit:?}: {seen:?}");
    Ok(seen)
}
