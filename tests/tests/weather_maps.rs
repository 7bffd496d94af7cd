//! The weather blocks in a real browser behind a proxy prefix: the data chapter's block draws a
//! channel of a real HDF5 sample (and says why when its config's crop does not fit the data),
//! and the block of the first training chapter follows a live run's maps epoch by epoch and
//! shows a finished run's forecast rolled out lead by lead.

use std::time::Duration;

use scalebook_e2e::notebook::launch_tiny_run;
use scalebook_e2e::{Browser, PrefixProxy, Server, with_tiny_data};

const DATA: &str = ".data-block";
const MAPS: &str = ".maps-block";

/// A JavaScript test that the image matching `css` has loaded and has pixels.
fn loaded(css: &str, also: &str) -> String {
    format!("(() => {{ const i = document.querySelector('{css}'); return !!i && i.complete && i.naturalWidth > 0 && {also}; }})()")
}

/// Fails unless the console's errors since the last look are only the browser's notes of the
/// sample requests the server refused with `status` (what the block then explained).
async fn refused_requests_only(browser: &Browser, status: u16) -> anyhow::Result<()> {
    let errors = browser.console_errors().await?;
    let expected = |e: &String| e.contains("api/data/sample") && e.contains(&format!("status of {status}"));
    anyhow::ensure!(!errors.is_empty() && errors.iter().all(expected), "console errors: {errors:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_block_draws_a_channel_of_a_sample_and_switches_channels() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-data")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/model-and-data", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // The chapter's cpu_short crops 90 × 180, more than this server's tiny data has: the block
    // shows the server's reason.
    browser.wait_text(&format!("{DATA} p.error"), |t| t.contains("smaller than the 90 × 180")).await?;
    refused_requests_only(&browser, 404).await?;
    browser.select(&format!("{DATA} select.data-config"), "cpu_tiny").await?;
    let image = format!("{DATA} img.data-image");
    browser.wait_eval(&loaded(&image, "i.naturalWidth === 72 && i.naturalHeight === 36 && i.dataset.channel === 't2m'")).await?;
    browser.wait_attr(DATA, "data-state", |s| s == "ready").await?;
    browser.wait_text(&format!("{DATA} .colour-legend .legend-units"), |t| t == "K").await?;
    browser.wait_attr(&format!("{DATA} svg.latitude-weights"), "data-rows", |r| r == "36").await?;
    let t2m = browser.attr(&image, "src").await.unwrap_or_default();

    browser.select(&format!("{DATA} select.data-channel"), "u10").await?;
    browser.wait_eval(&loaded(&image, "i.dataset.channel === 'u10'")).await?;
    browser.wait_text(&format!("{DATA} .colour-legend .legend-units"), |t| t == "m/s").await?;
    assert_ne!(browser.attr(&image, "src").await.unwrap_or_default(), t2m, "the channel changed, the picture did not");

    // The sample number moves the picture through time; one past the end is refused with the count.
    browser.paste_into(&format!("{DATA} input.data-slider"), "5").await?;
    browser.wait_eval(&loaded(&image, "i.dataset.index === '5'")).await?;
    browser.wait_text(&format!("{DATA} p.where"), |t| t.contains("Sample 5 of 48")).await?;
    assert!(browser.console_errors().await?.is_empty());
    browser.type_into(&format!("{DATA} input.data-index"), "48").await?;
    browser.wait_text(&format!("{DATA} p.error"), |t| t.contains("48 samples (0 to 47)")).await?;
    refused_requests_only(&browser, 400).await?;
    browser.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maps_block_follows_a_live_run_epoch_by_epoch() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-maps")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // Long enough to be watched while it trains (4 steps an epoch); cancelled at the end.
    let run = launch_tiny_run(&browser, 4000).await?;
    browser.wait_attr(MAPS, "data-run", |r| r == run).await?;
    let image = format!("{MAPS} img.maps-image");
    let running = "document.querySelector('.run-block .run-state')?.dataset.state === 'running'";
    // The block follows the newest epoch while the run trains: a first map, then a later one.
    browser.wait_eval_for(&loaded(&image, &format!("Number(i.dataset.epoch) >= 1 && {running}")), Duration::from_secs(240)).await?;
    let first: u64 = browser.attr(&image, "data-epoch").await.unwrap_or_default().parse()?;
    browser.wait_eval_for(&loaded(&image, &format!("Number(i.dataset.epoch) > {first} && {running}")), Duration::from_secs(240)).await?;
    browser.click(".run-block button.cancel").await?;
    browser.wait_attr(".run-block .run-state", "data-state", |s| s == "cancelled").await?;

    let panels =
        browser.eval(&format!("return Array.from(document.querySelectorAll('{MAPS} .maps-panels span')).map(s => s.textContent)")).await?;
    let panels = panels.to_string();
    for title in ["input", "target", "prediction", "error"] {
        assert!(panels.contains(title), "no {title} panel: {panels}");
    }
    browser.wait_eval(&format!("document.querySelectorAll('{MAPS} .colour-legend').length === 2")).await?;
    browser.wait_text(&format!("{MAPS} .colour-legend .legend-units"), |t| t == "K").await?;
    assert_eq!(browser.attr(&image, "data-channel").await.as_deref(), Some("t2m"));

    // Back to the first epoch with the slider, then the other channel at that epoch.
    browser.paste_into(&format!("{MAPS} input.maps-epoch"), "0").await?;
    browser.wait_eval(&loaded(&image, "i.dataset.epoch === '1'")).await?;
    browser.wait_text(&format!("{MAPS} output.maps-epoch-label"), |t| t.starts_with("epoch 1 of ")).await?;
    browser.click(&format!("{MAPS} button.maps-channel[data-channel=u10]")).await?;
    browser.wait_eval(&loaded(&image, "i.dataset.epoch === '1' && i.dataset.channel === 'u10'")).await?;
    browser.wait_text(&format!("{MAPS} .colour-legend .legend-units"), |t| t == "m/s").await?;
    assert!(browser.console_errors().await?.is_empty());
    browser.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_rolls_its_forecast_out_lead_by_lead() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-rollout")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // Three epochs of four steps; the rollout follows the last one.
    let run = launch_tiny_run(&browser, 12).await?;
    browser.wait_attr(MAPS, "data-run", |r| r == run).await?;
    let rollout = format!("{MAPS} .rollout");
    let drawn = format!(
        "(() => {{ const r = document.querySelector('{rollout}'); return !!r && !r.hidden \
         && document.querySelectorAll('{rollout} svg.rollout-chart polyline').length === 2; }})()"
    );
    browser.wait_eval_for(&drawn, Duration::from_secs(240)).await?;
    browser.wait_text(&format!("{rollout} h4"), |t| t.contains("8 times")).await?;
    let image = format!("{MAPS} img.rollout-image");
    browser.wait_eval(&loaded(&image, "i.dataset.file === 'lead006h-t2m.png'")).await?;
    // A day ahead with the slider, then the other channel at that lead.
    browser.paste_into(&format!("{MAPS} input.rollout-lead"), "3").await?;
    browser.wait_text(&format!("{MAPS} output.rollout-lead-label"), |t| t == "+24 h").await?;
    browser.wait_eval(&loaded(&image, "i.dataset.file === 'lead024h-t2m.png'")).await?;
    browser.click(&format!("{MAPS} button.maps-channel[data-channel=u10]")).await?;
    browser.wait_eval(&loaded(&image, "i.dataset.file === 'lead024h-u10.png'")).await?;
    browser.wait_text(&format!("{rollout} figcaption"), |t| t.contains("u10 24 h ahead") && t.contains("persistence")).await?;
    assert!(browser.console_errors().await?.is_empty());
    browser.close().await
}
