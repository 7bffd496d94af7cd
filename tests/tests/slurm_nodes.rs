//! A run across two nodes of a real Slurm cluster, launched from the page (issue #29): while
//! the job waits, the run says why and where it stands in the queue; once it runs, it shows
//! where its ranks ran under where the layout places them; once it ends, how long it ran.

use std::time::Duration;

use anyhow::ensure;
use scalebook_e2e::{Browser, Server, with_tiny_data};
use scalebook_harness::slurm::SlurmCluster;

const BLOCK: &str = ".run-block";
/// A tiny run's whole life on a busy two-core machine, queue included.
const RUN: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_node_job_says_where_it_waits_and_where_its_ranks_ran() -> anyhow::Result<()> {
    let cluster = SlurmCluster::with_nodes("e2e-nodes", 2);
    // Nothing starts until the test says: the job waits, with Slurm's reason.
    let down = cluster.client("scontrol", &["update", "PartitionName=debug", "State=DOWN"]);
    ensure!(down.status.success(), "{down:?}");
    let workdir = with_tiny_data("scalebook-e2e-slurm")?;
    let args = cluster.serve_args();
    let server = Server::start_in(workdir.path(), &args.iter().map(String::as_str).collect::<Vec<_>>())?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("data-parallel")).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // cpu_tiny on four data-parallel ranks, two on each of the test cluster's nodes.
    browser.select(".config-editor select", "cpu_tiny").await?;
    browser.wait_value(".config-editor input[data-field=embed_dim]", |v| v == "48").await?;
    browser.type_into(".config-editor input[data-field=num_iters]", "16").await?;
    browser.type_into(&format!("{BLOCK} input.dp"), "4").await?;
    browser.select(&format!("{BLOCK} select.run-target"), "testbox").await?;
    browser.type_into(&format!("{BLOCK} input[data-field='slurm.nodes']"), "2").await?;
    browser.click(&format!("{BLOCK} button.preview")).await?;
    let script = browser.wait_text(&format!("{BLOCK} .slurm-script pre"), |t| t.contains("#SBATCH --nodes=2")).await?;
    ensure!(script.contains("#SBATCH --ntasks-per-node=2") && script.contains("--config cpu_tiny"), "{script}");
    browser.click(&format!("{BLOCK} button.launch")).await?;
    browser.wait_attr(&format!("{BLOCK} .current-run"), "data-run", |r| !r.is_empty()).await?;

    // While it waits: why, and its place among the partition's pending jobs.
    browser.wait_text(&format!("{BLOCK} .run-state .reason"), |t| t.contains("pending in Slurm: PartitionDown")).await?;
    browser.wait_text(&format!("{BLOCK} .run-slurm"), |t| t.contains("place 1 of 1 pending jobs in its partition")).await?;

    // Once it runs: its ranks on both nodes, where the layout places them.
    let up = cluster.client("scontrol", &["update", "PartitionName=debug", "State=UP"]);
    ensure!(up.status.success(), "{up:?}");
    browser.wait_attr_for(&format!("{BLOCK} .run-placement"), "data-as-predicted", |s| s == "true", RUN).await?;
    ensure!(browser.attr(&format!("{BLOCK} .run-placement"), "data-nodes").await.as_deref() == Some("2"));
    let ranks = |row: &str| {
        format!(
            "return [...document.querySelectorAll('{BLOCK} .placement-picture g.{row} rect[data-rank]')].map(r => r.dataset.rank + ':' + r.dataset.moved).join(' ')"
        )
    };
    for row in ["predicted", "actual"] {
        let drawn = browser.eval(&ranks(row)).await?;
        ensure!(drawn == "0:false 1:false 2:false 3:false", "{row}: {drawn}");
    }
    let text = browser.wait_text(&format!("{BLOCK} .run-placement p"), |t| t.contains("node2: ranks 2-3")).await?;
    ensure!(text.contains("node1: ranks 0-1") && text.contains("as the layout places them"), "{text}");

    // Once it ends: how long it ran, on which nodes.
    let ended = browser.wait_attr_for(&format!("{BLOCK} .run-state"), "data-state", |s| !matches!(s, "queued" | "running"), RUN).await?;
    let run = browser.attr(&format!("{BLOCK} .current-run"), "data-run").await.unwrap_or_default();
    let log = std::fs::read_to_string(workdir.path().join("runs").join(&run).join("job.log")).unwrap_or_default();
    let state = browser.wait_text(&format!("{BLOCK} .run-state"), |_| true).await?;
    ensure!(ended == "completed", "{state}\n{log}\n{}", cluster.logs());
    browser.wait_text(&format!("{BLOCK} .run-slurm"), |t| t.contains("on node[1-2]") && t.contains("held 4 CPUs")).await?;
    browser.close().await
}
