//! Markdown as the notebook renders it (tables, footnotes, smart punctuation, and the sources'
//! citations made links), for a chapter's prose and for the text inside its blocks.

mod citations;

use pulldown_cmark::{Options, Parser, html};

use citations::cite;

/// The Markdown features chapters use.
fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_SMART_PUNCTUATION
}

/// Markdown to HTML, for prose and for the parts of a quiz.
pub fn to_html(markdown: &str) -> String {
    let mut out = String::new();
    html::push_html(&mut out, cite(Parser::new_ext(markdown, options())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render() {
        assert!(to_html("| a | b |\n|---|---|\n| 1 | 2 |\n").contains("<table>"));
    }
}
