//! Presenter mode between two real pages under a proxy prefix: the instructor's page presents,
//! a learner's page opened later through the viewer link lands where the instructor is and
//! follows (chapter, open answer, runs charted, smoothing), breaks away when its learner picks
//! another chapter (its charts its own again), and catches up again; the instructor sees how many follow. A presentation
//! outlives the presenter's reload, a follower is taken through a chapter's opening text
//! paragraph by paragraph, not only from block to block, and a learner's own run is theirs
//! again, on their charts and in their run block, when the presentation ends.

use scalebook_e2e::notebook::{STEP_LOSS, launch_tiny_run, series_css};
use scalebook_e2e::{Browser, PrefixProxy, Server, with_tiny_data};

/// The link handed to the room (chosen, so the test need not derive it).
const VIEWER_TOKEN: &str = "classroom-viewer-link-0123456789";

/// Records, in the learner's page, when the chapter `single-gpu` is on its screen.
const ARRIVAL: &str = "window.arrived = null; new MutationObserver(() => { \
    if (!window.arrived && document.querySelector(\"article.chapter[data-chapter='single-gpu'] .block\")) window.arrived = Date.now(); \
}).observe(document.body, { subtree: true, childList: true, attributes: true });";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_follows_the_presenting_instructor_and_can_break_away() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-classroom")?;
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let instructor = Browser::start().await?;
    let viewer = Browser::start().await?;

    instructor.client.goto(&proxy.url(&format!("/?token={}#/model-and-data", server.token))).await?;
    instructor.wait_attr(".connection", "data-state", |s| s == "open").await?;
    instructor.click(".classroom button.present").await?;
    instructor.wait_attr(".classroom button.present", "aria-pressed", |p| p == "true").await?;
    // The instructor opens an answer further down (once the blocks above it are here, or it
    // would still be in view): the page scrolls to it.
    instructor.wait_attr("article.chapter", "aria-busy", |b| b == "false").await?;
    instructor.click(".block.quiz summary").await?;
    instructor.wait_eval("document.querySelector('.block.quiz details').open && window.scrollY > 0").await?;

    // A learner joins late, on another chapter: the page lands where the instructor is, with
    // the same answer open and the same block in view, and follows.
    viewer.client.goto(&proxy.url(&format!("/?token={VIEWER_TOKEN}#/rank-groups"))).await?;
    viewer.wait_attr("article.chapter", "data-chapter", |c| c == "model-and-data").await?;
    viewer.wait_eval("document.querySelector('.block.quiz details').open && window.scrollY > 0").await?;
    viewer.wait_attr(".classroom button.follow", "aria-pressed", |p| p == "true").await?;
    assert!(viewer.attr(".classroom button.present", "aria-pressed").await.is_none(), "a viewer cannot present");
    instructor.wait_text(".classroom .audience", |t| t.starts_with("1 following")).await?;

    // The instructor moves on: the learner's page follows. The time from the click to the
    // chapter on the learner's screen is printed (both pages read the same clock), not
    // asserted: a test on a busy machine checks what happens, the benchmark how fast.
    viewer.eval(ARRIVAL).await?;
    let clicked =
        instructor.eval("const t = Date.now(); document.querySelector(\"nav.toc a[href='#/single-gpu']\").click(); return t;").await?;
    viewer.wait_eval("window.arrived").await?;
    let arrived = viewer.eval("return window.arrived").await?;
    let latency = arrived.as_f64().unwrap_or(f64::MAX) - clicked.as_f64().unwrap_or(0.0);
    println!("the learner's page followed in {latency} ms");
    // The instructor launches a run: the learner's page charts it.
    let run = launch_tiny_run(&instructor, 20).await?;
    viewer.wait_attr(&series_css(STEP_LOSS, &run), "data-points", |p| p.parse().is_ok_and(|n: u32| n > 0)).await?;
    // And its run block shows that run (its state and log), as the instructor's does.
    viewer.wait_attr(".current-run", "data-run", |r| r == run).await?;
    // The charts' smoothing follows too.
    instructor.paste_into(".charts input.smoothing", "0.9").await?;
    viewer.wait_value(".charts input.smoothing", |v| v == "0.9").await?;

    // The learner picks another chapter: the page breaks away, and says how to come back.
    viewer.click("nav.toc a[href='#/rank-groups']").await?;
    viewer.wait_attr(".classroom button.follow", "aria-pressed", |p| p == "false").await?;
    instructor.wait_text(".classroom .audience", |t| t.starts_with("0 following")).await?;
    // Broken away, the learner's charts are their own again: the instructor's run was shown
    // while following, never put in the learner's own chart list.
    viewer.click("nav.toc a[href='#/single-gpu']").await?;
    viewer.wait_attr("article.chapter", "data-chapter", |c| c == "single-gpu").await?;
    // (The charts are drawn, the tutorial's baseline with whatever runs they show.)
    viewer.wait_text(".charts", |t| t.contains("tutorial baseline")).await?;
    let shown = viewer.eval(&format!("return document.querySelector(\"{}\") !== null", series_css(STEP_LOSS, &run))).await?;
    assert_eq!(shown, false, "the presenter's run stayed on the learner's own charts");
    instructor.click("nav.toc a[href='#/data-loading']").await?;
    viewer.click(".classroom button.catch-up").await?;
    viewer.wait_attr("article.chapter", "data-chapter", |c| c == "data-loading").await?;
    viewer.wait_attr(".classroom button.follow", "aria-pressed", |p| p == "true").await?;
    instructor.wait_text(".classroom .audience", |t| t.starts_with("1 following")).await?;

    // Presenting stops: the learner's header shows nothing of the classroom any more.
    instructor.click(".classroom button.present").await?;
    viewer.wait_eval("document.querySelector('.classroom button') === null").await?;

    viewer.close().await?;
    instructor.close().await
}

/// Whether the page draws a step-loss curve of `run`.
fn charted(run: &str) -> String {
    format!("return document.querySelector(\"{}\") !== null", series_css(STEP_LOSS, run))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learners_own_run_is_theirs_again_after_a_presentation() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-classroom-own")?;
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN, "--viewer-runs", "1"])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let learner = Browser::start().await?;
    learner.client.goto(&proxy.url(&format!("/#/single-gpu&token={VIEWER_TOKEN}"))).await?;
    learner.wait_attr(".connection", "data-state", |s| s == "open").await?;
    let own = launch_tiny_run(&learner, 16).await?;
    learner.wait_attr(&series_css(STEP_LOSS, &own), "data-points", |p| p.parse().is_ok_and(|n: u32| n > 0)).await?;

    // The instructor presents the same chapter and runs there: the learner's page, which
    // follows by default, charts the presenter's run and not its own.
    let instructor = Browser::start().await?;
    instructor.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    instructor.wait_attr(".connection", "data-state", |s| s == "open").await?;
    instructor.click(".classroom button.present").await?;
    learner.wait_attr(".classroom button.follow", "aria-pressed", |p| p == "true").await?;
    let presented = launch_tiny_run(&instructor, 16).await?;
    learner.wait_attr(&series_css(STEP_LOSS, &presented), "data-points", |p| p.parse().is_ok_and(|n: u32| n > 0)).await?;
    assert_eq!(learner.eval(&charted(&own)).await?, false, "a following page charts the presenter's runs only");
    // Its run block keeps the run the learner opened there (it follows the presenter's runs
    // only where the learner opened none).
    assert_eq!(learner.attr(".current-run", "data-run").await.as_deref(), Some(own.as_str()));

    // The presentation ends: the learner's charts and run block are their own again.
    instructor.click(".classroom button.present").await?;
    learner.wait_attr(&series_css(STEP_LOSS, &own), "data-points", |p| p.parse().is_ok_and(|n: u32| n > 0)).await?;
    learner.wait_attr(".current-run", "data-run", |r| r == own).await?;
    assert_eq!(learner.eval(&charted(&presented)).await?, false, "the presenter's run stayed on the learner's charts");
    assert!(learner.console_errors().await?.is_empty());

    learner.close().await?;
    instructor.close().await
}

/// The page of chapter `slug` with `token` in the fragment, as Scalebook prints its links.
fn page(server: &Server, token: &str, slug: &str) -> String {
    format!("http://{}/#/{slug}&token={token}", server.addr)
}

/// An instructor presenting `slug`, and a learner's page following it there.
async fn presenting_and_following(server: &Server, slug: &str) -> anyhow::Result<(Browser, Browser)> {
    let instructor = Browser::start().await?;
    let viewer = Browser::start().await?;
    instructor.client.goto(&page(server, &server.token, slug)).await?;
    instructor.wait_attr(".connection", "data-state", |s| s == "open").await?;
    instructor.click(".classroom button.present").await?;
    instructor.wait_attr(".classroom button.present", "aria-pressed", |p| p == "true").await?;
    viewer.client.goto(&page(server, VIEWER_TOKEN, "rank-groups")).await?;
    viewer.wait_attr("article.chapter", "data-chapter", |c| c == slug).await?;
    viewer.wait_attr(".classroom button.follow", "aria-pressed", |p| p == "true").await?;
    Ok((instructor, viewer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presentation_goes_on_after_the_presenter_reloads() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-classroom-reload")?;
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN])?;
    let (instructor, viewer) = presenting_and_following(&server, "model-and-data").await?;
    // Neither page's address shows its token any more.
    for browser in [&instructor, &viewer] {
        assert!(!browser.client.current_url().await?.as_str().contains("token"), "a token left in the address bar");
    }

    // The reloaded page presents again (it does not turn into a follower of its own stale
    // presentation), and the room goes where it goes next.
    instructor.client.refresh().await?;
    instructor.wait_attr(".classroom button.present", "aria-pressed", |p| p == "true").await?;
    assert!(instructor.attr(".classroom button.follow", "aria-pressed").await.is_none(), "the presenter was offered to follow");
    instructor.click("nav.toc a[href='#/single-gpu']").await?;
    viewer.wait_attr("article.chapter", "data-chapter", |c| c == "single-gpu").await?;
    viewer.wait_attr(".classroom button.follow", "aria-pressed", |p| p == "true").await?;
    instructor.wait_text(".classroom .audience", |t| t.starts_with("1 following")).await?;

    viewer.close().await?;
    instructor.close().await
}

/// The top of the window that a reader sees: the bottom of the sticky header.
const HEADER_BOTTOM: &str = "document.querySelector('header.top').getBoundingClientRect().bottom";

/// The opening paragraph of the chapter on screen that starts with `start`.
fn paragraph(start: &str) -> String {
    format!("Array.from(document.querySelectorAll('article.chapter .prose > *')).find(e => e.textContent.startsWith('{start}'))")
}

/// Whether `element` sits at the top of the window, just below the header.
fn at_the_top(element: &str) -> String {
    format!("Math.abs({element}.getBoundingClientRect().top - {HEADER_BOTTOM}) < 2")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_follows_the_instructor_through_a_chapters_opening_text() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-classroom-text")?;
    let server = Server::start_in(workdir.path(), &["--viewer-token", VIEWER_TOKEN])?;
    let (instructor, viewer) = presenting_and_following(&server, "profiling").await?;
    // A paragraph of the profiling chapter long before its first block.
    let target = paragraph("The profiles are recorded");
    viewer.wait_eval(&format!("{target} && !({})", at_the_top(&target))).await?;

    // The instructor reads on to it (no block is in view to follow by); the header keeps the
    // class controls on screen.
    let scroll = format!("const p = {target}; window.scrollTo(0, window.scrollY + p.getBoundingClientRect().top - {HEADER_BOTTOM})");
    instructor.eval(&scroll).await?;
    instructor.wait_eval(&at_the_top(&target)).await?;
    instructor.wait_eval("document.querySelector('.classroom button.present').getBoundingClientRect().top >= 0").await?;
    // The learner's window shows that paragraph at its top too, below its own header.
    viewer.wait_eval(&at_the_top(&target)).await?;
    viewer.wait_eval("document.querySelector('.classroom button.follow').getBoundingClientRect().top >= 0").await?;

    viewer.close().await?;
    instructor.close().await
}
