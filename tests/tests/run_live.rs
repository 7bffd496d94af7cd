//! A CPU run launched from the page: its loss curve grows as the trainer writes points, and a
//! dropped connection (the proxy cut for a few seconds mid-run) reconnects and resumes without
//! losing or repeating a point; at its end the run shows every step it said it would take, taken,
//! and what it measured beside what was predicted for it at launch.

use std::time::Duration;

use scalebook_e2e::notebook::{STEP_LOSS, launch_tiny_run, series_css, watch_growth};
use scalebook_e2e::{Browser, PrefixProxy, Server, WAIT, with_tiny_data};
use scalebook_shared::metrics::tags;
use scalebook_shared::rundir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_run_draws_a_growing_curve_through_a_dropped_connection() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-run")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // Work on cpu_tiny (its data is in the server's working directory), long enough to watch
    // it grow (a few milliseconds a step: 2000 steps are many seconds even on an idle machine).
    let run = launch_tiny_run(&browser, 2000).await?;
    let series = series_css(STEP_LOSS, &run);
    // The curve grows while the run trains.
    let seen = watch_growth(&browser, &series, 2, Duration::from_secs(240)).await?;

    // Cut the connection for three seconds: the indicator says so, then reconnects.
    proxy.cut_for(Duration::from_secs(3));
    browser.wait_attr(".connection", "data-state", |s| s == "reconnecting").await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // When the run has finished, the page holds exactly the points the trainer wrote.
    browser.wait_attr_for(".run-block .run-state", "data-state", |s| s == "completed", Duration::from_secs(600)).await?;
    let metrics = std::fs::read_to_string(workdir.path().join("runs").join(&run).join(rundir::METRICS))?;
    let written = metrics.lines().filter(|l| l.contains(&format!("\"tag\":\"{STEP_LOSS}\""))).count();
    assert!(written > seen[2], "the run wrote {written} points");
    browser.wait_attr_for(&series, "data-points", |p| p == written.to_string(), WAIT).await?;
    // Its progress: every step it said it would take (`Run/Steps`, written as it started), taken.
    let planned = metrics.lines().find(|l| l.contains(&format!("\"tag\":\"{}\"", tags::run::STEPS))).unwrap_or_default();
    let total: serde_json::Value = serde_json::from_str(planned)?;
    let total = total["value"].as_f64().unwrap_or_default() as u64;
    assert!(total > 0 && total <= 2000, "Run/Steps: {planned}");
    browser.wait_attr(".run-block .run-progress", "data-step", |s| s == total.to_string()).await?;
    assert_eq!(browser.attr(".run-block .run-progress", "data-total").await.as_deref(), Some(total.to_string().as_str()));
    // Beside it, the prediction the server made at launch for this machine, with what the run
    // measured and their ratio: samples/s from epoch 2 on, and the peak memory of a rank.
    let row = |quantity: &str| format!(".run-block table.prediction tr[data-quantity='{quantity}']");
    for quantity in ["samples/s", "step time", "peak memory per rank", "model FLOP/s per rank", "share of the peak (MFU)"] {
        browser.wait_attr(&row(quantity), "data-ratio", |r| r.parse::<f64>().is_ok_and(|x| x > 0.0)).await?;
    }
    browser.wait_text(".run-block table.prediction caption", |t| t.contains("this machine")).await?;
    // The loss went down: the smoothed path ends lower than it starts.
    let path = browser.attr(&format!("{series} path.smoothed"), "d").await.unwrap_or_default();
    let ys: Vec<f64> = path.split(['M', 'L']).filter(|p| !p.is_empty()).filter_map(|p| p.split(' ').nth(1)?.parse().ok()).collect();
    assert!(ys.last() > ys.first(), "SVG y grows downwards, so a falling loss ends with a larger y: {path}");

    browser.close().await
}
