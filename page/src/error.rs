//! The page's one error type: why a chapter's block cannot be read. The page shows it in place
//! of the block, so an instructor editing a chapter sees the typo at once; each variant keeps
//! the setting at fault (the `key` of `key=value`) where there is one, so a caller can point at
//! it rather than at the whole fence.

use scalebook_shared::chapter::BlockKind;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The fence's line opens a quoted value and never closes it.
    #[error("unclosed quote in `{0}`")]
    UnclosedQuote(String),
    #[error("a scalebook block needs a kind, e.g. `scalebook quiz`")]
    NoKind,
    #[error("unknown block kind `{0}`; the kinds are {kinds}", kinds = every_kind())]
    UnknownKind(String),
    /// A word after the kind that is not a setting.
    #[error("`{0}` is not of the form key=value")]
    NotASetting(String),
    /// A setting the kind does not take (a typo, most often).
    #[error("a {block} block has no setting `{key}`")]
    UnknownSetting { block: BlockKind, key: String },
    /// A setting the kind cannot do without; `wanted` says what its value is.
    #[error("a {block} block needs {key}={wanted}")]
    Missing { block: BlockKind, key: &'static str, wanted: String },
    /// A setting whose value breaks its rule.
    #[error("{key}={value}: {rule}")]
    Value { key: &'static str, value: String, rule: String },
    /// A setting that is wrong with the others (or whose rule's words quote it already).
    #[error("{rule}")]
    Setting { key: &'static str, rule: String },
    /// The block's text (a quiz's question and answer, a sweep's variants) breaks its rule.
    #[error("{rule}")]
    Body { block: BlockKind, rule: String },
}

/// Every kind's name, as a sentence lists them (`a, b and c`).
fn every_kind() -> String {
    let names: Vec<&str> = BlockKind::ALL.iter().map(|kind| kind.name()).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}
