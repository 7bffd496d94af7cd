//! The rank grid shows the same groups as `scalebook layout` (the same `shared` code on both
//! sides), for the whole table and for a rank chosen with the keyboard, and rejects a bad size
//! with the rule beside the field.

use scalebook_e2e::{ARROW_RIGHT, Browser, Server, workspace_binary};
use serde_json::Value;

const BLOCK: &str = ".rank-grid-block";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grid_shows_the_clis_groups() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("rank-groups")).await?;

    // The chapter's first grid is tp 2, cp 2, dp 4 in the order tp-cp-dp.
    let cli = std::process::Command::new(workspace_binary("scalebook")?)
        .args(["layout", "--tp", "2", "--cp", "2", "--dp", "4", "--order", "tp-cp-dp", "--json"])
        .output()?;
    let cli: Value = serde_json::from_slice(&cli.stdout)?;
    for token in ["dp", "tp", "cp", "pp", "tp-cp", "dp-cp"] {
        let row = format!("{BLOCK} .group-table tr[data-token='{token}']");
        let expected = cli["groups"][token].as_array().unwrap();
        let count = browser.wait_attr(&row, "data-count", |_| true).await?;
        assert_eq!(count, expected.len().to_string(), "{token}: number of groups");
        let shown: Vec<Value> = serde_json::from_str(&browser.wait_attr(&format!("{row} .groups"), "data-groups", |_| true).await?)?;
        assert!(!shown.is_empty());
        assert_eq!(shown, expected[..shown.len()], "{token}: groups");
    }

    // Focus the picture and walk to rank 5 with the arrow key: its groups are the CLI's
    // groups that hold 5.
    let svg = format!("{BLOCK} svg.rank-grid-svg");
    for _ in 0..6 {
        browser.keys(&svg, ARROW_RIGHT).await?;
    }
    browser.wait_attr(&format!("{BLOCK} .rank-details [data-rank]"), "data-rank", |r| r == "5").await?;
    for token in ["dp", "tp", "cp", "tp-cp", "dp-cp"] {
        let expected = cli["groups"][token].as_array().unwrap().iter().find(|g| g.as_array().unwrap().contains(&Value::from(5))).unwrap();
        let cell = format!("{BLOCK} .rank-details tr[data-token='{token}'] .group");
        let shown: Value = serde_json::from_str(&browser.wait_attr(&cell, "data-group", |_| true).await?)?;
        assert_eq!(&shown, expected, "rank 5's {token} group");
    }

    // A size of 0 is refused beside its field, and the picture waits for a valid layout.
    browser.type_into(&format!("{BLOCK} input[data-field=tp]"), "0").await?;
    browser.wait_text(&format!("{BLOCK} .error[data-field=tp]"), |t| t.contains("at least 1")).await?;
    browser.wait_text(&format!("{BLOCK} .rank-grid, {BLOCK} p.muted"), |t| t.contains("Fix the layout")).await?;

    // A big world stays responsive: 2048 ranks draw as a few paths, not one element each.
    browser.type_into(&format!("{BLOCK} input[data-field=tp]"), "2").await?;
    browser.type_into(&format!("{BLOCK} input[data-field=dp]"), "512").await?;
    browser.wait_attr(&format!("{BLOCK} .group-table tr[data-token='dp']"), "data-count", |c| c == "4").await?;
    let drawn = browser.eval("return document.querySelectorAll('.rank-grid-block svg.rank-grid-svg *').length").await?;
    assert!(drawn.as_u64().unwrap() < 40, "{drawn} SVG elements for 2048 ranks");

    browser.close().await
}
