//! A Slurm launch from the page: its settings are checked as typed, and it can only be
//! submitted once the batch script it will run has been shown (again after any change).

use scalebook_e2e::{Browser, Server};

const BLOCK: &str = ".run-block";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_script_is_shown_before_submitting() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("data-parallel")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    // The chapter's working config is the editor's: bs64_opt on 4 data-parallel ranks.
    browser.wait_text(&format!("{BLOCK} select.run-config option:checked"), |t| t == "bs64_opt").await?;
    browser.select(&format!("{BLOCK} select.run-target"), "perlmutter").await?;

    // A bad time limit is refused beside its field, before the server is asked anything.
    browser.type_into(&format!("{BLOCK} input[data-field='slurm.time']"), "soon").await?;
    browser.wait_text(&format!("{BLOCK} .error[data-field='slurm.time']"), |t| t.contains("not a Slurm time")).await?;
    browser.wait_attr(&format!("{BLOCK} button.preview"), "disabled", |_| true).await?;
    browser.type_into(&format!("{BLOCK} input[data-field='slurm.time']"), "00:30:00").await?;

    // Submitting waits for the script; the script shows what will run.
    browser.wait_attr(&format!("{BLOCK} button.launch"), "disabled", |_| true).await?;
    browser.click(&format!("{BLOCK} button.preview")).await?;
    let script = browser.wait_text(&format!("{BLOCK} .slurm-script pre"), |t| t.contains("#SBATCH")).await?;
    for line in ["#SBATCH --time=00:30:00", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=4", "--config bs64_opt"] {
        assert!(script.contains(line), "missing {line:?} in\n{script}");
    }
    let submit_enabled = browser.eval("return !document.querySelector('.run-block button.launch').disabled").await?;
    assert_eq!(submit_enabled, serde_json::Value::Bool(true));

    // A change after the preview asks for the script again before submitting.
    browser.type_into(&format!("{BLOCK} input[data-field='slurm.time']"), "00:45:00").await?;
    browser.wait_text(&format!("{BLOCK} .slurm-script summary"), |t| t.contains("show it again")).await?;
    browser.wait_attr(&format!("{BLOCK} button.launch"), "disabled", |_| true).await?;

    browser.close().await
}
