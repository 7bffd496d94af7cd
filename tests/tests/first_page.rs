//! The served page renders from the built wasm in headless Chromium and runs `shared` code.

use scalebook_e2e::{Browser, Server, workspace_binary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_renders_and_computes_layouts_with_shared_code() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.url).await?;

    // The default layout (tp 2, cp 2, dp 4) is computed in wasm on load.
    browser.wait_text("#layout-world", |t| t == "16").await?;
    browser.wait_text("#layout-effective-order", |t| t == "tp-cp-dp-pp").await?;

    // The groups shown are the CLI's groups: the same `shared` code on both sides.
    let cli = std::process::Command::new(workspace_binary("scalebook")?)
        .args(["layout", "--tp", "2", "--cp", "2", "--dp", "4", "--order", "tp-cp-dp", "--json"])
        .output()?;
    let json: serde_json::Value = serde_json::from_slice(&cli.stdout)?;
    let first_dp_group = json["groups"]["dp"][0].to_string().replace(',', ", ");
    browser.wait_text("#groups-dp .groups", |t| t.starts_with(&first_dp_group)).await?;

    // An invalid edit shows the broken rule beside its field, and the table goes away.
    browser.type_into("#layout-tp", "0").await?;
    browser.wait_text("li.error[data-field=tp]", |t| t.contains("at least 1")).await?;
    browser.type_into("#layout-tp", "2").await?;
    browser.type_into("#layout-order", "dp-tp").await?;
    browser.wait_text("li.error[data-field=order]", |t| t.contains("cp")).await?;

    browser.close().await
}
