//! A CPU run launched from the page: its loss curve grows as the trainer writes points, and a
//! dropped connection (the proxy cut for a few seconds mid-run) reconnects and resumes without
//! losing or repeating a point.

use std::time::{Duration, Instant};

use scalebook_e2e::{Browser, PrefixProxy, Server, with_tiny_data};

const TAG: &str = "Step/Loss/train";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_run_draws_a_growing_curve_through_a_dropped_connection() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-run")?;
    let server = Server::start_in(&workdir.0, &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // Work on cpu_tiny (its data is in the server's working directory), long enough to watch.
    let select = browser.client.find(fantoccini::Locator::Css(".config-editor select")).await?;
    select.select_by_value("cpu_tiny").await?;
    browser.wait_value(".config-editor input[data-field=embed_dim]", |v| v == "48").await?;
    browser.type_into(".config-editor input[data-field=num_iters]", "240").await?;
    browser.wait_text(".run-block", |t| t.contains("num_iters=240")).await?;
    browser.client.find(fantoccini::Locator::Css(".run-block button.launch")).await?.click().await?;

    let run = browser.wait_attr(".run-block .current-run", "data-run", |r| !r.is_empty()).await?;
    let series = format!(".charts figure[data-tag='{TAG}'] g.series[data-key='{run}']");
    let points = || async { browser.attr(&series, "data-points").await.and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) };

    // The curve grows while the run trains.
    let mut seen = vec![0];
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < 3 && Instant::now() < deadline {
        let n = points().await;
        if n > *seen.last().unwrap() {
            seen.push(n);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.len() >= 3, "the curve did not grow point by point: {seen:?}");

    // Cut the connection for three seconds: the indicator says so, then reconnects.
    proxy.cut_for(Duration::from_secs(3));
    browser.wait_attr(".connection", "data-state", |s| s == "reconnecting").await?;
    browser.wait_attr_for(".connection", "data-state", |s| s == "open", Duration::from_secs(30)).await?;

    // When the run has finished, the page holds exactly the points the trainer wrote.
    browser.wait_attr_for(".run-block .run-state", "data-state", |s| s == "completed", Duration::from_secs(300)).await?;
    let metrics = std::fs::read_to_string(workdir.0.join("runs").join(&run).join("metrics.jsonl"))?;
    let written = metrics.lines().filter(|l| l.contains(&format!("\"tag\":\"{TAG}\""))).count();
    assert!(written > seen[2], "the run wrote {written} points");
    browser.wait_attr(&series, "data-points", |p| p == written.to_string()).await?;
    // The loss went down: the smoothed path ends lower than it starts.
    let path = browser.attr(&format!("{series} path.smoothed"), "d").await.unwrap_or_default();
    let ys: Vec<f64> = path.split(['M', 'L']).filter(|p| !p.is_empty()).filter_map(|p| p.split(' ').nth(1)?.parse().ok()).collect();
    assert!(ys.last() > ys.first(), "SVG y grows downwards, so a falling loss ends with a larger y: {path}");

    browser.close().await
}
