//! A chapter's Markdown as a sequence of prose (rendered to HTML) and interactive blocks (the
//! fenced code blocks whose info string starts with `scalebook`). Any other code block stays
//! code, so chapters can still show commands and YAML.

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd, html};

use crate::blocks::BlockSpec;
use crate::markdown::{cite, options};

const BLOCK_PREFIX: &str = "scalebook";

#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Html(String),
    Block(BlockSpec),
    /// A scalebook block that could not be read, with the reason.
    Broken {
        info: String,
        reason: String,
    },
}

pub fn segments(markdown: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut prose: Vec<Event<'_>> = Vec::new();
    // While inside a scalebook block: its info string and the text read so far.
    let mut block: Option<(String, String)> = None;
    for event in Parser::new_ext(markdown, options()) {
        match (&mut block, event) {
            (None, Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info)))) if is_block(&info) => {
                flush(&mut prose, &mut segments);
                let rest = info.trim_start()[BLOCK_PREFIX.len()..].trim().to_owned();
                block = Some((rest, String::new()));
            }
            (Some((_, body)), Event::Text(text)) => body.push_str(&text),
            (Some(_), Event::End(TagEnd::CodeBlock)) => {
                if let Some((info, body)) = block.take() {
                    segments.push(match BlockSpec::parse(&info, &body) {
                        Ok(spec) => Segment::Block(spec),
                        Err(reason) => Segment::Broken { info, reason },
                    });
                }
            }
            (Some(_), _) => {}
            (None, event) => prose.push(event),
        }
    }
    flush(&mut prose, &mut segments);
    segments
}

/// `scalebook` on its own or followed by a space: `scalebooks` is some other language.
fn is_block(info: &str) -> bool {
    let info = info.trim_start();
    info.strip_prefix(BLOCK_PREFIX).is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
}

fn flush(prose: &mut Vec<Event<'_>>, segments: &mut Vec<Segment>) {
    if prose.is_empty() {
        return;
    }
    let mut out = String::new();
    html::push_html(&mut out, cite(prose.drain(..)));
    segments.push(Segment::Html(out));
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn prose_and_blocks_alternate_in_order() {
        let text = "# Title\n\nSome *text*.\n\n```scalebook rank-grid tp=2 dp=2\n```\n\nMore.\n\n```scalebook quiz\nQ?\n---\nA.\n```\n";
        let segments = segments(text);
        assert_eq!(segments.len(), 4, "{segments:?}");
        assert!(matches!(&segments[0], Segment::Html(h) if h.contains("<h1>Title</h1>") && h.contains("<em>text</em>")));
        assert!(matches!(&segments[1], Segment::Block(BlockSpec::RankGrid(g)) if g.sizes.tp == 2 && g.sizes.dp == 2));
        assert!(matches!(&segments[2], Segment::Html(h) if h.contains("More.")));
        assert_eq!(segments[3], Segment::Block(BlockSpec::Quiz { question: "Q?\n".into(), answer: "A.\n".into() }));
    }

    #[wasm_bindgen_test]
    fn other_code_stays_code_and_bad_blocks_say_why() {
        let text = "```yaml\nlr: 5E-4\n```\n\n```scalebooks x\n```\n\n```scalebook rank-grid tq=2\n```\n";
        let segments = segments(text);
        assert!(matches!(&segments[0], Segment::Html(h) if h.contains("lr: 5E-4") && h.contains("language-scalebooks")), "{segments:?}");
        assert!(matches!(&segments[1], Segment::Broken { reason, .. } if reason.contains("`tq`")));
    }
}
