//! This project's own source, shown in the chapters (`scalebook code` blocks): one named item of
//! one file, cut from the file as it is on disk when asked, so a chapter can never show code
//! that differs from what runs. Items are found by parsing the file (`syn`), not by searching
//! its text: `ShardedSampler`, `ShardedSampler::indices` (a method in an `impl` of that type),
//! `train`, `exit_code`.

use std::path::{Component, Path};

use quote::ToTokens;
use serde::Serialize;

use crate::Error;

/// The directories whose Rust files a chapter may show.
pub const SOURCE_DIRS: [&str; 4] = ["shared/src", "backend/server/src", "backend/trainer/src", "frontend/src"];

/// One item of a source file, with the doc comments and attributes above it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    pub path: String,
    pub item: String,
    /// The first and last line (1-based) in the file.
    pub first_line: usize,
    pub last_line: usize,
    pub text: String,
}

/// Item `item` of the file at `path` (relative to `root`, inside [`SOURCE_DIRS`]).
pub fn snippet(root: &Path, path: &str, item: &str) -> Result<Snippet, Error> {
    let relative = Path::new(path);
    let confined = relative.components().all(|c| matches!(c, Component::Normal(_)))
        && relative.extension().is_some_and(|e| e == "rs")
        && SOURCE_DIRS.iter().any(|dir| relative.starts_with(dir));
    if !confined {
        return Err(Error::NotSource { path: scalebook_shared::excerpt(path), dirs: SOURCE_DIRS.join(", ") });
    }
    let unreadable = |message: String| Error::SourceUnreadable { path: path.to_owned(), message };
    let text = std::fs::read_to_string(root.join(relative)).map_err(|e| unreadable(e.to_string()))?;
    let file = syn::parse_file(&text).map_err(|e| unreadable(e.to_string()))?;
    let no_item = || Error::NoItem { path: path.to_owned(), item: scalebook_shared::excerpt(item) };
    let (first_line, last_line) = find(&file.items, item).ok_or_else(no_item)?;
    let text = text.lines().skip(first_line - 1).take(last_line + 1 - first_line).collect::<Vec<_>>().join("\n");
    Ok(Snippet { path: path.to_owned(), item: item.to_owned(), first_line, last_line, text })
}

/// The file and item of every `code` block of a chapter's Markdown `text`, in order: what the
/// page asks for when it shows the chapter (and so what `scalebook export` writes beforehand).
pub fn listed_in(text: &str) -> Vec<(String, String)> {
    scalebook_shared::chapter::parts(text)
        .into_iter()
        .filter_map(|part| match part {
            scalebook_shared::chapter::Part::Block { info, .. } => code_block(&info),
            _ => None,
        })
        .collect()
}

/// The `path=` and `item=` of a block whose info string (after `scalebook`) is a `code` block's;
/// `None` for any other kind. A missing setting reads as empty, which [`snippet`] refuses.
fn code_block(info: &str) -> Option<(String, String)> {
    let mut words = info.split_whitespace();
    if words.next() != Some(scalebook_shared::chapter::BlockKind::Code.name()) {
        return None;
    }
    let setting = |key: &str| info.split_whitespace().find_map(|w| w.strip_prefix(key)).unwrap_or_default().to_owned();
    Some((setting("path="), setting("item=")))
}

/// The lines of `item` (`name`, or `Type::name` for an item of an `impl` of `Type`) among `items`.
fn find(items: &[syn::Item], item: &str) -> Option<(usize, usize)> {
    match item.split_once("::") {
        None => items.iter().find(|i| name_of(i).is_some_and(|n| n == item)).map(lines),
        Some((owner, member)) => items.iter().find_map(|i| match i {
            syn::Item::Impl(block) if type_name(&block.self_ty).is_some_and(|t| t == owner) => {
                block.items.iter().find(|m| member_name(m).is_some_and(|n| n == member)).map(lines)
            }
            syn::Item::Mod(module) if module.ident == owner => module.content.as_ref().and_then(|(_, inner)| find(inner, member)),
            _ => None,
        }),
    }
}

/// Its lines, from its first token (its doc comments and attributes are tokens of it) to the
/// end of its last (a body's closing brace).
fn lines(node: &impl ToTokens) -> (usize, usize) {
    let tokens: Vec<_> = node.to_token_stream().into_iter().collect();
    let first = tokens.first().map_or(0, |t| t.span().start().line);
    let last = tokens.last().map_or(first, |t| t.span().end().line);
    (first, last)
}

fn name_of(item: &syn::Item) -> Option<String> {
    Some(
        match item {
            syn::Item::Fn(f) => &f.sig.ident,
            syn::Item::Struct(s) => &s.ident,
            syn::Item::Enum(e) => &e.ident,
            syn::Item::Trait(t) => &t.ident,
            syn::Item::Const(c) => &c.ident,
            syn::Item::Static(s) => &s.ident,
            syn::Item::Type(t) => &t.ident,
            syn::Item::Mod(m) => &m.ident,
            syn::Item::Macro(m) => m.ident.as_ref()?,
            _ => return None,
        }
        .to_string(),
    )
}

fn member_name(item: &syn::ImplItem) -> Option<String> {
    Some(
        match item {
            syn::ImplItem::Fn(f) => &f.sig.ident,
            syn::ImplItem::Const(c) => &c.ident,
            syn::ImplItem::Type(t) => &t.ident,
            _ => return None,
        }
        .to_string(),
    )
}

fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> std::path::PathBuf {
        std::path::PathBuf::from(format!("{}/../..", std::env::var("CARGO_MANIFEST_DIR").unwrap()))
    }

    #[test]
    fn functions_types_and_methods_come_whole_with_their_docs() {
        let method = snippet(&root(), "backend/server/src/code.rs", "Snippet").unwrap();
        assert!(method.text.starts_with("/// One item of a source file"), "{}", method.text);
        assert!(method.text.ends_with('}') && method.text.contains("pub text: String,"));
        assert_eq!(method.last_line - method.first_line + 1, method.text.lines().count());
        let function = snippet(&root(), "backend/server/src/code.rs", "find").unwrap();
        assert!(function.text.contains("fn find(items: &[syn::Item], item: &str)"));
        let sampler = snippet(&root(), "backend/trainer/src/data/sampler.rs", "ShardedSampler::num_samples").unwrap();
        assert!(sampler.text.contains("pub fn num_samples(&self) -> usize"), "{}", sampler.text);
        assert!(!sampler.text.contains("pub fn len"), "only the method: {}", sampler.text);
    }

    /// Every `scalebook code` block of the chapters names an item that exists.
    #[test]
    fn every_code_block_of_the_chapters_shows_existing_source() {
        let mut blocks = 0;
        for entry in std::fs::read_dir(root().join("static/chapters")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            for (file, item) in listed_in(&std::fs::read_to_string(&path).unwrap()) {
                let found = snippet(&root(), &file, &item);
                assert!(found.is_ok(), "{}: {file} {item}: {:?}", path.display(), found.err());
                blocks += 1;
            }
        }
        assert!(blocks >= 3, "only {blocks} code blocks in the chapters");
    }

    /// No chapter makes a learner read more than [`MAX_READING_WORDS`] words (its prose, the
    /// code it shows, the project's code its `code` blocks show) between two blocks they act on.
    #[test]
    fn no_chapter_is_a_wall_of_reading() {
        use scalebook_shared::chapter::{MAX_READING_WORDS, reading_stretches};
        let code_words = |info: &str| match code_block(info) {
            Some((path, item)) => snippet(&root(), &path, &item).map_or(0, |s| s.text.split_whitespace().count()),
            None => 0,
        };
        let mut walls = Vec::new();
        for entry in std::fs::read_dir(root().join("static/chapters")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for stretch in reading_stretches(&text, code_words).into_iter().filter(|s| s.words > MAX_READING_WORDS) {
                walls.push(format!("{}: {} words from \"{}\"", path.file_name().unwrap().to_string_lossy(), stretch.words, stretch.starts));
            }
        }
        walls.sort();
        assert!(walls.is_empty(), "more than {MAX_READING_WORDS} words between two blocks a learner acts on:\n{}", walls.join("\n"));
    }

    #[test]
    fn paths_outside_the_sources_and_missing_items_are_named() {
        for path in ["../etc/passwd", "/etc/passwd", "backend/server/src/../../../x.rs", "README.md", "target/x.rs"] {
            assert!(matches!(snippet(&root(), path, "x"), Err(Error::NotSource { .. })), "{path}");
        }
        let err = snippet(&root(), "backend/server/src/code.rs", "no_such_item").unwrap_err();
        assert_eq!(err.to_string(), "backend/server/src/code.rs has no item `no_such_item`");
        assert!(matches!(snippet(&root(), "shared/src/nope.rs", "x"), Err(Error::SourceUnreadable { .. })));
    }
}
