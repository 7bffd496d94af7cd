//! The config editor checks every edit with `shared`'s rules and shows each problem beside its
//! field; the form and the YAML view stay in sync; a run cannot be launched while it is wrong;
//! the edits survive leaving the chapter and a reload.

use scalebook_e2e::{Browser, Server};

const EDITOR: &str = ".config-editor";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_edits_show_their_field_errors() -> anyhow::Result<()> {
    let server = Server::start(&[])?;
    let browser = Browser::start().await?;
    browser.client.goto(&server.chapter_url("single-gpu")).await?;
    browser.wait_value(&format!("{EDITOR} input[data-field=embed_dim]"), |v| v == "128").await?;

    // 130 is not divisible by cpu_short's 4 heads: the rule is shown beside embed_dim.
    browser.type_into(&format!("{EDITOR} input[data-field=embed_dim]"), "130").await?;
    browser.wait_text(&format!("{EDITOR} .error[data-field=embed_dim]"), |t| t.contains("130 is not divisible by num_heads 4")).await?;
    browser.wait_attr(&format!("{EDITOR} input[data-field=embed_dim]"), "aria-invalid", |v| v == "true").await?;
    // The run block of the chapter will not launch a config with problems.
    browser.wait_attr(".run-block button.launch", "disabled", |_| true).await?;
    // The YAML view (folded in a lesson's editor: opened as a learner opens it) follows the form.
    browser.click(&format!("{EDITOR} details.yaml summary")).await?;
    browser.wait_value(&format!("{EDITOR} textarea.yaml-text"), |v| v.contains("embed_dim: 130")).await?;
    let yaml = browser.eval("return document.querySelector('.config-editor textarea.yaml-text').value").await?;
    assert!(yaml.as_str().unwrap().contains("  embed_dim: 130\n"), "{yaml}");

    // Editing the YAML updates the form, and its problems land beside the form's fields.
    let edited = yaml.as_str().unwrap().replace("  embed_dim: 130\n", "  embed_dim: 128\n").replace("  depth: 4\n", "  depth: 0\n");
    browser.paste_into(&format!("{EDITOR} textarea.yaml-text"), &edited).await?;
    browser.wait_value(&format!("{EDITOR} input[data-field=depth]"), |v| v == "0").await?;
    browser.wait_text(&format!("{EDITOR} .error[data-field=depth]"), |t| t.contains("at least 1")).await?;
    assert!(browser.attr(&format!("{EDITOR} .error[data-field=embed_dim]"), "data-field").await.is_none());

    // A YAML syntax error is reported and the form keeps the last readable values.
    browser.paste_into(&format!("{EDITOR} textarea.yaml-text"), "cpu_short:\n  depth: [1, 2\n").await?;
    browser.wait_text(&format!("{EDITOR} .error[data-field=yaml]"), |t| t.starts_with("YAML:")).await?;
    browser.wait_value(&format!("{EDITOR} input[data-field=depth]"), |v| v == "0").await?;

    // Fixing the field clears the problems; the derived values and the changes appear.
    browser.type_into(&format!("{EDITOR} input[data-field=depth]"), "6").await?;
    browser.wait_text(&format!("{EDITOR} .changes"), |t| t.contains("depth=6")).await?;
    browser.wait_text(&format!("{EDITOR} dd[data-derived='iterations per epoch']"), |t| t == "32").await?;
    assert!(browser.attr(&format!("{EDITOR} .error[data-field=depth]"), "data-field").await.is_none());

    // Leaving the chapter and coming back (and reloading) keeps the edit: the learner finds the
    // config they left, and the run block launches it.
    browser.eval("location.hash = '#/data-parallel'").await?;
    browser.wait_text(&format!("{EDITOR} select option:checked"), |t| t == "bs64_opt").await?;
    browser.eval("location.hash = '#/single-gpu'").await?;
    browser.wait_text(&format!("{EDITOR} select option:checked"), |t| t == "cpu_short").await?;
    browser.wait_value(&format!("{EDITOR} input[data-field=depth]"), |v| v == "6").await?;
    browser.wait_text(&format!("{EDITOR} .changes"), |t| t.contains("depth=6")).await?;
    browser.client.refresh().await?;
    browser.wait_value(&format!("{EDITOR} input[data-field=depth]"), |v| v == "6").await?;
    browser.wait_text(".run-block", |t| t.contains("depth=6")).await?;

    browser.close().await
}
