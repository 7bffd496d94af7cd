//! From untyped `key: value` entries (a mapping in the YAML file, a `key=value` override) to a
//! typed [`TrainConfig`]. Every entry is checked on its own, so one bad value never hides
//! another: callers collect one message per bad entry.

use serde_json::{Map, Value};

use super::{FieldKind, TrainConfig};
use crate::Error;

/// The tutorial's loader turns the literal string `None` into Python's `None`; the port does
/// the same for every top-level value so `limit_nsamples: None` means "no limit".
pub(super) fn normalize(value: Value) -> Value {
    match value {
        Value::String(s) if s == "None" => Value::Null,
        other => other,
    }
}

/// Why one entry cannot go into a [`TrainConfig`], in words that name the rule (the caller
/// adds where the entry came from).
pub(super) fn check(key: &str, value: &Value) -> Result<(), String> {
    let Some(info) = TrainConfig::field(key) else {
        return Err(match hint(key) {
            Some(hint) => format!("unknown key; {hint}"),
            None => "unknown key".into(),
        });
    };
    if matches!(info.kind, FieldKind::Count | FieldKind::OptionalCount)
        && let Some(problem) = count_problem(value)
    {
        return Err(problem);
    }
    let single = Map::from_iter([(key.to_owned(), value.clone())]);
    serde_json::from_value::<TrainConfig>(Value::Object(single))
        .map(drop)
        .map_err(|_| format!("expected {}, got {}", info.kind.describe(), show(value)))
}

/// The largest whole number a key takes: the same in the browser (32-bit) and on the server
/// (64-bit), so both refuse the same values for the same reason. Far above any real config.
pub const MAX_COUNT: u64 = u32::MAX as u64;

/// What is wrong with a number given for a whole-number key, when it is a number: negative, too
/// large (YAML reads a long integer as a float: it is shown as the integer it was), or not whole.
fn count_problem(value: &Value) -> Option<String> {
    let number = value.as_f64()?;
    let as_written = value.is_i64() || value.is_u64() || number.fract() != 0.0 || number.abs() >= 1e300;
    let shown = if as_written { show(value) } else { format!("{number:.0}") };
    if number < 0.0 {
        Some(format!("a whole number cannot be negative, got {shown}"))
    } else if number > MAX_COUNT as f64 {
        Some(format!("at most {MAX_COUNT}, got {shown}"))
    } else if number.fract() != 0.0 {
        Some(format!("expected a whole number, got {shown}"))
    } else {
        None
    }
}

/// `base` with `entries` written over it. Entries must have passed [`check`].
pub(super) fn overlay(base: &TrainConfig, entries: Map<String, Value>) -> Result<TrainConfig, Error> {
    let mut map = base.to_json();
    map.extend(entries);
    serde_json::from_value(Value::Object(map)).map_err(|e| Error::Parse { what: "config".into(), message: e.to_string() })
}

/// A value as a YAML user would write it, for error messages.
pub(super) fn show(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

/// Names people reach for that are not keys: the tutorial's own params names for the parallel
/// sizes and Megatron-LM's for the pipeline's.
const ALIASES: &[(&str, &str)] = &[
    ("tp", "did you mean `tensor_parallel`?"),
    ("cp", "did you mean `context_parallel`?"),
    ("order", "did you mean `parallel_order`?"),
    ("pp", "did you mean `pipeline_parallel`?"),
    ("micro_batches", "did you mean `num_micro_batches`?"),
    ("batch_size", "did you mean `global_batch_size` or `local_batch_size`?"),
];

/// A suggestion for a mistyped key: an alias, the closest key within a few edits, or a key that
/// contains what was typed.
fn hint(key: &str) -> Option<String> {
    let lower = key.to_ascii_lowercase();
    if let Some((_, hint)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        return Some((*hint).into());
    }
    let names = TrainConfig::FIELDS.iter().map(|f| f.name);
    let budget = (lower.len() / 4).max(2);
    let closest = names
        .clone()
        .map(|name| (strsim::levenshtein(&lower, name), name))
        .filter(|&(d, _)| d <= budget)
        .min_by_key(|&(d, _)| d)
        .map(|(_, name)| name);
    let containing = || names.clone().find(|name| lower.len() >= 4 && name.contains(lower.as_str()));
    closest.or_else(containing).map(|name| format!("did you mean `{name}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hints_close_keys_aliases_and_substrings() {
        assert_eq!(hint("embd_dim").as_deref(), Some("did you mean `embed_dim`?"));
        assert_eq!(hint("TP").as_deref(), Some("did you mean `tensor_parallel`?"));
        assert_eq!(hint("pp").as_deref(), Some("did you mean `pipeline_parallel`?"));
        assert_eq!(hint("nsamples").as_deref(), Some("did you mean `limit_nsamples`?"));
        assert_eq!(hint("completely_unrelated"), None);
    }

    #[test]
    fn checks_key_and_type_of_one_entry() {
        assert_eq!(check("lr", &json!(1e-3)), Ok(()));
        assert_eq!(check("lr", &json!(1)), Ok(()), "an integer is a valid number");
        assert_eq!(check("limit_nsamples", &Value::Null), Ok(()));
        assert_eq!(check("global_batch_size", &json!(-8)), Err("a whole number cannot be negative, got -8".into()));
        assert_eq!(check("embed_dim", &json!(3.5)), Err("expected a whole number, got 3.5".into()));
        // Too large, the same on 32 and 64 bits, shown as written rather than as a float.
        assert_eq!(check("num_iters", &json!(100_000_000_000u64)), Err(format!("at most {MAX_COUNT}, got 100000000000")));
        assert_eq!(check("embed_dim", &json!(1e20)), Err(format!("at most {MAX_COUNT}, got 100000000000000000000")));
        assert_eq!(check("limit_nsamples", &json!(-1)), Err("a whole number cannot be negative, got -1".into()));
        assert_eq!(check("num_iters", &json!(MAX_COUNT)), Ok(()));
        assert_eq!(check("dropout", &Value::Null), Err("expected a number, got None".into()));
        assert_eq!(check("img_size", &json!([1, 2, 3])), Err("expected a list [H, W] of two whole numbers, got [1,2,3]".into()));
        assert_eq!(check("amp_mode", &json!("fp32")), Err("expected one of none, fp16, bf16, got \"fp32\"".into()));
        assert_eq!(check("nmu_iters", &json!(1)), Err("unknown key; did you mean `num_iters`?".into()));
    }

    #[test]
    fn normalize_maps_only_the_exact_string_none() {
        assert_eq!(normalize(json!("None")), Value::Null);
        assert_eq!(normalize(json!("none")), json!("none"));
        assert_eq!(normalize(json!(["None"])), json!(["None"]));
    }
}
