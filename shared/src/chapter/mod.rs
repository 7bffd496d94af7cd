//! A chapter's text as the notebook reads it: Markdown prose, code a chapter shows, and the
//! interactive blocks (fences whose info string is `scalebook KIND ...`, each KIND a
//! [`BlockKind`]). One grammar for the page, which renders the parts, and for the tests that
//! check what the chapters teach, so the two can never read a chapter differently.

mod kind;

pub use kind::{BlockKind, PagePart};

/// What a block's fence info string starts with.
pub const BLOCK_PREFIX: &str = "scalebook";

/// One part of a chapter, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Markdown outside any fence.
    Prose(String),
    /// A fence that is not a block (a command, some YAML): shown as code.
    Code { info: String, body: String },
    /// A block: its info string after `scalebook` (`rank-grid tp=2`) and its body.
    Block { info: String, body: String },
}

/// The block a fence's info string opens, as the rest after `scalebook` (`scalebook` alone, or
/// followed by a blank: `scalebooks` is some other language).
pub fn block_info(info: &str) -> Option<&str> {
    let rest = info.trim_start().strip_prefix(BLOCK_PREFIX)?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

/// The parts of `text`. Fences open and close with three backticks at the start of a line (as
/// every chapter writes them); a fence left open runs to the end.
pub fn parts(text: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut prose = String::new();
    // Inside a fence: its info string and its body so far.
    let mut fence: Option<(String, String)> = None;
    for line in text.lines() {
        let is_fence = line.trim_start().starts_with("```");
        match &mut fence {
            Some(_) if is_fence => parts.push(part(fence.take())),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None if is_fence => {
                if !prose.is_empty() {
                    parts.push(Part::Prose(std::mem::take(&mut prose)));
                }
                fence = Some((line.trim_start().trim_start_matches('`').trim().to_owned(), String::new()));
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    if fence.is_some() {
        parts.push(part(fence));
    }
    if !prose.is_empty() {
        parts.push(Part::Prose(prose));
    }
    parts
}

fn part(fence: Option<(String, String)>) -> Part {
    let (info, body) = fence.unwrap_or_default();
    match block_info(&info) {
        Some(rest) => Part::Block { info: rest.to_owned(), body },
        None => Part::Code { info, body },
    }
}

impl Part {
    /// The part as Markdown again (a block as its fence), to render it or quote it.
    pub fn markdown(&self) -> String {
        match self {
            Part::Prose(text) => text.clone(),
            Part::Code { info, body } => format!("```{info}\n{body}```\n"),
            Part::Block { info, body } => format!("```{BLOCK_PREFIX} {info}\n{body}```\n"),
        }
    }
}

/// The most words a learner reads between two blocks they act on (issue #28's rule).
pub const MAX_READING_WORDS: usize = 900;

/// A stretch of reading between two blocks a learner acts on (or the chapter's start or end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stretch {
    pub words: usize,
    /// The first words of the stretch, to find it in the chapter.
    pub starts: String,
}

/// Every stretch of reading in `text`: prose, shown code and read-only blocks (a quiz's
/// question, not its answer) between the blocks a learner acts on ([`BlockKind::acts`]).
/// `code_words` counts the words of a block that shows something not in the chapter (the
/// project's code a `code` block shows), given its info string.
pub fn reading_stretches(text: &str, code_words: impl Fn(&str) -> usize) -> Vec<Stretch> {
    let mut stretches = Vec::new();
    let mut current = Stretch { words: 0, starts: String::new() };
    let note = |current: &mut Stretch, words: &str| {
        if current.starts.is_empty() {
            current.starts = words.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
        }
        current.words += words.split_whitespace().count();
    };
    for part in parts(text) {
        match part {
            Part::Prose(prose) => note(&mut current, &prose),
            Part::Code { body, .. } => note(&mut current, &body),
            Part::Block { info, body } => {
                let kind = info.split_whitespace().next().and_then(BlockKind::from_name);
                if kind.is_some_and(BlockKind::acts) {
                    stretches.push(std::mem::replace(&mut current, Stretch { words: 0, starts: String::new() }));
                } else {
                    // A quiz's answer waits behind a click: its question is what is read.
                    let read = if kind == Some(BlockKind::Quiz) { body.split("\n---").next().unwrap_or_default() } else { &body };
                    note(&mut current, read);
                    current.words += code_words(&info);
                }
            }
        }
    }
    stretches.push(current);
    stretches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_code_and_blocks_come_apart_in_order() {
        let text = "# Title\n\nSome text.\n\n```yaml\nlr: 5E-4\n```\n\n```scalebook rank-grid tp=2\n```\n\n```scalebooks x\nq\n```\nEnd.\n";
        let parts = parts(text);
        assert_eq!(
            parts,
            [
                Part::Prose("# Title\n\nSome text.\n\n".into()),
                Part::Code { info: "yaml".into(), body: "lr: 5E-4\n".into() },
                Part::Prose("\n".into()),
                Part::Block { info: "rank-grid tp=2".into(), body: String::new() },
                Part::Prose("\n".into()),
                Part::Code { info: "scalebooks x".into(), body: "q\n".into() },
                Part::Prose("End.\n".into()),
            ]
        );
        assert_eq!(parts[1].markdown(), "```yaml\nlr: 5E-4\n```\n");
        assert_eq!(parts[3].markdown(), "```scalebook rank-grid tp=2\n```\n");
    }

    #[test]
    fn a_fence_left_open_runs_to_the_end() {
        assert_eq!(parts("```scalebook quiz\nQ?\n"), [Part::Block { info: "quiz".into(), body: "Q?\n".into() }]);
        assert_eq!(block_info("scalebook"), Some(""));
        assert_eq!(block_info("scalebookx"), None);
    }

    #[test]
    fn reading_is_counted_between_the_blocks_a_learner_acts_on() {
        let text = "One two three.\n\n```scalebook quiz\nfour five\n---\nsix\n```\n\n```scalebook code path=a.rs item=f\n```\n```yaml\nseven: 8\n```\n```scalebook run config=x\n```\nnine ten\n";
        let stretches = reading_stretches(text, |info| if info.starts_with("code") { 100 } else { 0 });
        let words: Vec<usize> = stretches.iter().map(|s| s.words).collect();
        assert_eq!(words, [3 + 2 + 100 + 2, 2], "the quiz's question only");
        assert_eq!(stretches[0].starts, "One two three.");
        assert_eq!(stretches[1].starts, "nine ten");
    }
}
