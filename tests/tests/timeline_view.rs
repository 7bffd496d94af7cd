//! The profiling chapter's timeline: a two-rank `cpu_tiny` run launched from the page with a
//! `profile` window, whose traces (libtorch's profiler, one Chrome-trace file per rank) hold
//! every named range on every rank and are drawn as lanes for each rank with those ranges on
//! top, with a hover that names what the pointer is over, zoom, and the table of ops; a trace
//! too large to download, drawn from the server's excerpts; and the recorded GPU run beside
//! it, loaded from the project's static files.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;

use scalebook_e2e::{Browser, PrefixProxy, Server, with_tiny_data};
use scalebook_shared::profile::trace::{ProfileSummary, Timeline, Trace};
use scalebook_shared::profile::{ranges, trace_file};
use scalebook_shared::protocol::{RunId, RunRecord};
use scalebook_shared::rundir;

const TIMELINE: &str = "section.timeline:not(.recorded)";
const RANKS: usize = 2;

/// The ranges every rank of a data-parallel run marks.
fn named_ranges() -> Vec<&'static str> {
    let mut names = ranges::STEP.to_vec();
    names.push(ranges::GRAD_ALLREDUCE);
    names
}

/// The trainer's trace of every rank of the run in `run_dir`, read as the browser reads it.
fn traces_of(run_dir: &Path) -> anyhow::Result<Vec<(usize, Trace)>> {
    let dir = run_dir.join(rundir::PROFILE_DIR);
    (0..RANKS)
        .map(|rank| {
            let path = dir.join(trace_file(rank));
            let text = std::fs::read_to_string(&path).with_context(|| format!("the trainer wrote no {}", path.display()))?;
            Ok((rank, Trace::parse(&text)?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_draws_every_ranks_lanes_and_ranges_and_tabulates_the_ops() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-timeline")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/profiling", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    // No run has a profile yet: the block says how to make one.
    browser.wait_attr(TIMELINE, "data-state", |s| s == "none").await?;
    browser.wait_text(&format!("{TIMELINE} p.message"), |t| t.contains("profile: 5:8")).await?;

    // Two ranks of cpu_tiny (its data is in the server's working directory), steps 2 and 3.
    browser.select(".config-editor select", "cpu_tiny").await?;
    browser.wait_value(".config-editor input[data-field=embed_dim]", |v| v == "48").await?;
    browser.paste_into(".config-editor input[data-field=profile]", "2:4").await?;
    browser.paste_into(".run-block input.dp", "2").await?;
    browser.wait_text(".run-block", |t| t.contains("profile=") && t.contains("2:4")).await?;
    browser.click(".run-block button.launch").await?;
    let run = browser.wait_attr(".run-block .current-run", "data-run", |r| !r.is_empty()).await?;
    browser.wait_attr_for(".run-block .run-state", "data-state", |s| s == "completed", Duration::from_secs(600)).await?;
    let traces = traces_of(&workdir.path().join("runs").join(&run))?;
    // The server summarised the profile as the run ended, before any page asked.
    let kept = workdir.path().join("runs").join(&run).join("profile").join("summary.json");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !kept.is_file() {
        anyhow::ensure!(std::time::Instant::now() < deadline, "no profile summary kept in {}", kept.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Each step's phases (data wait, forward, backward, optimizer), as the summary counts
    // them, add up to at most the step: a range the rank's threads all marked counts once.
    // (The gradients' all-reduce overlaps backward by design, and is not a phase.)
    // (The server keeps it as `value`, beside the stamps of the traces it read.)
    let kept_file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&kept)?)?;
    let summary: ProfileSummary = serde_json::from_value(kept_file["value"].clone())?;
    for rank in &summary.ranks {
        for step in &rank.steps {
            let parts: f64 = step.ranges.iter().filter(|r| ranges::STEP.contains(&r.name.as_str())).map(|r| r.us).sum();
            assert!(
                parts <= step.total_us * 1.0001,
                "rank {}, step {}: {parts} µs of parts in a {} µs step",
                rank.rank,
                step.step,
                step.total_us
            );
        }
    }
    let expected = Timeline::new(traces);
    for rank in 0..RANKS {
        let names = expected.range_names(rank);
        assert!(named_ranges().iter().all(|n| names.contains(n)), "rank {rank}'s trace lacks a range: {names:?}");
    }

    // The block follows the latest run with a profile, and loads it once the run has ended.
    browser.wait_attr(TIMELINE, "data-run", |r| r == run).await?;
    browser.wait_attr(TIMELINE, "data-state", |s| s == "ready").await?;
    for rank in 0..RANKS {
        let lane = |kind: &str| format!("{TIMELINE} g.lane[data-rank='{rank}'][data-kind='{kind}']");
        let threads = browser.eval(&format!("return document.querySelectorAll(\"{}\").length", lane("thread"))).await?;
        assert!(threads.as_u64().unwrap_or(0) >= 1, "rank {rank} has no thread lane");
        browser.wait_attr(&lane("thread"), "data-bars", |b| b.parse::<usize>().is_ok_and(|n| n > 0)).await?;
        for name in named_ranges() {
            browser.find(&format!("{} rect.range[data-name='{name}']", lane("ranges"))).await?;
        }
    }

    // The server's summary first: each rank's mean step cut by range, and the straggler at
    // each all-reduce of the two ranks.
    for rank in 0..RANKS {
        let bar = format!("{TIMELINE} .profile-summary table.step-split tr[data-rank='{rank}'] svg.step-bar");
        browser.wait_attr(&bar, "aria-label", |l| l.contains(ranges::FORWARD) && l.contains(ranges::BACKWARD)).await?;
    }
    browser.wait_text(&format!("{TIMELINE} .profile-summary table.stragglers caption"), |t| t.contains("arrived last")).await?;

    // The ops table lists the ops, the largest total first.
    let ops = browser
        .eval(&format!("return Array.from(document.querySelectorAll('{TIMELINE} table.ops tbody tr')).map(r => r.dataset.op)"))
        .await?;
    let ops: Vec<String> = serde_json::from_value(ops)?;
    assert!(!ops.is_empty() && ops.len() <= 15, "{ops:?}");
    assert!(ops.iter().all(|op| !op.is_empty() && !named_ranges().contains(&op.as_str())), "ranges are not ops: {ops:?}");

    // The pointer over a range names it, with its rank.
    let forward = format!("{TIMELINE} g.lane[data-rank='1'][data-kind='ranges'] rect.range[data-name='{}']", ranges::FORWARD);
    let hover = format!(
        "(() => {{ const r = document.querySelector(\"{forward}\").getBoundingClientRect(); \
         document.querySelector('{TIMELINE} svg.timeline-svg').dispatchEvent(new PointerEvent('pointermove', \
           {{ clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true }})); return true; }})()"
    );
    browser.eval(&format!("return {hover}")).await?;
    browser.wait_text(&format!("{TIMELINE} .timeline-hover"), |t| t.starts_with(ranges::FORWARD) && t.contains("rank 1")).await?;

    // Zooming in narrows the window the block shows.
    let whole = browser.wait_text(&format!("{TIMELINE} .shown"), |t| t.contains(" to ")).await?;
    browser.click(&format!("{TIMELINE} button.zoom-in")).await?;
    browser.wait_text(&format!("{TIMELINE} .shown"), |t| t != whole).await?;

    let errors = browser.console_errors().await?;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await
}

/// The profiling chapter's recorded GPU run: loaded from the static files (its trace served
/// compressed) under a proxy prefix, labelled with the GPU it ran on, with the GPU's stream
/// drawn as a lane of its own under the CPU threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorded_gpu_run_draws_the_gpus_stream_under_the_cpu_threads() -> anyhow::Result<()> {
    const RECORDED: &str = "section.timeline[data-recorded='h200-short-0workers']";
    let workdir = with_tiny_data("scalebook-e2e-recorded")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/profiling", server.token))).await?;
    browser.wait_attr(RECORDED, "data-state", |s| s == "ready").await?;
    browser.wait_text(&format!("{RECORDED} p.summary"), |t| t.contains("on an NVIDIA H200")).await?;
    let labels =
        browser.eval(&format!("return Array.from(document.querySelectorAll(\"{RECORDED} g.lane\")).map(g => g.dataset.label)")).await?;
    let labels: Vec<String> = serde_json::from_value(labels)?;
    let gpu = labels.iter().position(|l| l.starts_with("GPU 0 · stream")).with_context(|| format!("no GPU stream lane: {labels:?}"))?;
    assert!(gpu > 0 && labels[..gpu].iter().any(|l| l.contains("thread")), "the CPU threads come first: {labels:?}");
    browser.wait_attr(&format!("{RECORDED} g.lane[data-label^='GPU 0']"), "data-bars", |b| b.parse::<usize>().is_ok_and(|n| n > 0)).await?;
    let errors = browser.console_errors().await?;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await
}

/// A finished run whose rank-0 trace is larger than a page downloads (about 20 MB): the block
/// draws it from the server's excerpts, the whole trace at the drawing's width first, then the
/// window's detail once a zoom settles, without ever fetching the file whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_trace_is_drawn_from_excerpts_and_a_zoom_fetches_the_windows_detail() -> anyhow::Result<()> {
    let workdir = tempfile::Builder::new().prefix("scalebook-e2e-excerpt-").tempdir()?;
    let runs = workdir.path().join("runs");
    let id = RunId::parse("20261126T000000-1")?;
    scalebook_harness::write_finished_run(&runs, &id, 10)?;
    let record_path = runs.join(id.as_str()).join(rundir::RECORD);
    let mut record: RunRecord = serde_json::from_slice(&std::fs::read(&record_path)?)?;
    record.effective.insert("profile".into(), "1:65".into());
    std::fs::write(&record_path, serde_json::to_vec(&record)?)?;
    let profile = runs.join(id.as_str()).join(rundir::PROFILE_DIR);
    std::fs::create_dir_all(&profile)?;
    let bytes = scalebook_harness::write_kineto_trace(&profile.join(trace_file(0)), 70_000, 64)?;
    anyhow::ensure!(bytes > 16 << 20, "the trace is only {bytes} bytes");

    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/profiling", server.token))).await?;
    browser.wait_attr(TIMELINE, "data-run", |r| r == id.as_str()).await?;
    browser.wait_attr(TIMELINE, "data-state", |s| s == "ready").await?;
    browser.wait_attr(&format!("{TIMELINE} .excerpt"), "data-state", |s| s == "whole").await?;
    let lane = format!("{TIMELINE} g.lane[data-rank='0'][data-kind='thread']");
    browser.wait_attr(&lane, "data-bars", |b| b.parse::<usize>().is_ok_and(|n| n > 0)).await?;
    for name in [ranges::FORWARD, ranges::BACKWARD] {
        browser.find(&format!("{TIMELINE} g.lane[data-kind='ranges'] rect.range[data-name='{name}']")).await?;
    }
    // No table of ops: merged events are not ops (the summary lists the top ones).
    assert!(browser.attr(&format!("{TIMELINE} table.ops"), "class").await.is_none());

    // Zoomed in 64 times: the window's detail arrives and replaces the merged columns, and
    // the window stays where it was.
    for _ in 0..6 {
        browser.click(&format!("{TIMELINE} button.zoom-in")).await?;
    }
    let shown = browser.wait_text(&format!("{TIMELINE} .shown"), |t| t.contains(" to ")).await?;
    browser.wait_attr(&format!("{TIMELINE} .excerpt"), "data-state", |s| s == "window").await?;
    assert_eq!(browser.wait_text(&format!("{TIMELINE} .shown"), |_| true).await?, shown);
    browser.wait_attr(&lane, "data-bars", |b| b.parse::<usize>().is_ok_and(|n| n > 0)).await?;
    // Back to the whole trace: its excerpt again.
    browser.click(&format!("{TIMELINE} button.whole")).await?;
    browser.wait_attr(&format!("{TIMELINE} .excerpt"), "data-state", |s| s == "whole").await?;

    let errors = browser.console_errors().await?;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await
}
