//! A run stopped before its last step goes on from its checkpoint with the run's Resume button:
//! the same run, back in the queue, trained to its end from the epoch it had reached.

use std::time::{Duration, Instant};

use anyhow::ensure;
use scalebook_e2e::notebook::launch_tiny_run;
use scalebook_e2e::{Browser, Server, with_tiny_data};
use scalebook_shared::rundir;

const STATE: &str = ".run-block .run-state";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_resumes_from_its_checkpoint_to_the_end() -> anyhow::Result<()> {
    let workdir = with_tiny_data("scalebook-e2e-resume")?;
    let server = Server::start_in(workdir.path(), &[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("single-gpu")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    // 100 epochs of 4 steps, a checkpoint after each.
    let run = launch_tiny_run(&browser, 400).await?;
    let run_dir = workdir.path().join("runs").join(&run);
    let checkpoint = rundir::RunDir::new(&run_dir).checkpoint_position();
    let deadline = Instant::now() + Duration::from_secs(240);
    while !checkpoint.is_file() {
        ensure!(Instant::now() < deadline, "no checkpoint in {}", run_dir.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Stopped: a cancelled run offers to go on, a running one does not.
    ensure!(browser.attr(".run-block .run-state button.resume", "class").await.is_none(), "Resume offered while it runs");
    browser.click(".run-block .run-state button.cancel").await?;
    browser.wait_attr(STATE, "data-state", |s| s == "cancelled").await?;
    browser.click(".run-block .run-state button.resume").await?;
    browser.wait_attr_for(STATE, "data-state", |s| s == "completed", Duration::from_secs(600)).await?;

    let log = std::fs::read_to_string(run_dir.join(rundir::OUT_LOG))?;
    ensure!(log.contains("Resuming after epoch"), "{log}");
    // Once completed, nothing to resume.
    ensure!(browser.attr(".run-block .run-state button.resume", "class").await.is_none(), "Resume offered once completed");
    browser.close().await
}
