//! The README's JupyterHub recipes, as written, under a real Jupyter server with
//! jupyter-server-proxy started from a directory that is not the checkout, running an install
//! made by `scalebook.sh install`: for each entry (the private Unix socket; the port with the
//! token from the environment) the page renders under the proxy path, the WebSocket connects,
//! and a run launched from the page reaches the chart.

use std::path::Path;
use std::time::Duration;

use scalebook_e2e::install::install;
use scalebook_e2e::jupyter::{Jupyter, readme_recipe};
use scalebook_e2e::notebook::{STEP_LOSS, launch_tiny_run, series_css};
use scalebook_e2e::{Browser, WAIT, workspace_root};
use scalebook_shared::rundir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_readme_recipes_serve_the_notebook_through_jupyter_server_proxy() -> anyhow::Result<()> {
    let root = workspace_root().canonicalize()?;
    let recipe = readme_recipe(&std::fs::read_to_string(root.join("README.md"))?)?;
    let placeholder = "SCALEBOOK = \"/opt/scalebook\"";
    assert!(recipe.contains(placeholder), "the README's recipe names the install as {placeholder}");
    // Kept between test runs (installing over it again copies only what changed).
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jupyter-install");
    install(&root, &prefix)?;
    // The install, and (for the test only) where the port entry's token can be read.
    let config = recipe.replace(placeholder, &format!("SCALEBOOK = {:?}", prefix.display().to_string()))
        + "\nopen(\"port-token\", \"w\").write(TOKEN)\n";
    let jupyter = Jupyter::start(&config)?;
    assert!(!jupyter.home.path().starts_with(&root), "Jupyter must run outside the checkout");
    let runs = jupyter.home.path().join("scalebook/runs");
    let token = jupyter.read("port-token")?;

    let browser = Browser::start().await?;
    for (entry, query) in [("scalebook", String::new()), ("scalebook-port", format!("?token={token}"))] {
        browser.client.goto(&format!("{}{entry}/{query}#/single-gpu", jupyter.url)).await?;
        browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
        let path = browser.eval("return location.pathname").await?;
        assert_eq!(path.as_str(), Some(format!("/user/learner/{entry}/").as_str()), "{entry}");
        browser.wait_attr("article.chapter", "data-chapter", |c| c == "single-gpu").await?;

        // The run's points reach the chart through the proxy: every one the trainer wrote.
        let run = launch_tiny_run(&browser, 60).await?;
        browser.wait_attr_for(".run-block .run-state", "data-state", |s| s == "completed", Duration::from_secs(600)).await?;
        let metrics = std::fs::read_to_string(runs.join(&run).join(rundir::METRICS))?;
        let written = metrics.lines().filter(|l| l.contains(&format!("\"tag\":\"{STEP_LOSS}\""))).count();
        assert_eq!(written, 60, "{entry}: one training loss a step");
        browser.wait_attr_for(&series_css(STEP_LOSS, &run), "data-points", |p| p == written.to_string(), WAIT).await?;
    }
    browser.close().await
}
