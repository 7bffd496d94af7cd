//! The docs list the block kinds [`BlockKind`] declares, no more and no fewer: the table of
//! `docs/chapters.md`, the README's table and its list of the blocks a learner acts on. A kind
//! added to the grammar is then documented wherever a chapter's author looks, and one taken out
//! leaves no row behind.

use std::path::Path;

use scalebook_shared::chapter::BlockKind;

fn read(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file)).unwrap()
}

/// The kind each row of the table headed `header` names in its first cell (`` `rank-grid` ``
/// or `` `scalebook rank-grid` ``).
fn table(text: &str, header: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|line| !line.starts_with(header));
    assert!(lines.next().is_some(), "no table headed `{header}`");
    let rows = lines.skip(1).take_while(|line| line.starts_with('|'));
    rows.map(|row| row.split('|').nth(1).unwrap_or_default().trim().trim_matches('`').trim_start_matches("scalebook ").to_owned()).collect()
}

/// The kinds named in the parentheses after `before`: `` (`a`, `b`) ``.
fn list(text: &str, before: &str) -> Vec<String> {
    let (_, rest) = text.split_once(before).unwrap_or_else(|| panic!("no `{before}`"));
    let (inside, _) = rest.split_once(')').unwrap_or_default();
    inside.split(',').map(|name| name.trim().trim_matches('`').to_owned()).collect()
}

/// What `place` lacks of `kinds` (with what a row would say of it) and names beyond them,
/// `which` saying what they are; empty when it lists exactly them.
fn differences(place: &str, documented: &[String], kinds: &[BlockKind], which: &str) -> Vec<String> {
    let missing = kinds.iter().filter(|kind| !documented.iter().any(|name| name == kind.name()));
    let extra = documented.iter().filter(|name| !kinds.iter().any(|kind| kind.name() == name.as_str()));
    missing
        .map(|kind| format!("{place} lacks `{kind}` ({})", kind.about()))
        .chain(extra.map(|name| format!("{place} names `{name}`, not one of {which} (`shared::chapter::BlockKind`)")))
        .collect()
}

#[test]
fn the_docs_list_every_block_kind_and_no_other() {
    let acting: Vec<BlockKind> = BlockKind::ALL.iter().copied().filter(|kind| kind.acts()).collect();
    let (chapters, readme) = (read("docs/chapters.md"), read("README.md"));
    let wrong = [
        differences("docs/chapters.md's table of blocks", &table(&chapters, "| kind |"), BlockKind::ALL, "the block kinds"),
        differences("README.md's table of blocks", &table(&readme, "| block |"), BlockKind::ALL, "the block kinds"),
        differences("README.md's blocks a learner acts on", &list(&readme, "blocks they act on ("), &acting, "the kinds a learner acts on"),
    ]
    .concat();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
