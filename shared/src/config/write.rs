//! Writing a config back as YAML, in the tutorial's style (`img_size: [360, 720]`,
//! `limit_nsamples: None`), so that what a run records reads like the tutorial's file and
//! loads again with [`ConfigFile::parse`](super::ConfigFile::parse).

use std::fmt::Write as _;

use serde_json::Value;

use super::TrainConfig;

impl TrainConfig {
    /// The config as a one-entry YAML file: `name:` then every field, indented, in field order.
    pub fn to_yaml(&self, name: &str) -> String {
        let values = self.to_json();
        let mut out = format!("{}:\n", scalar_text(name));
        for field in Self::FIELDS {
            if let Some(value) = values.get(field.name) {
                // Writing into a String cannot fail.
                let _ = writeln!(out, "  {}: {}", field.name, yaml_value(value));
            }
        }
        out
    }
}

/// One value as the YAML files (and `key=value` overrides) write it: `None`, `[360, 720]`,
/// `0.0005`, `env`, `'a: b'`.
pub fn yaml_value(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::String(s) => scalar_text(s),
        Value::Array(items) => format!("[{}]", items.iter().map(yaml_value).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// A string written plain when it reads back as the same string (`env`, `/data/train`),
/// single-quoted otherwise (`'true'`, `'1e-3'`, `'a: b'`, `''`), and double-quoted with escapes
/// when it holds a control character (a newline would fold into a space inside single quotes,
/// so the file would not read back). The string `None` cannot be kept: like the tutorial's
/// loader, ours reads it as null however it is quoted.
fn scalar_text(s: &str) -> String {
    if s.contains(char::is_control) {
        // JSON's string escapes (`\n`, `\"`, `\u0000`) are YAML's double-quoted ones.
        return serde_json::to_string(s).unwrap_or_default();
    }
    let plain_reads_back = !s.contains(['\'', '"', '#', ':', '[', ']', '{', '}', ',', '\n'])
        && serde_saphyr::from_str::<Value>(s).is_ok_and(|v| v.as_str() == Some(s));
    if plain_reads_back { s.to_owned() } else { format!("'{}'", s.replace('\'', "''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_strings_that_would_read_back_differently() {
        assert_eq!(scalar_text("env"), "env");
        assert_eq!(scalar_text("/data/stats/global_means.npy"), "/data/stats/global_means.npy");
        assert_eq!(scalar_text("true"), "'true'");
        assert_eq!(scalar_text("5E-4"), "'5E-4'");
        assert_eq!(scalar_text(""), "''");
        assert_eq!(scalar_text("it's: odd"), "'it''s: odd'");
    }

    #[test]
    fn every_string_reads_back_as_written() {
        for s in ["a\nb", "tab\there", "nul\u{0}", "quote \" and \\ back", "#SBATCH\n--uid=0", "x: y", "*alias", "&anchor", "- item"] {
            let config = TrainConfig { expdir: s.to_owned(), ..TrainConfig::default() };
            let file = super::super::ConfigFile::parse(&config.to_yaml("run")).unwrap();
            assert_eq!(file.get("run").unwrap().expdir, s, "{}", config.to_yaml("run"));
        }
    }

    #[test]
    fn writes_tutorial_style_values() {
        let yaml = TrainConfig::default().to_yaml("base");
        assert!(yaml.starts_with("base:\n  embed_dim: 384\n"), "{yaml}");
        for line in ["  img_size: [360, 720]", "  limit_nsamples: None", "  amp_mode: none", "  lr: 0.0005"] {
            assert!(yaml.lines().any(|l| l == line), "missing {line:?} in\n{yaml}");
        }
    }
}
