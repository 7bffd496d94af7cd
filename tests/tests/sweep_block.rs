//! The data-parallel chapter's DDP-knobs sweep, run from the page on this machine: each
//! variant (two ranks with DDP, bigger buckets, no buffer broadcast, no DDP) runs to the end
//! one after another, with the chapter's settings, and the block draws every throughput; the
//! chapter's charts name its runs by their variants, and other chapters' charts leave them out.

use std::time::Duration;

use scalebook_e2e::{Browser, PrefixProxy, Server, with_project_data, with_tiny_data};
use scalebook_shared::protocol::RunRecord;
use scalebook_shared::rundir;

const SWEEP: &str = ".sweep-block[data-measure=throughput]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ddp_knobs_sweep_runs_every_variant_and_draws_its_throughput() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-sweep")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/data-parallel", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    browser.wait_text(SWEEP, |t| t.contains("noddp=true") && t.contains("bucket_cap_mb=100")).await?;
    let variants = browser.eval(&format!("return document.querySelectorAll('{SWEEP} ol.variants li').length")).await?;
    let variants = variants.as_u64().unwrap_or(0) as usize;
    assert!(variants >= 3, "{variants} variants");

    // cpu_tiny: its data is in the server's working directory, and it runs in seconds.
    browser.select(&format!("{SWEEP} select.sweep-config"), "cpu_tiny").await?;
    browser.click(&format!("{SWEEP} button.run-sweep")).await?;
    // Every run ended, and every bar has its value (a bar appears with a run's first epoch).
    let drawn = format!(
        "(() => {{ const bars = document.querySelectorAll('{SWEEP} g.bar'); \
         const states = Array.from(document.querySelectorAll('{SWEEP} ol.variants li')).map(li => li.dataset.state); \
         return bars.length === {variants} && Array.from(bars).every(b => Number(b.dataset.value) > 0) \
           && states.every(s => s === 'completed'); }})()"
    );
    browser.wait_eval_for(&drawn, Duration::from_secs(600)).await?;
    let states = browser
        .eval(&format!("return Array.from(document.querySelectorAll('{SWEEP} ol.variants li')).map(li => li.dataset.state)"))
        .await?;
    assert!(states.as_array().is_some_and(|s| s.iter().all(|s| s == "completed")), "{states}");
    let widths = browser
        .eval(&format!("return Array.from(document.querySelectorAll('{SWEEP} g.bar rect')).map(r => Number(r.getAttribute('width')))"))
        .await?;
    assert!(widths.as_array().is_some_and(|w| w.iter().all(|w| w.as_f64().is_some_and(|w| w > 0.0))), "{widths}");

    // The runs were the chapter's variants: two ranks each, with their knobs, all from the one
    // seed the block names.
    let mut records = Vec::new();
    let mut seeds = Vec::new();
    for entry in std::fs::read_dir(workdir.path().join("runs"))? {
        let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(entry?.path().join(rundir::RECORD))?)?;
        seeds.push(record.seed);
        records.push((record.layout.sizes().dp, record.overrides.join(" "), record.config));
    }
    let named = browser.attr(&format!("{SWEEP} .sweep-seed"), "data-seed").await;
    assert!(seeds.iter().all(|s| s.map(|s| s.to_string()) == named), "one seed for every variant: {seeds:?}, the block says {named:?}");
    assert_eq!(records.len(), variants, "{records:?}");
    assert!(records.iter().all(|(dp, _, config)| *dp == 2 && config == "cpu_tiny"), "{records:?}");
    assert!(records.iter().any(|(_, o, _)| o.contains("noddp=true")), "{records:?}");

    // The chapter's charts name the sweep's runs by their variants...
    let legend = browser.wait_text(".charts .legend", |t| t.contains("no DDP (no gradient all-reduce) (cpu_tiny)")).await?;
    assert!(legend.contains("DDP, 100 MB buckets (cpu_tiny)"), "{legend}");
    // ...and another chapter's charts leave them out.
    browser.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    browser.wait_text(".charts", |t| t.contains("No runs charted yet") || t.contains("tutorial baseline")).await?;
    let elsewhere = browser.eval("return document.querySelectorAll('.charts .legend-item:not([data-key=baseline])').length").await?;
    assert_eq!(elsewhere, 0, "the data-parallel chapter's runs on the single-GPU chapter's charts");
    assert!(browser.console_errors().await?.is_empty());
    browser.close().await
}

const AGREEMENT: &str = ".sweep-block[data-measure=agreement]";

/// The context-parallel chapter's agreement sweep on the chapter's own `cpu_mp` (issue #27 ran it
/// on `cpu_short`, four times the steps: 7 minutes of the test command for the same verdicts;
/// the config switch is the DDP-knobs test's): one rank, dp = 2, tp = 2 and cp = 2 from one seed
/// learn the same (within the block's band at both of its epochs), and the control
/// with another `embed_dim` is reported as a different model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layouts_learn_the_same_and_another_model_does_not() -> anyhow::Result<()> {
    let workdir = with_project_data("scalebook-e2e-agreement")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("context-parallel")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    browser.wait_text(AGREEMENT, |t| t.contains("context_parallel=2") && t.contains("embed_dim=64")).await?;
    // Before it runs, each of its two pictures says what it will show.
    let waiting = format!("return Array.from(document.querySelectorAll('{AGREEMENT} svg text.waiting')).map(t => t.textContent)");
    let said = browser.eval(&waiting).await?;
    let said: Vec<String> = serde_json::from_value(said)?;
    assert!(said.len() == 2 && said[0].contains("validation loss") && said[1].contains("band"), "{said:?}");
    // The config switch offers the CPU configs only: a sweep runs here.
    let offered = browser
        .eval(&format!("return Array.from(document.querySelectorAll('{AGREEMENT} select.sweep-config option')).map(o => o.value)"))
        .await?;
    assert_eq!(offered, serde_json::json!(["cpu_short", "cpu_tiny", "cpu_mp"]));
    browser.click(&format!("{AGREEMENT} button.run-sweep")).await?;
    // Every run completed and every verdict is in.
    let judged = format!(
        "(() => {{ const states = Array.from(document.querySelectorAll('{AGREEMENT} ol.variants li')).map(li => li.dataset.state); \
         const verdicts = Array.from(document.querySelectorAll('{AGREEMENT} ul.verdicts li')); \
         return states.length === 5 && states.every(s => s === 'completed') \
           && verdicts.length === 4 && verdicts.every(v => v.dataset.agrees !== ''); }})()"
    );
    browser.wait_eval_for(&judged, Duration::from_secs(900)).await?;
    assert_eq!(browser.eval(&waiting).await?, serde_json::json!([]), "the pictures are drawn");
    let verdicts = browser
        .eval(&format!(
            "return Array.from(document.querySelectorAll('{AGREEMENT} ul.verdicts li')).map(v => [v.dataset.agrees, Number(v.dataset.worst), v.textContent])"
        ))
        .await?;
    let verdicts = verdicts.as_array().cloned().unwrap_or_default();
    for v in &verdicts[..3] {
        assert_eq!(v[0], "true", "dp, tp and cp learn what one rank learns: {v}");
        assert!(v[1].as_f64().is_some_and(|w| w <= scalebook_page::blocks::sweep_agreement::BAND), "{v}");
    }
    assert_eq!(verdicts[3][0], "false", "another embed_dim is another model: {}", verdicts[3]);
    assert!(verdicts[3][2].as_str().is_some_and(|t| t.contains("changes the model (embed_dim 96 → 64)")), "{}", verdicts[3]);
    // The difference picture draws the three layouts and the control, under and over the band.
    let paths = browser.eval(&format!("return document.querySelectorAll('{AGREEMENT} figure.agreement path.curve').length")).await?;
    assert_eq!(paths.as_u64(), Some(4), "{paths}");

    let mut seeds = Vec::new();
    for entry in std::fs::read_dir(workdir.path().join("runs"))? {
        let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(entry?.path().join(rundir::RECORD))?)?;
        assert_eq!(record.config, "cpu_mp");
        seeds.push(record.seed);
    }
    assert_eq!(seeds.len(), 5);
    assert!(seeds.windows(2).all(|w| w[0] == w[1] && w[0].is_some()), "one seed for every variant: {seeds:?}");
    assert!(browser.console_errors().await?.is_empty());
    browser.close().await
}
