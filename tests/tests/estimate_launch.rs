//! From the estimate to a run and back (issue #27): the tensor-parallel chapter's estimate
//! block, switched to this machine's cores and cpu_short on two ranks, launches its layout;
//! under the block the run shows its progress and time left while it trains, then what it
//! measured beside the prediction the server recorded at launch, which is the figure the block
//! showed before anything ran.

use std::time::Duration;

use scalebook_e2e::{Browser, Server, with_project_data};
use scalebook_shared::estimate::Prediction;
use scalebook_shared::protocol::RunRecord;
use scalebook_shared::rundir;

const BLOCK: &str = ".estimate-block";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_launched_from_its_estimate_lands_beside_its_prediction() -> anyhow::Result<()> {
    let workdir = with_project_data("scalebook-e2e-estimate-run")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("tensor-parallel")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    browser.wait_attr(&format!("{BLOCK} .verdict"), "data-fits", |_| true).await?;

    // cpu_short on this machine's cores, tp 1 and dp 2.
    browser.select(&format!("{BLOCK} select.estimate-config"), "cpu_short").await?;
    browser.select(&format!("{BLOCK} select.estimate-gpu"), "@this-machine").await?;
    browser.type_into(&format!("{BLOCK} input[data-field=tp]"), "1").await?;
    browser.type_into(&format!("{BLOCK} input[data-field=dp]"), "2").await?;
    // Measured once by the server (a few seconds), then estimated here.
    let shown = browser.wait_attr_for(&format!("{BLOCK} .samples-per-sec"), "data-value", |_| true, Duration::from_secs(120)).await?;
    let shown: f64 = shown.parse()?;
    browser.wait_text(&format!("{BLOCK} button.run-layout"), |t| t.contains("cpu_short") && t.contains("this machine")).await?;
    browser.click(&format!("{BLOCK} button.run-layout")).await?;

    // While it trains: its step, a bar, and the time left. Its two ranks' first steps wait for
    // the cores while other tests train beside it (over 90 s, seen in a clean clone's run).
    let progress = format!("{BLOCK} .current-run .run-progress");
    if let Err(e) = browser.wait_text_for(&progress, |t| t.contains(" left"), Duration::from_secs(300)).await {
        let block = browser.eval(&format!("return document.querySelector('{BLOCK}').innerText")).await?;
        anyhow::bail!("{e}; the block said: {}", block.as_str().unwrap_or_default());
    }
    let state = browser.attr(&format!("{BLOCK} .current-run .run-state"), "data-state").await;
    assert_eq!(state.as_deref(), Some("running"), "time left is shown while the run trains");
    // At its end: predicted, measured and their ratio, for each quantity.
    browser
        .wait_attr_for(&format!("{BLOCK} .current-run .run-state"), "data-state", |s| s == "completed", Duration::from_secs(600))
        .await?;
    let row = |quantity: &str| format!("{BLOCK} table.prediction tr[data-quantity='{quantity}']");
    for quantity in ["samples/s", "step time", "peak memory per rank", "model FLOP/s per rank", "share of the peak (MFU)"] {
        browser.wait_attr(&row(quantity), "data-ratio", |r| r.parse::<f64>().is_ok_and(|x| x > 0.0)).await?;
    }
    let predicted: f64 = browser.attr(&row("samples/s"), "data-predicted").await.unwrap_or_default().parse()?;
    assert!((predicted - shown).abs() <= 1e-9 * shown, "the run's prediction ({predicted}) is the estimate the block showed ({shown})");

    // The run is the layout the block showed, predicted before it started.
    let runs: Vec<_> = std::fs::read_dir(workdir.path().join("runs"))?.collect::<Result<_, _>>()?;
    assert_eq!(runs.len(), 1);
    let dir = runs[0].path();
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(dir.join(rundir::RECORD))?)?;
    assert_eq!((record.config.as_str(), record.layout.sizes().dp, record.layout.sizes().tp), ("cpu_short", 2, 1));
    assert!(record.overrides.iter().any(|o| o == "tensor_parallel=1"), "{:?}", record.overrides);
    let prediction: Prediction = serde_json::from_str(&std::fs::read_to_string(dir.join(rundir::PREDICTION))?)?;
    assert!((prediction.made_at as f64) <= record.created_at + 1.0, "made at launch");
    // The trainer's log says it too, before its first step.
    let log = std::fs::read_to_string(dir.join(rundir::OUT_LOG))?;
    let said = log.lines().position(|l| l.contains("Predicted at launch for this machine's CPU"));
    let first_epoch = log.lines().position(|l| l.contains("Time taken for epoch 1"));
    assert!(said.is_some() && said < first_epoch, "{log}");
    assert!(browser.console_errors().await?.is_empty());
    browser.close().await
}
