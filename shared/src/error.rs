//! The crate's one error type.
//!
//! Validation never stops at the first problem: users fix a config faster when they see every
//! rule it breaks at once, so invalid input is reported as a list of [`Problem`]s, each naming
//! the field and the rule.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One broken rule, tied to the field a user would edit to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The config key or layout field at fault (`embed_dim`, `tp`, `order`, ...).
    pub field: String,
    /// The rule, in words, with the offending values (`1536 is not divisible by num_heads 7`).
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every problem found in one piece of input, in the order they were found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem::new(field, message));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(value)` when nothing was found, the whole list as an error otherwise.
    pub fn into_result<T>(self, value: T) -> Result<T, Error> {
        if self.0.is_empty() { Ok(value) } else { Err(Error::Invalid(self)) }
    }

    /// The problems reported against one field (what a form shows beside that field).
    pub fn for_field<'a>(&'a self, field: &'a str) -> impl Iterator<Item = &'a Problem> + 'a {
        self.0.iter().filter(move |p| p.field == field)
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// The most characters of an input quoted back in a message: enough to recognise it, never
/// enough to make a short request produce a long answer.
const EXCERPT_CHARS: usize = 60;

/// `text` as quoted in a message: its start, with `…` when cut, control characters escaped.
pub fn excerpt(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().take(EXCERPT_CHARS) {
        match c.is_control() {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    if text.chars().nth(EXCERPT_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A YAML document (a config file, an override value) is not well-formed.
    #[error("cannot parse {what}: {message}")]
    Parse { what: String, message: String },
    /// A config name that the file does not define.
    #[error("unknown config `{name}`; the file defines: {known}")]
    UnknownConfig { name: String, known: String },
    /// Input that parses but breaks one or more rules.
    #[error("{0}")]
    Invalid(Problems),
    /// A picture that cannot be encoded.
    #[error("cannot encode the image: {0}")]
    Image(String),
    /// A TensorBoard event file that is damaged, or not an event file at all: the byte where
    /// the bad record starts, and what is wrong with it.
    #[error("byte {offset}: {message}")]
    EventFile { offset: u64, message: String },
}

impl Error {
    /// The problem list of an [`Error::Invalid`], or the error as one problem otherwise, so
    /// callers that show errors per field need only one code path.
    pub fn problems(&self) -> Problems {
        match self {
            Error::Invalid(p) => p.clone(),
            Error::Parse { what, .. } => Problems(vec![Problem::new(what.clone(), self.to_string())]),
            Error::UnknownConfig { .. } => Problems(vec![Problem::new("config", self.to_string())]),
            Error::Image(_) => Problems(vec![Problem::new("image", self.to_string())]),
            Error::EventFile { .. } => Problems(vec![Problem::new("event file", self.to_string())]),
        }
    }
}
