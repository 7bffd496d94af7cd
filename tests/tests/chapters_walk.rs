//! Every chapter of the table of contents, under a proxy prefix as JupyterHub serves the app:
//! each one renders with no broken block and no console error, every block whose part of the
//! module is fetched on demand arrives, and each of its code blocks shows this project's source
//! as the file has it now.

use scalebook_e2e::{Browser, PrefixProxy, Server, workspace_root};

/// How many code blocks the chapter's Markdown has.
fn code_blocks(slug: &str) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(workspace_root().join(format!("static/chapters/{slug}.md")))?;
    Ok(text.lines().filter(|l| l.trim_start().starts_with("```scalebook code")).count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chapter_renders_under_a_proxy_prefix_without_errors() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(workspace_root().join("static/chapters/index.json"))?)?;
    let slugs: Vec<String> =
        index["chapters"].as_array().into_iter().flatten().filter_map(|c| Some(c["slug"].as_str()?.to_owned())).collect();
    assert!(slugs.len() >= 15, "{slugs:?}");

    browser.client.goto(&proxy.url(&format!("/?token={}", server.token))).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    let mut seen = Vec::new();
    for slug in &slugs {
        browser.client.goto(&proxy.url(&format!("/#/{slug}"))).await?;
        browser.wait_attr("article.chapter", "data-chapter", |c| c == slug).await?;
        let expected = code_blocks(slug)?;
        // Every code block has its source (a failed fetch shows an error instead of a `pre`).
        let filled = format!(
            "Array.from(document.querySelectorAll('article.chapter .block.code')).filter(b => (b.querySelector('pre')?.textContent ?? '').trim().length > 0).length === {expected}"
        );
        browser.wait_eval(&filled).await.map_err(|e| anyhow::anyhow!("{slug}: its {expected} code blocks did not all show source: {e}"))?;
        // The blocks in parts of the module fetched on demand (scalebook.sh's split build) have
        // all come and replaced their "Loading" line.
        let arrived = "document.querySelectorAll('article.chapter .block-loading').length === 0";
        browser.wait_eval(arrived).await.map_err(|e| anyhow::anyhow!("{slug}: a block's part of the module never came: {e}"))?;
        let broken = browser
            .eval("return Array.from(document.querySelectorAll('.block.broken, .block p.error[role=alert]')).map(b => b.textContent)")
            .await?;
        assert_eq!(broken, serde_json::json!([]), "{slug}: blocks that cannot be shown");
        let errors = browser.console_errors().await?;
        assert!(errors.is_empty(), "{slug}: console errors {errors:?}");
        seen.push(expected);
    }
    assert!(seen.iter().sum::<usize>() >= 15, "code blocks per chapter: {seen:?}");
    browser.close().await
}
