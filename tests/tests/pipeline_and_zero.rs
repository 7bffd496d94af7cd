//! Every layout the rank grid draws runs (issue #51), as a learner does it through the viewer
//! link: beyond's rank grid, set to two pipeline stages of cpu_tiny with two micro-batches and
//! 1F1B, launched with "Run this layout", trains to its end as that layout (its record says
//! pp 2); and sharding-and-memory's ZeRO sweeps, on cpu_tiny, give the agreement verdict
//! (every stage learns what DDP learns) and bars of the training state a rank holds that fall
//! stage by stage as ZeRO says, each beside the estimate's tick.

use std::time::Duration;

use scalebook_e2e::{Browser, Server, with_tiny_data};
use scalebook_shared::protocol::RunRecord;
use scalebook_shared::rundir;

const VIEWER_TOKEN: &str = "pipeline-zero-viewer-link-0123456789";
/// Beyond's smaller rank grid (64 GPUs, tp 4 × dp 4 × pp 4, until the learner types), marked
/// by the test.
const GRID: &str = "#grid-under-test";

fn records(server: &Server) -> anyhow::Result<Vec<RunRecord>> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(server.workdir.join("runs"))? {
        if let Ok(text) = std::fs::read_to_string(entry?.path().join(rundir::RECORD)) {
            records.push(serde_json::from_str::<RunRecord>(&text)?);
        }
    }
    Ok(records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_runs_pipeline_stages_from_the_rank_grid_and_zero_from_its_chapter() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-pipeline-zero")?;
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN, "--viewer-runs", "1"])?;
    let learner = Browser::start().await?;
    learner.client.goto(&format!("http://{}/#/beyond&token={VIEWER_TOKEN}", server.addr)).await?;
    learner.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // Two stages of cpu_tiny (a learner's config), no tp, one replica: 2 ranks on this machine.
    learner.wait_eval("document.querySelectorAll('.rank-grid-block select.grid-config').length === 2").await?;
    learner.eval("document.querySelectorAll('.rank-grid-block')[1].id = 'grid-under-test'; return true").await?;
    for (field, value) in [("tp", "1"), ("dp", "1"), ("pp", "2"), ("num_micro_batches", "2")] {
        learner.type_into(&format!("{GRID} input[data-field={field}]"), value).await?;
    }
    learner.select(&format!("{GRID} select[data-field=pipeline_schedule]"), "1f1b").await?;
    learner.select(&format!("{GRID} select.grid-config"), "cpu_tiny").await?;
    learner.wait_text(&format!("{GRID} button.run-layout"), |t| t.contains("cpu_tiny")).await?;
    learner.click(&format!("{GRID} button.run-layout")).await?;
    learner.wait_attr_for(&format!("{GRID} .current-run .run-state"), "data-state", |s| s == "completed", Duration::from_secs(600)).await?;
    let piped = records(&server)?;
    anyhow::ensure!(piped.len() == 1, "one run: {piped:?}");
    let sizes = piped[0].layout.sizes();
    assert_eq!((sizes.pp, sizes.dp, sizes.tp), (2, 1, 1), "the run is the layout the grid drew");
    for key in ["pipeline_parallel=2", "num_micro_batches=2", "pipeline_schedule=1f1b"] {
        assert!(piped[0].overrides.iter().any(|o| o == key), "{key} in {:?}", piped[0].overrides);
    }

    // ZeRO 1 to 3 beside DDP, on two ranks of cpu_tiny: the agreement sweep, then the state.
    learner.eval("location.hash = '#/sharding-and-memory'; return true").await?;
    for measure in ["agreement", "state"] {
        let block = format!(".sweep-block[data-measure={measure}]");
        learner.select(&format!("{block} select.sweep-config"), "cpu_tiny").await?;
        learner.click(&format!("{block} button.run-sweep")).await?;
        let done = format!(
            "Array.from(document.querySelectorAll('{block} ol.variants li')).map(li => li.dataset.state).join() === 'completed,completed,completed,completed'"
        );
        learner.wait_eval_for(&done, Duration::from_secs(900)).await?;
    }
    for variant in 1..=3 {
        let verdict = format!(".sweep-block[data-measure=agreement] li.verdict[data-variant='{variant}']");
        learner.wait_attr(&verdict, "data-agrees", |a| a == "true").await?;
    }
    let bar = |i: usize| format!(".sweep-block[data-measure=state] g.bar[data-variant='{i}']");
    let mut held = Vec::new();
    for i in 0..4 {
        let value: f64 = learner.wait_attr(&bar(i), "data-value", |v| v.parse::<f64>().is_ok()).await?.parse()?;
        let predicted: f64 = learner.wait_attr(&bar(i), "data-predicted", |v| v.parse::<f64>().is_ok()).await?.parse()?;
        held.push((value, predicted));
    }
    // Each stage holds less than the one before; stage 3 half of DDP over dp 2.
    assert!(held.windows(2).all(|w| w[1].0 < w[0].0), "{held:?}");
    assert!((held[3].0 / held[0].0 - 0.5).abs() < 0.01, "{held:?}");
    // Stages 0-2 as the estimate has them; at stage 3 the estimate also counts the block it
    // gathers while it runs, which the trainer has freed when it reports between steps.
    assert!(held[..3].iter().all(|(value, predicted)| (value / predicted - 1.0).abs() < 0.01), "measured beside predicted: {held:?}");
    assert!(held[3].0 < held[3].1, "{held:?}");
    assert!(learner.console_errors().await?.is_empty());
    learner.close().await
}
