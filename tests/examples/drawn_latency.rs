//! Benchmark: a point from the trainer's write to its drawing in Chromium, for a local run
//! launched from the page as a learner launches one.
//!
//! Starts `scalebook serve` on generated data, opens the single-GPU chapter in headless
//! Chromium, watches the per-step loss chart with a `MutationObserver` (each time the chart's
//! series says it holds more points, the time of the next animation frame: the frame that
//! paints them), launches a `cpu_tiny` run of `--iters` steps from the run block, and, once the
//! run has ended, compares each point's drawing time with the `wall` the trainer stamped on it
//! just before it wrote its line (the same machine's clock).
//!
//! ```sh
//! cargo build --release --bins --examples
//! target/release/examples/drawn_latency --iters 400
//! ```

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use scalebook_e2e::notebook::{STEP_LOSS, launch_tiny_run, series_css};
use scalebook_e2e::{Browser, Server, with_tiny_data};
use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::rundir;

#[derive(Debug, Parser)]
struct Args {
    /// Steps of the run (one point of the per-step loss each).
    #[arg(long, default_value_t = 400)]
    iters: u32,
}

/// Records, for every series of the per-step loss chart, each growth of its point count with
/// the time of the animation frame after it.
const OBSERVER: &str = r#"
    window.__drawn = [];
    const counts = new Map();
    const record = () => {
        const now = Date.now();
        for (const g of document.querySelectorAll(".charts figure[data-tag='TAG'] g.series")) {
            const n = Number(g.dataset.points);
            if ((counts.get(g.dataset.key) || 0) < n) {
                counts.set(g.dataset.key, n);
                window.__drawn.push([g.dataset.key, n, now]);
            }
        }
    };
    new MutationObserver(() => requestAnimationFrame(record))
        .observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-points"] });
    return true;
"#;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let workdir = with_tiny_data("scalebook-drawn-latency")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("single-gpu")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    browser.eval(&OBSERVER.replace("TAG", STEP_LOSS)).await?;
    let run = launch_tiny_run(&browser, args.iters).await?;
    browser.wait_attr_for(".run-block .run-state", "data-state", |s| s == "completed", Duration::from_secs(1800)).await?;
    let metrics = std::fs::read_to_string(workdir.path().join("runs").join(&run).join(rundir::METRICS))?;
    let walls: Vec<f64> = metrics
        .lines()
        .filter_map(|l| serde_json::from_str::<MetricPoint>(l).ok())
        .filter(|p| p.tag == STEP_LOSS)
        .map(|p| p.wall)
        .collect();
    browser.wait_attr(&series_css(STEP_LOSS, &run), "data-points", |p| p == walls.len().to_string()).await?;
    let drawn: Vec<(String, usize, f64)> =
        serde_json::from_value(browser.eval("return window.__drawn").await?).context("the observer's records")?;

    // Each growth from n to m drew points n+1 to m.
    let mut latencies = Vec::new();
    let mut before = 0;
    for (_, count, at_ms) in drawn.iter().filter(|(key, ..)| *key == run) {
        for wall in &walls[before..(*count).min(walls.len())] {
            latencies.push(at_ms - wall * 1e3);
        }
        before = before.max(*count);
    }
    anyhow::ensure!(latencies.len() == walls.len(), "{} of {} points seen drawn", latencies.len(), walls.len());
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "{} points of {STEP_LOSS}, drawn in {} frames: p50 {:.0} ms, p90 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms, max {:.0} ms (min {:.0} ms)",
        latencies.len(),
        drawn.iter().filter(|(key, ..)| *key == run).count(),
        at(0.5),
        at(0.9),
        at(0.95),
        at(0.99),
        at(1.0),
        at(0.0)
    );
    browser.close().await
}
