//! The notebook loads at `/` from the built wasm, renders the first chapter, keeps the token
//! after the address is cleaned, and moves between chapters by link, key and deep link.

use scalebook_e2e::{ARROW_RIGHT, Browser, PrefixProxy, Server};

const FIRST_RENDER: &str = "return performance.getEntriesByName('scalebook-first-chapter').map(e => e.startTime)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_loads_renders_chapters_and_navigates() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.url).await?;

    // The table of contents comes from chapters/index.json; the first chapter is shown.
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scalebook_e2e::workspace_root().join("static/chapters/index.json"))?)?;
    let chapters = index["chapters"].as_array().unwrap();
    browser.wait_text("nav.toc", |t| chapters.iter().all(|c| t.contains(c["title"].as_str().unwrap()))).await?;
    let first = chapters[0]["slug"].as_str().unwrap();
    browser.wait_attr("article.chapter", "data-chapter", |c| c == first).await?;
    browser.wait_text("article.chapter h1", |t| t == chapters[0]["title"].as_str().unwrap()).await?;

    // The token was taken from the address (which no longer shows it) and is used: the
    // WebSocket, which needs it, is open.
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    assert!(!browser.client.current_url().await?.as_str().contains("token="));

    // How long until the first chapter's text was on the page.
    let marks = browser.eval(FIRST_RENDER).await?;
    let first_render_ms = marks[0].as_f64().expect("the first-render mark is set");
    println!("time to first render: {first_render_ms:.0} ms");
    // Every file the page loaded was there (no 404 in the console), the icon too; what
    // crossed the wire, for BENCHMARKS.md.
    let failed =
        browser.eval("return performance.getEntriesByType('resource').filter(e => e.responseStatus >= 400).map(e => e.name)").await?;
    assert_eq!(failed, serde_json::json!([]), "files the page could not load");
    let icon = browser
        .client
        .execute_async("fetch(document.querySelector('link[rel=icon]').href).then(r => arguments[0](r.status))", vec![])
        .await?;
    assert_eq!(icon, serde_json::json!(200), "the favicon");
    let wire = browser
        .eval("return performance.getEntriesByType('resource').map(e => [e.name.split('/').pop(), e.transferSize, e.decodedBodySize])")
        .await?;
    println!("bytes on the wire (name, transferred, decoded): {wire}");

    // The right arrow goes to the next chapter, and its URL says so.
    let second = chapters[1]["slug"].as_str().unwrap();
    browser.keys("body", ARROW_RIGHT).await?;
    browser.wait_attr("article.chapter", "data-chapter", |c| c == second).await?;
    assert!(browser.client.current_url().await?.as_str().ends_with(&format!("#/{second}")));
    browser.wait_attr("nav.toc a[aria-current=page]", "href", |h| h == format!("#/{second}")).await?;

    // A reload keeps the chapter and the token (the address has neither the token nor a way
    // to get it back, so the connection proves it was kept).
    browser.client.refresh().await?;
    browser.wait_attr("article.chapter", "data-chapter", |c| c == second).await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;

    // A deep link opens its chapter directly; the pager links to its neighbours.
    let origin = server.url.split(['?', '#']).next().unwrap();
    browser.client.goto(&format!("{origin}#/rank-groups")).await?;
    browser.wait_attr("article.chapter", "data-chapter", |c| c == "rank-groups").await?;
    browser.wait_attr("nav.pager a[rel=next]", "href", |h| h == "#/tensor-parallel").await?;
    browser.client.goto(&format!("{origin}#/no-such-chapter")).await?;
    browser.wait_text("main .error", |t| t.contains("no-such-chapter")).await?;

    browser.close().await
}

/// Loads the page a few times, at `/` and under a proxy prefix, and prints the median time to
/// the first chapter's text (the figures in BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_to_first_render() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;
    for (place, url) in [("at /", server.url.clone()), ("under a proxy prefix", proxy.url(&format!("/?token={}", server.token)))] {
        let mut times = Vec::new();
        for _ in 0..5 {
            browser.client.goto(&url).await?;
            browser.wait_text("article.chapter h1", |t| !t.is_empty()).await?;
            let marks = browser.eval(FIRST_RENDER).await?;
            times.push(marks[0].as_f64().expect("the first-render mark is set"));
            browser.client.goto("about:blank").await?;
        }
        times.sort_by(f64::total_cmp);
        println!(
            "time to first render {place} over {} loads: median {:.0} ms (min {:.0}, max {:.0})",
            times.len(),
            times[2],
            times[0],
            times[4]
        );
    }
    browser.close().await
}
