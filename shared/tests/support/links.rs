//! The chapters' links of one scheme, as the tests that check what they quote read them.

/// `(offset, text, target)` of every Markdown link `[text](target)` whose target starts with
/// `scheme:`, the target without the scheme; the offset is where the link's text starts.
pub fn links<'a>(text: &'a str, scheme: &str) -> Vec<(usize, &'a str, &'a str)> {
    let marker = format!("]({scheme}:");
    let mut out = Vec::new();
    for (at, _) in text.match_indices(&marker) {
        let (Some(open), Some(close)) = (text[..at].rfind('['), text[at..].find(')')) else { continue };
        out.push((open + 1, &text[open + 1..at], &text[at + marker.len()..at + close]));
    }
    out
}
