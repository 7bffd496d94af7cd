//! The chapters against the tutorial's sources: every item of the checklist
//! (`docs/coverage.md`) has a chapter and a place in it that exists, or a stated reason; and
//! every figure a chapter quotes from a source (`[39 GB](source:000-75)`) is one of the values
//! `docs/source-figures.md` lists for that checklist row.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scalebook_shared::chapter::{self, Part};
use scalebook_shared::config::{ConfigFile, DEFAULT_CONFIG};
use scalebook_shared::sweep::parse_variants;

#[path = "support/links.rs"]
mod support;
use support::links;

/// The rows of the checklist: 85 + 44 + 39 + 32 + 52 items of the five sources.
const ROWS: usize = 252;
/// The editions a chapter may cite besides the sources (figures the sources do not have).
const EDITIONS: &[&str] = &["sc24", "sc25"];

fn root() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One chapter, split the way a place in the checklist refers to it.
struct Chapter {
    headings: Vec<String>,
    /// (kind, info string and body, lowercased) of each `scalebook` block.
    blocks: Vec<(String, String)>,
    /// (settings, body) of each `scalebook sweep` block, as written.
    sweeps: Vec<(String, String)>,
    /// The text outside code blocks, lowercased.
    prose: String,
    /// The text a reader sees as prose: outside fenced code, plus the quiz blocks' text.
    quotable: String,
}

impl Chapter {
    /// Reads a chapter with the page's own grammar (`shared::chapter`).
    fn parse(text: &str) -> Chapter {
        let mut chapter =
            Chapter { headings: Vec::new(), blocks: Vec::new(), sweeps: Vec::new(), prose: String::new(), quotable: String::new() };
        for part in chapter::parts(text) {
            match part {
                Part::Block { info, body } => {
                    let kind = info.split_whitespace().next().unwrap_or_default().to_owned();
                    if kind == "quiz" {
                        chapter.quotable.push_str(&body);
                    }
                    if kind == "sweep" {
                        chapter.sweeps.push((info["sweep".len()..].trim().to_owned(), body.clone()));
                    }
                    chapter.blocks.push((kind, format!("{info}\n{body}").to_lowercase()));
                }
                Part::Code { .. } => {}
                Part::Prose(text) => {
                    for line in text.lines() {
                        if line.starts_with('#') {
                            chapter.headings.push(line.trim_start_matches('#').trim().to_owned());
                        }
                    }
                    chapter.prose.push_str(&text.to_lowercase());
                    chapter.quotable.push_str(&text);
                }
            }
        }
        chapter
    }

    /// Whether one place of the checklist's Place column is in this chapter.
    fn has(&self, place: &str) -> bool {
        if let Some(heading) = place.strip_prefix('§') {
            return self.headings.iter().any(|h| h == heading.trim());
        }
        let (kind, words) = match place.split_once(':') {
            Some((kind, words)) if !kind.contains(' ') => (kind.trim(), words.trim().to_lowercase()),
            _ => (place.trim(), String::new()),
        };
        if kind == "text" {
            return !words.is_empty() && self.prose.contains(&words);
        }
        self.blocks.iter().any(|(k, text)| k == kind && text.contains(&words))
    }
}

fn chapters() -> BTreeMap<String, Chapter> {
    let index: serde_json::Value = serde_json::from_str(&read("static/chapters/index.json")).unwrap();
    let slugs = index["chapters"].as_array().unwrap().iter().map(|c| c["slug"].as_str().unwrap().to_owned());
    slugs.map(|slug| (slug.clone(), Chapter::parse(&read(&format!("static/chapters/{slug}.md"))))).collect()
}

/// The cells of a Markdown table row; `\|` is a pipe inside a cell.
fn cells(line: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = line.trim().trim_start_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => cells.last_mut().unwrap().push(chars.next().unwrap()),
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.pop_if(|c| c.trim().is_empty());
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The rows of a table whose first cell looks like a checklist ID (`000-75`).
fn id_rows(text: &str) -> Vec<Vec<String>> {
    let is_id = |s: &str| s.len() == 6 && s.as_bytes()[3] == b'-' && s.chars().filter(char::is_ascii_digit).count() == 5;
    text.lines().filter(|l| l.starts_with('|')).map(cells).filter(|c| c.first().is_some_and(|id| is_id(id))).collect()
}

#[test]
fn every_checklist_row_has_a_place_or_a_reason() {
    let chapters = chapters();
    let rows = id_rows(&read("docs/coverage.md"));
    let ids: BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!((rows.len(), ids.len()), (ROWS, ROWS), "the checklist has every item once");
    let mut problems = Vec::new();
    for row in &rows {
        let [id, _, _, chapter, place, note] = &row[..] else {
            problems.push(format!("{}: expected 6 cells, found {}", row[0], row.len()));
            continue;
        };
        if chapter == "—" {
            if note.is_empty() {
                problems.push(format!("{id}: no chapter and no reason"));
            }
            continue;
        }
        let Some(content) = chapters.get(chapter) else {
            problems.push(format!("{id}: `{chapter}` is not a chapter of index.json"));
            continue;
        };
        if place.is_empty() {
            problems.push(format!("{id}: no place in {chapter}"));
        }
        for part in place.split(" ; ").filter(|p| !p.is_empty()) {
            if !content.has(part.trim_matches('`')) {
                problems.push(format!("{id}: `{part}` is not in {chapter}"));
            }
        }
    }
    assert!(problems.is_empty(), "{} checklist problems:\n{}", problems.len(), problems.join("\n"));
}

/// A number as written: its value and how many decimal places it shows (`8.36` → 2,
/// `5e-4` → 4, `2,545` → 0), so that a quote can be checked as the source's value rounded.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Written {
    value: f64,
    decimals: i32,
}

impl Written {
    /// Whether `exact` rounds to this number at the places it shows.
    fn rounds(self, exact: f64) -> bool {
        (exact - self.value).abs() <= 0.5 * 10f64.powi(-self.decimals) * (1.0 + 1e-9)
    }
}

fn numbers(text: &str) -> Vec<f64> {
    written(text).into_iter().map(|w| w.value).collect()
}

/// The numbers in a piece of text: `2545–2573` is two, `350,135,808` one, `5e-4` one, and a
/// duration as the sources print it, `1h32m`, two.
fn written(text: &str) -> Vec<Written> {
    let mut chars: Vec<char> = text.chars().collect();
    for i in 1..chars.len().saturating_sub(1) {
        if chars[i] == 'h' && chars[i - 1].is_ascii_digit() && chars[i + 1].is_ascii_digit() {
            chars[i] = ' ';
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        // Digits inside a name (`bs64_opt`, `A100`) are not figures.
        if i > 0 && (chars[i - 1].is_ascii_alphabetic() || chars[i - 1] == '_') {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        let mut number = String::new();
        while i < chars.len() {
            let c = chars[i];
            let next_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() || (c == '.' && next_digit) {
                number.push(c);
            } else if c == ','
                && chars.get(i + 1..i + 4).is_some_and(|d| d.iter().all(char::is_ascii_digit))
                && !chars.get(i + 4).is_some_and(char::is_ascii_digit)
            {
                // A thousands separator, not a list comma ("8.36, 9.22").
            } else if (c == 'e' || c == 'E')
                && !number.contains('e')
                && chars.get(i + 1).is_some_and(|&d| d == '-' || d == '+' || d.is_ascii_digit())
            {
                number.push('e');
                if !chars[i + 1].is_ascii_digit() {
                    i += 1;
                    number.push(chars[i]);
                }
            } else {
                break;
            }
            i += 1;
        }
        if let Ok(value) = number.parse() {
            let (mantissa, exponent) = number.split_once('e').unwrap_or((&number, "0"));
            let shown = mantissa.split_once('.').map_or(0, |(_, d)| d.len() as i32);
            out.push(Written { value, decimals: shown - exponent.parse::<i32>().unwrap_or(0) });
        }
    }
    out
}

/// Each checklist row's values as the source prints them.
fn source_values() -> BTreeMap<String, Vec<f64>> {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for row in id_rows(&read("docs/source-figures.md")) {
        let listed = row.get(2).map(|v| numbers(v)).unwrap_or_default();
        values.entry(row[0].clone()).or_default().extend(listed);
    }
    values
}

#[test]
fn every_quoted_figure_is_the_sources_value() {
    let checklist: BTreeSet<String> = id_rows(&read("docs/coverage.md")).into_iter().map(|r| r[0].clone()).collect();
    let values = source_values();
    let mut problems = Vec::new();
    let mut quoted = 0;
    for (slug, chapter) in chapters() {
        for (_, text, row) in links(&chapter.quotable, "source") {
            if !checklist.contains(row) {
                problems.push(format!("{slug}: [{text}] cites `{row}`, which is not a checklist row"));
                continue;
            }
            let known = values.get(row).map(Vec::as_slice).unwrap_or_default();
            for n in written(text) {
                quoted += 1;
                if !known.iter().any(|&v| n.rounds(v)) {
                    problems.push(format!("{slug}: [{text}](source:{row}): {} is not a value of {row}, rounded ({known:?})", n.value));
                }
            }
        }
        for (_, text, edition) in links(&chapter.quotable, "edition") {
            if !EDITIONS.contains(&edition) {
                problems.push(format!("{slug}: [{text}] is labelled with `{edition}`, not one of {EDITIONS:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{} quoted figures disagree with the sources:\n{}", problems.len(), problems.join("\n"));
    assert!(quoted >= 50, "only {quoted} figures are quoted with their source");
}

/// The sweeps run what the server accepts: each variant's overrides apply to its config, and
/// to every other config the block's switch offers (the CPU configs), and the result passes
/// the config's rules on its ranks, so no learner's "Run all" is refused.
#[test]
fn every_sweep_variant_is_a_valid_run() {
    let configs = ConfigFile::parse(&read("config/ViT.yaml")).unwrap();
    let mut problems = Vec::new();
    let mut runs = 0;
    for (slug, chapter) in chapters() {
        for (settings, body) in &chapter.sweeps {
            let name = settings.split_whitespace().find_map(|w| w.strip_prefix("config=")).unwrap_or(DEFAULT_CONFIG);
            let variants = match parse_variants(body) {
                Ok(variants) => variants,
                Err(e) => {
                    problems.push(format!("{slug}: {e}"));
                    continue;
                }
            };
            let offered: Vec<&str> = std::iter::once(name).chain(configs.cpu_names().filter(|n| *n != name)).collect();
            for v in variants {
                runs += 1;
                for name in &offered {
                    let mut config = configs.get(name).unwrap_or_else(|e| panic!("{slug}: {e}"));
                    let checked = config.apply_overrides(&v.overrides).and_then(|()| config.validate(config.world(v.dp as usize)));
                    if let Err(e) = checked {
                        problems.push(format!("{slug}: `{}` on {name}: {e}", v.label));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(runs >= 12, "only {runs} sweep variants in the chapters");
}

#[test]
fn numbers_are_read_the_way_figures_are_written() {
    assert_eq!(numbers("8.36, 9.22 and 2545–2573 samples/s"), [8.36, 9.22, 2545.0, 2573.0]);
    assert_eq!(numbers("350,135,808 parameters, 1,2 and 5e-4 or 4.92327e-4"), [350135808.0, 1.0, 2.0, 5e-4, 4.92327e-4]);
    assert_eq!(numbers("1 h 32 m; bs64_opt; A100; 16x; 1h32m"), [1.0, 32.0, 16.0, 1.0, 32.0]);
    assert_eq!(links("a [39 GB](source:000-75) b [x](https://e) [7](edition:sc25)", "source"), [(3, "39 GB", "000-75")]);
    assert_eq!(cells(r"| 000-01 | a \| b | c |"), ["000-01", "a | b", "c"]);
    let [rounded, exp] = written("8.36 or 4.92e-4")[..] else { panic!() };
    assert!(rounded.rounds(8.36202) && !rounded.rounds(8.3661) && !rounded.rounds(8.37));
    assert!(exp.rounds(4.92327e-4) && !exp.rounds(4.93e-4));
    assert!(written("39")[0].rounds(39.2) && !written("39")[0].rounds(38.4));
}
