//! `key=value` overrides: the tutorial's command-line flags, generalised to every key, and what
//! the browser sends with a launch instead of a whole config.

use serde_json::{Map, Value};

use super::{TrainConfig, entries};
use crate::{Error, Problems, excerpt};

/// The field problems about a malformed override are reported against.
const OVERRIDES_FIELD: &str = "overrides";
/// The most characters of the YAML reader's own reason kept.
const REASON_CHARS: usize = 200;

/// The YAML budget of one override value: a scalar or a short flow list has no use for
/// anchors or aliases (an alias bomb expands a few hundred bytes into megabytes), nor for
/// more than a few dozen nodes or deep nesting.
fn budget() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_anchors = 0;
    budget.max_aliases = 0;
    budget.max_events = 256;
    budget.max_nodes = 128;
    budget.max_depth = 4;
    budget.flow_nesting_limit = 4;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = 4096;
    budget.max_merge_keys = 0;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

impl TrainConfig {
    /// Applies `key=value` overrides in order (a later one for the same key wins). Each value
    /// is read as a YAML scalar or flow list exactly as in the file, so `lr=5E-4`,
    /// `limit_nsamples=None`, `img_size=[90, 180]` and `amp_mode=bf16` all work. Every bad
    /// override is reported; on any error `self` is left unchanged.
    pub fn apply_overrides<S: AsRef<str>>(&mut self, overrides: &[S]) -> Result<(), Error> {
        let mut problems = Problems::default();
        let mut good = Map::new();
        for text in overrides {
            let text = text.as_ref();
            match parse_one(text) {
                Ok((key, value)) => match entries::check(&key, &value) {
                    Ok(()) => {
                        good.insert(key, value);
                    }
                    Err(message) => problems.push(key, format!("{message} (override `{}`)", excerpt(text))),
                },
                Err((field, message)) => problems.push(field, message),
            }
        }
        if !problems.is_empty() {
            return Err(Error::Invalid(problems));
        }
        *self = entries::overlay(self, good)?;
        Ok(())
    }
}

/// Splits `key=value` at the first `=` and reads the value as YAML; on failure, the field to
/// blame and the message.
fn parse_one(text: &str) -> Result<(String, Value), (String, String)> {
    let Some((key, value)) = text.split_once('=') else {
        return Err((OVERRIDES_FIELD.into(), format!("`{}` is not of the form key=value", excerpt(text))));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err((OVERRIDES_FIELD.into(), format!("`{}` has no key before `=`", excerpt(text))));
    }
    // One line of plain text: a newline or a control character would reach the recorded
    // config and the batch script as a line of its own.
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        let field = if key.chars().any(char::is_control) { OVERRIDES_FIELD } else { key };
        return Err((field.into(), format!("`{}` holds the control character {c:?}: an override is one line of text", excerpt(text))));
    }
    let value = serde_saphyr::from_str_with_options::<Value>(value.trim(), budget()).map_err(|e| {
        let reason = e.to_string();
        let reason: String = reason.lines().next().unwrap_or_default().trim_start_matches("error: ").chars().take(REASON_CHARS).collect();
        (key.to_owned(), format!("cannot read `{}` as a value: {reason}", excerpt(value.trim())))
    })?;
    Ok((key.to_owned(), entries::normalize(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits_at_the_first_equals_sign_and_reads_yaml() {
        assert_eq!(parse_one("lr=5E-4"), Ok(("lr".into(), json!(5e-4))));
        assert_eq!(parse_one(" img_size = [90, 180] "), Ok(("img_size".into(), json!([90, 180]))));
        assert_eq!(parse_one("expdir=a=b"), Ok(("expdir".into(), json!("a=b"))));
        assert_eq!(parse_one("limit_nsamples=None"), Ok(("limit_nsamples".into(), Value::Null)));
        assert_eq!(parse_one("limit_nsamples="), Ok(("limit_nsamples".into(), Value::Null)));
    }

    #[test]
    fn an_alias_bomb_is_refused_at_once_with_a_short_message() {
        let bomb = "img_size=[&a0 [x,x,x,x,x,x,x,x,x], &a1 [*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0], &a2 [*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1], \
                    &a3 [*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2], &a4 [*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3], [*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4]]";
        let (field, message) = parse_one(bomb).unwrap_err();
        assert_eq!(field, "img_size");
        assert!(message.len() < 400, "{} bytes: {message}", message.len());
        let deep = format!("img_size={}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse_one(&deep).unwrap_err().1.len() < 400);
        let wide = format!("img_size=[{}]", vec!["1"; 500].join(","));
        assert!(parse_one(&wide).is_err());
    }

    #[test]
    fn control_characters_are_refused_against_the_key() {
        for text in ["expdir=a\n#SBATCH --uid=0", "expdir=a\rb", "expdir=a\u{0}b", "exp\ndir=x"] {
            let (field, message) = parse_one(text).unwrap_err();
            assert!(field == "expdir" || field == "overrides", "{field}");
            assert!(message.contains("control character") && !message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn long_values_are_quoted_by_their_start_only() {
        let long = format!("lr={}", "9".repeat(5000));
        let (_, message) = parse_one(&format!("{long}]")).unwrap_err();
        assert!(message.len() < 400 && message.contains('…'), "{message}");
    }

    #[test]
    fn blames_the_override_or_the_key() {
        let (field, message) = parse_one("lr").unwrap_err();
        assert_eq!((field.as_str(), message.as_str()), ("overrides", "`lr` is not of the form key=value"));
        assert_eq!(parse_one("=3").unwrap_err().0, "overrides");
        let (field, message) = parse_one("img_size=[1, 2").unwrap_err();
        assert_eq!(field, "img_size");
        assert!(message.starts_with("cannot read `[1, 2` as a value: "), "{message}");
        assert!(!message.contains('\n'), "{message}");
    }
}
