//! Just enough of Python's syntax to read a chapter's listings as code: the fenced blocks, their
//! logical lines, the calls in a line with their arguments, loops, assignments and imports.
//! Listings are short and plain (no triple-quoted strings, no decorators), so a scanner that
//! knows strings, comments and brackets reads them as Python does.

use scalebook_shared::chapter::{Part, parts};

/// One ```python block of a chapter: its code and the chapter line of its first code line.
pub struct Listing {
    pub line: usize,
    pub code: String,
}

/// One logical line: physical lines joined while a bracket is open, comments removed.
pub struct Statement {
    /// The chapter line it starts on.
    pub line: usize,
    pub text: String,
}

/// A call as written: the callee (`dcp.load`, `model.blocks[0].state_dict`) and its arguments.
pub struct Call {
    pub callee: String,
    pub args: Vec<Arg>,
}

/// One argument: `keyword=value`, or a positional value (`*rest` included, star and all).
pub struct Arg {
    pub keyword: Option<String>,
    pub value: String,
}

impl Call {
    /// The positional arguments, in order.
    pub fn positional(&self) -> impl Iterator<Item = &str> {
        self.args.iter().filter(|a| a.keyword.is_none()).map(|a| a.value.as_str())
    }

    /// The argument for parameter `name`, at `index` if given by position.
    pub fn argument(&self, index: usize, name: &str) -> Option<&str> {
        let by_keyword = self.args.iter().find(|a| a.keyword.as_deref() == Some(name));
        by_keyword.map(|a| a.value.as_str()).or_else(|| self.positional().nth(index))
    }
}

/// Every ```python block of `markdown`, read with the chapter grammar the page reads it with,
/// each with the line its code starts on.
pub fn listings(markdown: &str) -> Vec<Listing> {
    let bodies = parts(markdown).into_iter().filter_map(|part| match part {
        Part::Code { info, body } if info == "python" => Some(body),
        _ => None,
    });
    let mut from = 0;
    bodies
        .map(|code| {
            let at = markdown[from..].find(&code).map_or(from, |i| from + i);
            from = at + code.len();
            Listing { line: markdown[..at].lines().count() + 1, code }
        })
        .collect()
}

/// Which bytes of `text` are code (not inside a string literal), and the comment's start.
fn code_mask(text: &str) -> (Vec<bool>, Option<usize>) {
    let bytes = text.as_bytes();
    let mut mask = vec![true; bytes.len()];
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) => {
                mask[i] = false;
                if b == b'\\' && i + 1 < bytes.len() {
                    mask[i + 1] = false;
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            }
            None if b == b'#' => return (mask, Some(i)),
            None if b == b'"' || b == b'\'' => {
                mask[i] = false;
                quote = Some(b);
            }
            None => {}
        }
        i += 1;
    }
    (mask, None)
}

/// The logical lines of `listing`, numbered by chapter line.
pub fn statements(listing: &Listing) -> Vec<Statement> {
    let mut statements = Vec::new();
    let (mut text, mut start, mut depth) = (String::new(), 0, 0i32);
    for (i, line) in listing.code.lines().enumerate() {
        let (mask, comment) = code_mask(line);
        let code = &line[..comment.unwrap_or(line.len())];
        if text.is_empty() {
            start = listing.line + i;
        }
        for (b, is_code) in code.bytes().zip(mask.iter().copied()) {
            match (b, is_code) {
                (b'(' | b'[' | b'{', true) => depth += 1,
                (b')' | b']' | b'}', true) => depth -= 1,
                _ => {}
            }
        }
        let code = code.trim_end();
        let continued = code.ends_with('\\');
        text.push_str(code.trim_end_matches('\\').trim());
        text.push(' ');
        if depth <= 0 && !continued && !text.trim().is_empty() {
            statements.push(Statement { line: start, text: text.trim().to_owned() });
            text.clear();
            depth = 0;
        } else if text.trim().is_empty() {
            text.clear();
        }
    }
    statements
}

/// `text` cut at every top-level `sep` (outside strings and brackets), each part trimmed.
pub fn split_top(text: &str, sep: u8) -> Vec<&str> {
    let (mask, _) = code_mask(text);
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0i32, 0);
    for (i, (b, is_code)) in text.bytes().zip(mask.iter().copied()).enumerate() {
        match (b, is_code) {
            (b'(' | b'[' | b'{', true) => depth += 1,
            (b')' | b']' | b'}', true) => depth -= 1,
            (b, true) if b == sep && depth == 0 => {
                parts.push(text[from..i].trim());
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[from..].trim());
    parts
}

/// Where the top-level `=` of an assignment or keyword argument is, if `text` has one (not
/// `==`, `<=`, `>=`, `!=`, nor one inside brackets or strings).
fn top_level_equals(text: &str) -> Option<usize> {
    let (mask, _) = code_mask(text);
    let bytes = text.as_bytes();
    let mut depth = 0i32;
    for i in 0..bytes.len() {
        match (bytes[i], mask[i]) {
            (b'(' | b'[' | b'{', true) => depth += 1,
            (b')' | b']' | b'}', true) => depth -= 1,
            (b'=', true) if depth == 0 => {
                let before = i.checked_sub(1).map(|j| bytes[j]);
                let after = bytes.get(i + 1).copied();
                let compares = matches!(before, Some(b'=' | b'<' | b'>' | b'!')) || after == Some(b'=');
                if !compares {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One argument as written.
fn argument(text: &str) -> Arg {
    match top_level_equals(text) {
        Some(i) if is_identifier(text[..i].trim()) => {
            Arg { keyword: Some(text[..i].trim().to_owned()), value: text[i + 1..].trim().to_owned() }
        }
        _ => Arg { keyword: None, value: text.to_owned() },
    }
}

/// Where the callee written before the `(` at `open` starts: back over names, dots and
/// subscripts (`model.blocks[0].state_dict`).
fn callee_start(text: &str, open: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = open;
    while i > 0 {
        let b = bytes[i - 1];
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' {
            i -= 1;
        } else if b == b']' {
            let mut depth = 0;
            while i > 0 {
                i -= 1;
                depth += match bytes[i] {
                    b']' => 1,
                    b'[' => -1,
                    _ => 0,
                };
                if depth == 0 {
                    break;
                }
            }
        } else {
            break;
        }
    }
    i
}

/// Every call in `text`, outer ones before the calls in their arguments.
pub fn calls(text: &str) -> Vec<Call> {
    let (mask, _) = code_mask(text);
    let bytes = text.as_bytes();
    let mut calls = Vec::new();
    for open in (0..bytes.len()).filter(|&i| bytes[i] == b'(' && mask[i]) {
        let callee = text[callee_start(text, open)..open].trim_start_matches('.');
        if callee.is_empty() || !callee.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            continue;
        }
        let Some(close) = closing(text, &mask, open) else { continue };
        let inside = &text[open + 1..close];
        let args = split_top(inside, b',').into_iter().filter(|a| !a.is_empty()).map(argument).collect();
        calls.push(Call { callee: callee.to_owned(), args });
    }
    calls
}

/// The bracket that closes the one at `open`.
fn closing(text: &str, mask: &[bool], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, b) in text.bytes().enumerate().skip(open) {
        match (b, mask[i]) {
            (b'(' | b'[' | b'{', true) => depth += 1,
            (b')' | b']' | b'}', true) => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `for NAME in EXPR:` as (NAME, EXPR).
pub fn loop_over(statement: &str) -> Option<(&str, &str)> {
    let rest = statement.strip_prefix("for ")?.strip_suffix(':')?;
    let (name, expr) = rest.split_once(" in ")?;
    is_identifier(name.trim()).then(|| (name.trim(), expr.trim()))
}

/// `a, b = EXPR` as (the names bound, EXPR); `None` for anything else (calls, `x.y = ...`).
pub fn assignment(statement: &str) -> Option<(Vec<&str>, &str)> {
    let i = top_level_equals(statement)?;
    let names: Vec<&str> = split_top(&statement[..i], b',').into_iter().collect();
    names.iter().all(|n| is_identifier(n)).then(|| (names, statement[i + 1..].trim()))
}

/// The names an import binds, each with the dotted path it stands for
/// (`from a.b import c as d` binds `d` to `a.b.c`; `import a.b` binds `a` to `a`).
pub fn imports(statement: &str) -> Vec<(String, String)> {
    let (module, items) = match statement.strip_prefix("from ").and_then(|rest| rest.split_once(" import ")) {
        Some((module, items)) => (Some(module.trim()), items),
        None => match statement.strip_prefix("import ") {
            Some(items) => (None, items),
            None => return Vec::new(),
        },
    };
    let items = items.trim().trim_start_matches('(').trim_end_matches(')');
    let bind = |item: &str| {
        let (name, alias) = item.split_once(" as ").map_or((item, None), |(n, a)| (n.trim(), Some(a.trim())));
        match (module, alias) {
            (Some(module), _) => (alias.unwrap_or(name).to_owned(), format!("{module}.{name}")),
            (None, Some(alias)) => (alias.to_owned(), name.to_owned()),
            (None, None) => (name.split('.').next().unwrap_or(name).to_owned(), name.split('.').next().unwrap_or(name).to_owned()),
        }
    };
    split_top(items, b',').into_iter().filter(|i| !i.is_empty()).map(bind).collect()
}

/// The identifiers `expr` mentions outside its strings.
pub fn names(expr: &str) -> Vec<&str> {
    let (mask, _) = code_mask(expr);
    let bytes = expr.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = mask[i] && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_');
        let after_dot = i > 0 && bytes[i - 1] == b'.';
        let mut j = i;
        while j < bytes.len() && mask[j] && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
            j += 1;
        }
        if starts && !after_dot {
            names.push(&expr[i..j]);
        }
        i = j.max(i + 1);
    }
    names
}

/// The text of a plain string literal (`"attn.q"` or `'attn.q'`).
pub fn string_literal(expr: &str) -> Option<&str> {
    let expr = expr.trim();
    let quote = expr.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = expr.strip_prefix(quote)?.strip_suffix(quote)?;
    (!inner.contains(quote)).then_some(inner)
}

/// The `key: value` entries of a dict literal, or `None` when `expr` is not one.
pub fn dict_entries(expr: &str) -> Option<Vec<(&str, &str)>> {
    let inner = expr.trim().strip_prefix('{')?.strip_suffix('}')?;
    split_top(inner, b',').into_iter().filter(|e| !e.is_empty()).map(dict_entry).collect()
}

fn dict_entry(entry: &str) -> Option<(&str, &str)> {
    match split_top(entry, b':')[..] {
        [key, value] => Some((key, value)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_arguments_and_lines_as_python_does() {
        let listing =
            Listing { line: 10, code: "x = f(a, (b, c), k=\"s, t\")  # f(no)\nfor b in model.blocks:\n    g(b,\n      h=1)\n".into() };
        let statements = statements(&listing);
        let lines: Vec<(usize, &str)> = statements.iter().map(|s| (s.line, s.text.as_str())).collect();
        assert_eq!(lines, [(10, "x = f(a, (b, c), k=\"s, t\")"), (11, "for b in model.blocks:"), (12, "g(b, h=1)")]);
        let call = &calls(&statements[0].text)[0];
        assert_eq!(call.callee, "f");
        assert_eq!(call.positional().collect::<Vec<_>>(), ["a", "(b, c)"]);
        assert_eq!(call.argument(9, "k"), Some("\"s, t\""));
        assert_eq!(assignment(&statements[0].text).map(|(n, _)| n), Some(vec!["x"]));
        assert_eq!(loop_over(&statements[1].text), Some(("b", "model.blocks")));
        assert_eq!(calls("model.blocks[0].state_dict()")[0].callee, "model.blocks[0].state_dict");
        assert_eq!(imports("import torch.distributed.checkpoint as dcp"), [("dcp".into(), "torch.distributed.checkpoint".into())]);
        assert_eq!(names("{\"m\": a.b(c), 'd': e}"), ["a", "c", "e"]);
    }

    #[test]
    fn finds_each_python_listing_at_its_line() {
        let markdown = "Text.\n\n```python\na = 1\n```\n\n```yaml\nb: 2\n```\n```python\na = 1\nc = 3\n```\n";
        let found: Vec<(usize, String)> = listings(markdown).into_iter().map(|l| (l.line, l.code)).collect();
        assert_eq!(found, [(4, "a = 1\n".to_owned()), (11, "a = 1\nc = 3\n".to_owned())]);
    }
}
