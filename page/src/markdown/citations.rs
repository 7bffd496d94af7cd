//! Figures quoted from the tutorial's sources, written `[39 GB](source:000-75)` (the checklist
//! row of `docs/coverage.md` they belong to) or `[203 samples/s](edition:sc25)` (an edition
//! that is not among the sources), and figures read off Scalebook's own recordings, written
//! `[204 ms](recorded:h200-short-0workers#gpu-range=forward)` (the recording and the measure:
//! a test in `shared` computes each from the recording and holds the figure to it), rendered
//! as the figure with a small label that says where it comes from, instead of a link that
//! leads nowhere.

use pulldown_cmark::{CowStr, Event, Tag, TagEnd};

/// The five sources by the prefix of their checklist rows.
const SOURCES: &[(&str, &str)] = &[("000", "DL4SCI25"), ("001", "SC23"), ("002", "JSC"), ("003", "Data Day 2024"), ("004", "SC22")];

/// The label and tooltip for a link target, when it is a citation.
fn citation(target: &str) -> Option<(String, String)> {
    if let Some(row) = target.strip_prefix("source:") {
        let (_, name) = SOURCES.iter().find(|(prefix, _)| row.starts_with(prefix))?;
        return Some(((*name).to_owned(), format!("{name}, checklist row {row}")));
    }
    if let Some(reading) = target.strip_prefix("recorded:") {
        let recording = reading.split_once('#').map_or(reading, |(name, _)| name);
        return Some(("recorded".to_owned(), format!("read off Scalebook's recording {recording}, shown in this chapter")));
    }
    let edition = target.strip_prefix("edition:")?;
    Some((edition.to_owned(), format!("from the {edition} edition, which is not among the sources")))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The events with citation links replaced by a `span.quoted` and its `sup.cite` label.
pub fn cite<'a>(events: impl Iterator<Item = Event<'a>>) -> impl Iterator<Item = Event<'a>> {
    // For each open link: the HTML that closes it, when it is a citation.
    let mut open: Vec<Option<String>> = Vec::new();
    events.map(move |event| match event {
        Event::Start(Tag::Link { ref dest_url, .. }) => match citation(dest_url) {
            Some((label, title)) => {
                open.push(Some(format!("</span><sup class=\"cite\">{}</sup>", escape(&label))));
                Event::InlineHtml(CowStr::from(format!("<span class=\"quoted\" title=\"{}\">", escape(&title))))
            }
            None => {
                open.push(None);
                event
            }
        },
        Event::End(TagEnd::Link) => match open.pop().flatten() {
            Some(close) => Event::InlineHtml(CowStr::from(close)),
            None => event,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use crate::markdown::to_html;

    #[test]
    fn quoted_figures_name_their_source_or_edition() {
        let html = to_html("Memory fell to [39 GB](source:000-75), not [37](edition:sc25); see [the docs](https://example.org).");
        assert!(
            html.contains(r#"<span class="quoted" title="DL4SCI25, checklist row 000-75">39 GB</span><sup class="cite">DL4SCI25</sup>"#),
            "{html}"
        );
        assert!(html.contains(
            r#"<span class="quoted" title="from the sc25 edition, which is not among the sources">37</span><sup class="cite">sc25</sup>"#
        ));
        assert!(html.contains(r#"<a href="https://example.org">the docs</a>"#), "other links stay links: {html}");
        assert!(!html.contains("source:"));
    }

    #[test]
    fn figures_read_off_a_recording_name_it() {
        let html = to_html("The forward pass took [204 ms](recorded:h200-short-0workers#gpu-range=forward) on the GPU.");
        assert!(
            html.contains(r#"<span class="quoted" title="read off Scalebook's recording h200-short-0workers, shown in this chapter">204 ms</span><sup class="cite">recorded</sup>"#),
            "{html}"
        );
        assert!(!html.contains("recorded:"), "{html}");
    }
}
