//! Behind a prefix-stripping proxy (like jupyter-server-proxy's `/user/NAME/proxy/PORT/`), the
//! same build loads, fetches its files and opens its WebSocket relative to the page, with and
//! without the trailing slash, and deep links keep working.

use scalebook_e2e::{Browser, PrefixProxy, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_works_under_a_proxy_prefix() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let proxy = PrefixProxy::start(server.addr).await?;
    let browser = Browser::start().await?;

    // Without the trailing slash, as the proxy serves it: the page adds the slash first.
    browser.client.goto(&proxy.url(&format!("?token={}", server.token))).await?;
    browser.wait_attr("article.chapter", "data-chapter", |c| c == "model-and-data").await?;
    let address = browser.client.current_url().await?;
    assert_eq!(address.path(), format!("{}/", proxy.prefix()), "the trailing slash was added");
    // The WebSocket goes through the proxy too.
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    // The API is reached below the prefix: the config editor shows the served configs.
    browser.wait_value(".config-editor input[data-field=embed_dim]", |v| v == "384").await?;

    // A deep link under the prefix opens its chapter; its blocks work.
    browser.client.goto(&proxy.url("/#/rank-groups")).await?;
    browser.wait_attr("article.chapter", "data-chapter", |c| c == "rank-groups").await?;
    browser.wait_attr(".rank-grid-block .group-table tr[data-token='dp']", "data-count", |c| c == "4").await?;
    browser.wait_attr(".connection", "data-state", |s| s == "open").await?;
    // Its code block shows this project's source, fetched below the prefix as the file is now.
    browser.wait_text(".block.code pre", |t| t.contains("pub fn groups(&self, token: Token) -> Groups")).await?;
    browser.wait_text(".block.code figcaption", |t| t.contains("shared/src/layout/groups.rs")).await?;

    browser.close().await
}
