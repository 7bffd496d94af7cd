//! The run list of a class's server, in the page: the instructor's runs whole and the
//! learners' runs a page at a time, newest first, with a button that brings the next page of
//! older ones until none is left.

use scalebook_e2e::{Browser, PrefixProxy, Server, with_tiny_data};
use scalebook_shared::protocol::Learner;
use scalebook_shared::protocol::run_list::RUN_PAGE;

const TITLE: &str = "details.run-list summary";
const OLDER: &str = "details.run-list .older-runs button";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classs_runs_are_listed_a_page_at_a_time_and_older_pages_come_on_request() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-run-list")?;
    // 133 runs: the instructor's first and last, and 131 learners' between them.
    let someone = Learner::parse("0123456789ab").map_err(anyhow::Error::msg)?;
    let ids = scalebook_harness::write_class_runs(&workdir.path().join("runs"), &someone, 130)?;
    let server = Server::start_in(workdir.path(), &[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&proxy.url(&format!("/?token={}#/single-gpu", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    let total = ids.len();
    browser.wait_text(TITLE, |t| t == format!("All runs ({} of {total})", 2 + RUN_PAGE)).await?;
    browser.click(TITLE).await?;
    let rows = "details.run-list tbody tr";
    let count = |n: usize| format!("document.querySelectorAll('{rows}').length === {n}");
    browser.wait_eval(&count(2 + RUN_PAGE)).await?;
    // The newest learner run is there, the oldest only after two more pages.
    let (newest, oldest) = (&ids[total - 2], &ids[1]);
    browser.find(&format!("{rows}[data-run='{newest}'][data-whose=learner]")).await?;
    assert!(browser.attr(&format!("{rows}[data-run='{oldest}']"), "data-run").await.is_none(), "the oldest came before it was asked for");
    browser.wait_text(OLDER, |t| t == format!("Show {RUN_PAGE} older runs")).await?;
    browser.click(OLDER).await?;
    browser.wait_text(TITLE, |t| t == format!("All runs ({} of {total})", 2 + 2 * RUN_PAGE)).await?;
    browser.wait_text(OLDER, |t| t == format!("Show {} older runs", total - 2 - 2 * RUN_PAGE)).await?;
    browser.click(OLDER).await?;
    browser.wait_text(TITLE, |t| t == format!("All runs ({total})")).await?;
    browser.wait_eval(&count(total)).await?;
    browser.wait_eval(&format!("document.querySelector('{OLDER}') === null")).await?;
    browser.find(&format!("{rows}[data-run='{oldest}']")).await?;
    // Every page in the order the page lists runs: its own (the instructor's) first, then the
    // learners' newest first, whatever order the pages came in.
    let order = browser.eval(&format!("return [...document.querySelectorAll('{rows}')].map(r => r.dataset.run)")).await?;
    let mut expected: Vec<String> = vec![ids[total - 1].to_string(), ids[0].to_string()];
    expected.extend(ids[1..total - 1].iter().rev().map(|id| id.to_string()));
    assert_eq!(order, serde_json::json!(expected));
    assert!(browser.console_errors().await?.is_empty());
    browser.close().await
}
