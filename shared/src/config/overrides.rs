//! `key=value` overrides: the tutorial's command-line flags, generalised to every key, and what
//! the browser sends with a launch instead of a whole config.

use serde_json::{Map, Value};

use super::{TrainConfig, entries};
use crate::{Error, Problems};

/// The field problems about a malformed override are reported against.
const OVERRIDES_FIELD: &str = "overrides";

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
                    Err(message) => problems.push(key, format!("{message} (override `{text}`)")),
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
        return Err((OVERRIDES_FIELD.into(), format!("`{text}` is not of the form key=value")));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err((OVERRIDES_FIELD.into(), format!("`{text}` has no key before `=`")));
    }
    let value = serde_saphyr::from_str::<Value>(value.trim()).map_err(|e| {
        let reason = e.to_string();
        let reason = reason.lines().next().unwrap_or_default().trim_start_matches("error: ");
        (key.to_owned(), format!("cannot read `{}` as a value: {reason}", value.trim()))
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
