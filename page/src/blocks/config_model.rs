//! The config editor's model, without the page: the text of every field (what the form shows
//! and the YAML view writes), checked as a whole on every change with `shared`'s own rules.
//!
//! The form and the YAML are two views of the same field texts. A field's text is read the way
//! a `key=value` override is, so a bad value is reported against its field and the other
//! fields are still checked: one typo never hides another problem.

use indexmap::IndexMap;
use scalebook_shared::Problems;
use scalebook_shared::config::{FieldDiff, TrainConfig, yaml_value};
use scalebook_shared::launch::machine_memory_problems;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    name: String,
    /// The config as the file defines it: what "changes" are measured against.
    named: TrainConfig,
    /// One text per entry of `TrainConfig::FIELDS`.
    texts: Vec<String>,
    /// Keys the YAML view holds that are not fields (each is reported as a problem).
    extra: Vec<(String, String)>,
}

/// The draft, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The named config with every readable field text applied.
    pub config: TrainConfig,
    pub problems: Problems,
    /// The fields that differ from the named config.
    pub changes: Vec<FieldDiff>,
    /// The run's ranks: tp × cp × dp.
    pub world: usize,
}

impl Draft {
    pub fn new(name: &str, named: TrainConfig) -> Draft {
        let texts = texts_of(&named);
        Draft { name: name.to_owned(), named, texts, extra: Vec::new() }
    }

    pub fn text(&self, field: &str) -> String {
        index_of(field).map(|i| self.texts[i].clone()).unwrap_or_default()
    }

    pub fn set(&mut self, field: &str, text: String) {
        if let Some(i) = index_of(field) {
            self.texts[i] = text;
        }
    }

    /// Applies `key=value` overrides as [`launch_overrides`] writes them (the edits a learner
    /// made before leaving the chapter), each to its field; unknown keys are kept as extra keys,
    /// where the check names them.
    pub fn apply(&mut self, overrides: &[String]) {
        for (key, value) in overrides.iter().filter_map(|o| o.split_once('=')) {
            match index_of(key) {
                Some(i) => self.texts[i] = value.to_owned(),
                None => self.extra.push((key.to_owned(), value.to_owned())),
            }
        }
    }

    /// Every field text that differs from the named config's, and every extra key, as
    /// `key=value` overrides.
    fn edits(&self) -> Vec<String> {
        let named = texts_of(&self.named);
        let fields = TrainConfig::FIELDS.iter().zip(&self.texts).zip(named);
        let changed = fields.filter(|((_, text), named)| **text != *named).map(|((f, text), _)| format!("{}={text}", f.name));
        changed.chain(self.extra.iter().map(|(k, v)| format!("{k}={v}"))).collect()
    }

    /// Applies every readable edit, and checks the result for a run on `dp` data-parallel
    /// ranks (with the config's own tp and cp); on this server's machine (`machine`: its
    /// memory in bytes), also against the bound a launch there is refused by, so a model too
    /// large for it is named as it is typed, not at Launch.
    pub fn check(&self, dp: u32, machine: Option<u64>) -> Checked {
        let mut problems = Problems::default();
        let mut readable = Vec::new();
        for edit in self.edits() {
            match self.named.clone().apply_overrides(std::slice::from_ref(&edit)) {
                Ok(()) => readable.push(edit),
                Err(e) => problems.0.extend(e.problems().0),
            }
        }
        let mut config = self.named.clone();
        if let Err(e) = config.apply_overrides(&readable) {
            problems.0.extend(e.problems().0);
        }
        let world = config.world(dp as usize);
        if let Err(e) = config.validate(world) {
            problems.0.extend(e.problems().0);
        }
        let changes = self.named.diff(&config);
        if let Some(memory_bytes) = machine {
            let ranks = u32::try_from(world).unwrap_or(u32::MAX);
            problems.0.extend(machine_memory_problems(&config, ranks, memory_bytes, &launch_overrides(&changes)).0);
        }
        Checked { config, problems, changes, world }
    }

    /// The draft as a YAML document of one config.
    pub fn to_yaml(&self) -> String {
        let mut out = format!("{}:\n", self.name);
        for (field, text) in TrainConfig::FIELDS.iter().zip(&self.texts) {
            out.push_str(&format!("  {}: {text}\n", field.name));
        }
        for (key, text) in &self.extra {
            out.push_str(&format!("  {key}: {text}\n"));
        }
        out
    }

    /// Takes every field from a YAML document: one config (`name:` then its keys) or a plain
    /// mapping of keys. A field the document leaves out goes back to the named config's value.
    /// On a syntax error the draft is unchanged and the parser's message is returned.
    pub fn read_yaml(&mut self, yaml: &str) -> Result<(), String> {
        let top: IndexMap<String, Value> = serde_saphyr::from_str::<Option<IndexMap<String, Value>>>(yaml)
            .map_err(|e| e.to_string().lines().next().unwrap_or("not YAML").to_owned())?
            .unwrap_or_default();
        let entries = match top.first() {
            Some((key, Value::Object(body))) if top.len() == 1 && TrainConfig::field(key).is_none() => body.clone().into_iter().collect(),
            _ => top,
        };
        let mut texts = texts_of(&self.named);
        let mut extra = Vec::new();
        for (key, value) in entries {
            let text = yaml_value(&value);
            match index_of(&key) {
                Some(i) => texts[i] = text,
                None => extra.push((key, text)),
            }
        }
        self.texts = texts;
        self.extra = extra;
        Ok(())
    }
}

/// The changes as the overrides a launch sends.
pub fn launch_overrides(changes: &[FieldDiff]) -> Vec<String> {
    changes.iter().map(|c| format!("{}={}", c.field, yaml_value(&c.right))).collect()
}

fn texts_of(config: &TrainConfig) -> Vec<String> {
    let values = config.to_json();
    TrainConfig::FIELDS.iter().map(|f| values.get(f.name).map(yaml_value).unwrap_or_default()).collect()
}

fn index_of(field: &str) -> Option<usize> {
    TrainConfig::FIELDS.iter().position(|f| f.name == field)
}

#[cfg(test)]
mod tests {
    use scalebook_shared::config::ConfigFile;

    use super::*;

    const CONFIGS: &str = include_str!("../../shipped/ViT.yaml");

    fn draft(name: &str) -> Draft {
        Draft::new(name, ConfigFile::parse(CONFIGS).unwrap().get(name).unwrap())
    }

    fn fields(problems: &Problems) -> Vec<&str> {
        problems.0.iter().map(|p| p.field.as_str()).collect()
    }

    #[test]
    fn an_untouched_config_is_valid_and_unchanged() {
        let checked = draft("cpu_short").check(1, None);
        assert!(checked.problems.is_empty(), "{}", checked.problems);
        assert!(checked.changes.is_empty());
        assert_eq!(checked.world, 1);
    }

    #[test]
    fn each_bad_field_is_reported_and_the_rest_still_checked() {
        let mut d = draft("cpu_short");
        d.set("embed_dim", "130".into());
        d.set("depth", "lots".into());
        let checked = d.check(1, None);
        assert_eq!(fields(&checked.problems), ["depth", "embed_dim"], "{}", checked.problems);
        assert!(checked.problems.0[1].message.contains("not divisible by num_heads 4"));
        // The readable edit is applied; the unreadable one is not.
        assert_eq!(checked.config.embed_dim, 130);
        assert_eq!(launch_overrides(&checked.changes), ["embed_dim=130"]);
    }

    #[test]
    fn edits_read_back_from_their_overrides_are_the_same_edits() {
        let mut d = draft("cpu_short");
        d.set("embed_dim", "96".into());
        d.set("lr", "5E-4".into());
        let overrides = launch_overrides(&d.check(1, None).changes);
        let mut back = draft("cpu_short");
        back.apply(&overrides);
        assert_eq!(launch_overrides(&back.check(1, None).changes), overrides);
        assert_eq!(back.text("embed_dim"), "96");
    }

    #[test]
    fn the_world_comes_from_tp_cp_and_dp() {
        let mut d = draft("cpu_short");
        d.set("global_batch_size", "6".into());
        let checked = d.check(4, None);
        assert_eq!(checked.world, 4);
        assert!(checked.problems.0.iter().any(|p| p.field == "global_batch_size" && p.message.contains("dp 4")), "{}", checked.problems);
    }

    #[test]
    fn a_model_too_large_for_this_machine_is_named_as_it_is_typed() {
        const MACHINE: Option<u64> = Some(24 << 30);
        let mut d = draft("cpu_short");
        assert!(d.check(1, MACHINE).problems.is_empty());
        // A valid config, which no launch here would take: named at its field, with the rule.
        d.set("embed_dim", "65536".into());
        let checked = d.check(1, MACHINE);
        assert_eq!(fields(&checked.problems), ["embed_dim"], "{}", checked.problems);
        let message = &checked.problems.0[0].message;
        assert!(message.contains("for weights, gradients and Adam state") && message.contains("this machine has 24 GiB"), "{message}");
        assert!(d.check(1, None).problems.is_empty(), "not checked for a run elsewhere");
        // About 48 trillion parameters, both sizes changed: the later field of the form.
        d.set("depth", "930".into());
        let checked = d.check(1, MACHINE);
        assert_eq!(fields(&checked.problems), ["depth"], "{}", checked.problems);
        assert!(checked.problems.0[0].message.starts_with("a model of 479"), "{}", checked.problems);
        // The bound counts every rank.
        assert!(draft("cpu_short").check(4, Some(1 << 50)).problems.is_empty());
        assert_eq!(fields(&draft("cpu_short").check(4, Some(1 << 20)).problems), ["depth"]);
    }

    #[test]
    fn yaml_and_form_are_two_views_of_the_same_texts() {
        let mut d = draft("cpu_tiny");
        let yaml = d.to_yaml().replace("  depth: 2\n", "  depth: 3\n").replace("  lr: 0.00025\n", "  lr: 5E-4\n");
        d.read_yaml(&yaml).unwrap();
        assert_eq!(d.text("depth"), "3");
        let checked = d.check(1, None);
        assert_eq!(launch_overrides(&checked.changes), ["depth=3", "lr=0.0005"]);
        // Reading back what it writes changes nothing.
        let before = d.clone();
        d.read_yaml(&before.to_yaml()).unwrap();
        assert_eq!(d, before);
    }

    #[test]
    fn yaml_keys_left_out_revert_and_unknown_keys_are_problems() {
        let mut d = draft("cpu_tiny");
        d.set("depth", "7".into());
        d.read_yaml("embed_dim: 96\nnum_iter: 3\n").unwrap();
        assert_eq!(d.text("depth"), "2", "a key left out goes back to the named value");
        let checked = d.check(1, None);
        assert_eq!(checked.config.embed_dim, 96);
        let unknown = checked.problems.0.iter().find(|p| p.field == "num_iter").unwrap();
        assert!(unknown.message.contains("did you mean `num_iters`"), "{unknown}");
    }

    #[test]
    fn broken_yaml_leaves_the_draft_alone() {
        let mut d = draft("cpu_tiny");
        let before = d.clone();
        assert!(d.read_yaml("cpu_tiny:\n  depth: [1, 2\n").is_err());
        assert_eq!(d, before);
    }
}
