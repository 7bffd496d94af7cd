//! The static edition (`scalebook export DIR`), served by a plain static file server (Python's
//! `http.server`) under the prefix `/scalebook/`, with no Scalebook process anywhere: the home
//! page says what it is and how to run Scalebook, every chapter renders with no console error
//! and no file missing, the blocks the browser computes respond to their controls, the recorded
//! timelines open, and a block that trains says how to run it instead of failing. The page
//! never asks for the API's WebSocket.

use std::path::Path;
use std::process::Command;

use scalebook_e2e::{Browser, StaticSite, workspace_binary, workspace_root};

/// Where the edition is served: a directory of the file server's root, as on a project page.
const PREFIX: &str = "scalebook";

/// Writes the edition into `root/PREFIX` with the workspace's page, configs and sources.
fn export(root: &Path) -> anyhow::Result<()> {
    let out = Command::new(workspace_binary("scalebook")?).arg("export").arg(root.join(PREFIX)).current_dir(workspace_root()).output()?;
    anyhow::ensure!(out.status.success(), "scalebook export failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// How many blocks of `kind` chapter `slug` has (`code`, `timeline recorded=`).
fn blocks(slug: &str, kind: &str) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(workspace_root().join(format!("static/chapters/{slug}.md")))?;
    Ok(text.lines().filter(|l| l.trim_start().starts_with(&format!("```scalebook {kind}"))).count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_static_edition_works_from_a_plain_file_server_under_a_prefix() -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    export(root.path())?;
    let site = StaticSite::serve(root.path())?;
    let browser = Browser::start().await?;
    let at = |rest: &str| site.url(&format!("/{PREFIX}/{rest}"));

    // The home page says it is the static edition, with the commands to run Scalebook.
    browser.client.goto(&at("")).await?;
    browser.wait_text(".static-edition", |t| t.contains("static edition") && t.contains("./scalebook.sh run")).await?;
    browser.wait_attr("article.chapter", "data-chapter", |c| c == "model-and-data").await?;
    assert!(browser.attr(".connection", "data-state").await.is_none(), "the static edition shows no connection to a server");

    let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(workspace_root().join("static/chapters/index.json"))?)?;
    let slugs: Vec<String> =
        index["chapters"].as_array().into_iter().flatten().filter_map(|c| Some(c["slug"].as_str()?.to_owned())).collect();
    assert!(slugs.len() >= 15, "{slugs:?}");
    let (mut listings, mut recordings) = (0, 0);
    for slug in &slugs {
        browser.client.goto(&at(&format!("#/{slug}"))).await?;
        browser.wait_attr("article.chapter", "data-chapter", |c| c == slug).await?;
        let failed = |what: &str, e: anyhow::Error| anyhow::anyhow!("{slug}: {what}: {e}");
        // Every block's part of the module came.
        let arrived = "document.querySelectorAll('article.chapter .block-loading').length === 0";
        browser.wait_eval(arrived).await.map_err(|e| failed("a block's part of the module never came", e))?;
        // Every code block shows its listing, from the file the export wrote for it.
        let code = blocks(slug, "code")?;
        let filled = format!(
            "Array.from(document.querySelectorAll('article.chapter .block.code')).filter(b => (b.querySelector('pre')?.textContent ?? '').trim().length > 0).length === {code}"
        );
        browser.wait_eval(&filled).await.map_err(|e| failed(&format!("its {code} code blocks did not all show source"), e))?;
        // Every recorded timeline opens, drawn.
        let recorded = blocks(slug, "timeline recorded=")?;
        let ready = format!(
            "Array.from(document.querySelectorAll('article.chapter .timeline.recorded')).filter(t => t.dataset.state === 'ready' && t.querySelector('svg')).length === {recorded}"
        );
        browser.wait_eval(&ready).await.map_err(|e| failed(&format!("its {recorded} recorded timelines did not all open"), e))?;
        let broken = browser
            .eval("return Array.from(document.querySelectorAll('.block.broken, .block p.error[role=alert], .notice')).map(b => b.textContent)")
            .await?;
        assert_eq!(broken, serde_json::json!([]), "{slug}: blocks that cannot be shown");
        let errors = browser.console_errors().await?;
        assert!(errors.is_empty(), "{slug}: console errors {errors:?}");
        (listings, recordings) = (listings + code, recordings + recorded);
    }
    assert!(listings >= 15 && recordings >= 5, "{listings} code blocks, {recordings} recorded timelines");

    // The rank grid: a layout of 16 ranks (tp 2, cp 2, dp 4) has 8 tp groups; with dp 2, 4.
    browser.client.goto(&at("#/rank-groups")).await?;
    let tp_groups = ".rank-grid-block .group-table tr[data-token='tp']";
    browser.wait_attr(tp_groups, "data-count", |c| c == "8").await?;
    browser.type_into(".rank-grid-block input[data-field=dp]", "2").await?;
    browser.wait_attr(tp_groups, "data-count", |c| c == "4").await?;

    // The estimate: a step of mp on 4 GPUs, then on 8 (tp 2), is estimated again.
    browser.client.goto(&at("#/tensor-parallel")).await?;
    let rate = ".estimate-block .samples-per-sec";
    let before = browser.wait_attr(rate, "data-value", |v| v.parse::<f64>().is_ok_and(|x| x > 0.0)).await?;
    browser.type_into(".estimate-block input[data-field=tp]", "2").await?;
    browser.wait_attr(rate, "data-value", |v| v != before && v.parse::<f64>().is_ok_and(|x| x > 0.0)).await?;
    // The run block, which trains, says what it does and how to run Scalebook.
    let run = ".needs-server[data-kind=run]";
    browser.wait_text(run, |t| t.contains("runs training") && t.contains("cpu_mp") && t.contains("./scalebook.sh run")).await?;

    // The pipeline: 4 stages and 8 micro-batches, then 4.
    browser.client.goto(&at("#/beyond")).await?;
    let summary = ".pipeline-block .pipeline-summary";
    browser.wait_attr(summary, "data-micro-batches", |m| m == "8").await?;
    let eight = browser.wait_text(summary, |t| !t.is_empty()).await?;
    browser.type_into(".pipeline-block input.micro-batches", "4").await?;
    browser.wait_attr(summary, "data-micro-batches", |m| m == "4").await?;
    browser.wait_text(summary, |t| t != eight).await?;
    let errors = browser.console_errors().await?;
    assert!(errors.is_empty(), "console errors {errors:?}");
    browser.close().await?;

    // Everything the page asked for was there, and it never asked for the server's socket.
    let requests = site.requests();
    assert!(requests.iter().any(|r| r.contains(&format!("/{PREFIX}/api/code/"))), "{requests:#?}");
    let answered = |r: &&String| r.split('"').nth(2).is_some_and(|status| matches!(status.trim().get(..3), Some("200" | "304")));
    let missing: Vec<_> = requests.iter().filter(|r| !answered(r)).collect();
    assert!(missing.is_empty(), "requests the edition could not answer: {missing:#?}");
    assert!(!requests.iter().any(|r| r.contains("api/ws")), "the page asked for a WebSocket: {requests:#?}");
    Ok(())
}
