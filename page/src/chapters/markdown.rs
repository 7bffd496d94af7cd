//! A chapter's Markdown as a sequence of prose (rendered to HTML) and interactive blocks (the
//! fenced code blocks whose info string starts with `scalebook`, as `shared::chapter` reads
//! them). Any other code block stays code, so chapters can still show commands and YAML.

use scalebook_shared::chapter::{self, Part};

use crate::blocks::BlockSpec;
use crate::markdown::to_html;

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

/// The chapter as `shared::chapter` reads it: prose and shown code rendered together, each
/// block read into its spec (or why it cannot be).
pub fn segments(markdown: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut text = String::new();
    for part in chapter::parts(markdown) {
        match part {
            Part::Block { info, body } => {
                flush(&mut text, &mut segments);
                segments.push(match BlockSpec::parse(&info, &body) {
                    Ok(spec) => Segment::Block(spec),
                    Err(reason) => Segment::Broken { info, reason: reason.to_string() },
                });
            }
            other => text.push_str(&other.markdown()),
        }
    }
    flush(&mut text, &mut segments);
    segments
}

fn flush(text: &mut String, segments: &mut Vec<Segment>) {
    if !text.trim().is_empty() {
        segments.push(Segment::Html(to_html(text)));
    }
    text.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_and_blocks_alternate_in_order() {
        let text = "# Title\n\nSome *text*.\n\n```scalebook rank-grid tp=2 dp=2\n```\n\nMore.\n\n```scalebook quiz\nQ?\n---\nA.\n```\n";
        let segments = segments(text);
        assert_eq!(segments.len(), 4, "{segments:?}");
        assert!(matches!(&segments[0], Segment::Html(h) if h.contains("<h1>Title</h1>") && h.contains("<em>text</em>")));
        assert!(matches!(&segments[1], Segment::Block(BlockSpec::RankGrid(g)) if g.sizes.tp == 2 && g.sizes.dp == 2));
        assert!(matches!(&segments[2], Segment::Html(h) if h.contains("More.")));
        assert_eq!(segments[3], Segment::Block(BlockSpec::Quiz { question: "Q?\n".into(), answer: "A.\n".into() }));
    }

    #[test]
    fn other_code_stays_code_and_bad_blocks_say_why() {
        let text = "```yaml\nlr: 5E-4\n```\n\n```scalebooks x\n```\n\n```scalebook rank-grid tq=2\n```\n";
        let segments = segments(text);
        assert!(matches!(&segments[0], Segment::Html(h) if h.contains("lr: 5E-4") && h.contains("language-scalebooks")), "{segments:?}");
        assert!(matches!(&segments[1], Segment::Broken { reason, .. } if reason.contains("`tq`")));
    }

    /// Every block of every chapter reads: a typo in a block's settings is a failing test, not
    /// an error box a learner finds.
    #[test]
    fn every_chapter_block_reads() {
        let dir = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../static/chapters");
        let mut broken = Vec::new();
        let mut blocks = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            for segment in segments(&std::fs::read_to_string(&path).unwrap()) {
                match segment {
                    Segment::Broken { info, reason } => broken.push(format!("{}: `{info}`: {reason}", path.display())),
                    Segment::Block(_) => blocks += 1,
                    Segment::Html(_) => {}
                }
            }
        }
        assert!(broken.is_empty(), "{}", broken.join("\n"));
        assert!(blocks > 100, "only {blocks} blocks");
    }
}
