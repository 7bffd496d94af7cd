//! A learner does the chapters' hands-on work through the viewer link, under a proxy prefix:
//! runs data-parallel's weak-scaling sweep, whose second variant has two ranks, to its end
//! while reading another chapter, and finds its results on its own board (not on the
//! strong-scaling board beside it, whose variants carry the same labels); runs large-batch's
//! warm-up sweep, three variants in the README's class of two runs a learner, to its curves;
//! and a page opened without its token connects once the link is pasted into the same tab.

use std::time::Duration;

use scalebook_e2e::{Browser, PrefixProxy, Server, with_tiny_data};
use scalebook_shared::protocol::{RunRecord, RunState};
use scalebook_shared::rundir;

const VIEWER_TOKEN: &str = "hands-on-viewer-link-0123456789ab";
/// The first of data-parallel's two scaling boards: weak scaling.
const WEAK: &str = ".sweep-block[data-measure=scaling]";
/// Large-batch's sweep of the learning rate with and without a warm-up.
const WARM_UP: &str = ".sweep-block[data-measure=steploss]";

/// The learner's runs in the server's runs directory: ranks, state and whose.
fn learner_runs(server: &Server) -> anyhow::Result<Vec<RunRecord>> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(server.workdir.join("runs"))? {
        let path = entry?.path().join(rundir::RECORD);
        if let Ok(text) = std::fs::read_to_string(path) {
            records.push(serde_json::from_str::<RunRecord>(&text)?);
        }
    }
    Ok(records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_runs_a_two_rank_sweep_to_its_end_from_another_chapter() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-hands-on")?;
    // One run at a time per learner, one rank at a time on the machine: the README's class.
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN, "--viewer-runs", "1"])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let learner = Browser::start().await?;
    learner.client.goto(&proxy.url(&format!("/#/data-parallel&token={VIEWER_TOKEN}"))).await?;
    learner.wait_attr(".connection", "data-state", |s| s == "open").await?;
    learner.wait_text(WEAK, |t| t.contains("local_batch_size=8")).await?;
    let boards = learner.eval(&format!("return document.querySelectorAll('{WEAK}').length")).await?;
    assert_eq!(boards, 2, "data-parallel has a weak- and a strong-scaling board");

    learner.select(&format!("{WEAK} select.sweep-config"), "cpu_tiny").await?;
    learner.click(&format!("{WEAK} button.run-sweep")).await?;
    learner.wait_attr(&format!("{WEAK} ol.variants li[data-variant='0']"), "data-state", |s| !s.is_empty()).await?;
    // Off to another chapter while the first variant runs: the sweep goes on without its block.
    learner.eval("location.hash = '#/single-gpu'; return true").await?;
    learner.wait_attr("article.chapter", "data-chapter", |c| c == "single-gpu").await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    let finished = loop {
        let runs = learner_runs(&server)?;
        if runs.len() == 2 && runs.iter().all(|r| r.state() == RunState::Completed) {
            break runs;
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "the sweep did not finish off screen: {runs:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut ranks: Vec<u32> = finished.iter().map(|r| r.layout.sizes().dp).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [1, 2], "the second variant's two ranks ran for a learner");
    assert!(finished.iter().all(|r| r.learner.is_some()), "a learner's runs: {finished:?}");

    // Back on the chapter: the weak-scaling board holds both results, the strong one none.
    learner.eval("location.hash = '#/data-parallel'; return true").await?;
    let states = |board: usize| {
        format!(
            "return Array.from(document.querySelectorAll('{WEAK}')[{board}].querySelectorAll('ol.variants li')).map(li => li.dataset.state)"
        )
    };
    learner
        .wait_eval(&format!(
            "Array.from(document.querySelectorAll('{WEAK}')[0]?.querySelectorAll('ol.variants li') ?? []).map(li => li.dataset.state).join() === 'completed,completed'"
        ))
        .await?;
    let weak = learner.eval(&states(0)).await?;
    assert_eq!(weak, serde_json::json!(["completed", "completed"]), "the weak-scaling board");
    let strong = learner.eval(&states(1)).await?;
    assert_eq!(strong, serde_json::json!(["", ""]), "the strong-scaling board shows another sweep's runs");
    assert!(learner.console_errors().await?.is_empty());
    learner.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_runs_the_warm_up_sweep_to_its_curves() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-warm-up")?;
    // The README's class command: two runs at a time per learner.
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN, "--viewer-runs", "2"])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let learner = Browser::start().await?;
    learner.client.goto(&proxy.url(&format!("/#/large-batch&token={VIEWER_TOKEN}"))).await?;
    learner.wait_attr(".connection", "data-state", |s| s == "open").await?;
    learner.wait_text(WARM_UP, |t| t.contains("warmup=16")).await?;
    learner.select(&format!("{WARM_UP} select.sweep-config"), "cpu_tiny").await?;
    learner.click(&format!("{WARM_UP} button.run-sweep")).await?;
    let all_completed = format!(
        "Array.from(document.querySelector('{WARM_UP}').querySelectorAll('ol.variants li')).map(li => li.dataset.state).join() === 'completed,completed,completed'"
    );
    learner.wait_eval_for(&all_completed, Duration::from_secs(300)).await?;
    // One curve a variant, each of its 128 steps' training losses.
    let curves = learner.eval(&format!("return document.querySelectorAll('{WARM_UP} figure.sweep-chart path.curve').length")).await?;
    assert_eq!(curves, 3, "the warm-up sweep's curves");
    let runs = learner_runs(&server)?;
    assert_eq!(runs.len(), 3, "one run a variant: {runs:?}");
    assert!(runs.iter().all(|r| r.learner.is_some() && r.state() == RunState::Completed), "{runs:?}");
    assert!(learner.console_errors().await?.is_empty());
    learner.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_pasted_into_a_refused_page_connects_it_and_no_token_shows() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url("/#/single-gpu")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "refused").await?;
    // A link to the chapter with the token (as Scalebook prints it, with the chapter's route),
    // pasted into the address bar of the same tab: the path is the page's, so only the
    // fragment changes (no reload).
    browser.eval(&format!("window.sameDocument = true; location.hash = '#/single-gpu&token={}'; return true", server.token)).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    let kept = browser.eval("return window.sameDocument === true").await?;
    assert_eq!(kept, true, "the page reloaded");
    browser.wait_text("article.chapter", |t| !t.is_empty()).await?;
    let page = browser.eval("return document.body.innerText + ' ' + location.href").await?;
    let page = page.as_str().unwrap_or_default();
    assert!(!page.contains(server.token.as_str()) && !page.contains("token="), "the token shows: {page}");
    assert!(!page.contains("There is no chapter") && !page.contains("Cannot load the"), "{page}");
    browser.wait_attr("article.chapter", "data-chapter", |c| c == "single-gpu").await?;
    browser.close().await
}
