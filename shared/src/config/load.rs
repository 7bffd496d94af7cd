//! Reading a YAML file of named configs (the tutorial's `config/ViT.yaml` format).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{TrainConfig, entries};
use crate::{Error, Problems};

/// A file of named configs, every one already typed. A file either loads completely or reports
/// every bad key and value in it, so a typo in `base` cannot hide until someone picks a config
/// that merges it.
///
/// As JSON it is the typed configs by name (`/api/configs.json`, which the page reads, so the
/// page needs no YAML reader to start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConfigFile {
    configs: IndexMap<String, TrainConfig>,
}

/// Configs named in an error message before it says "and N more".
const NAMES_SHOWN: usize = 4;

impl ConfigFile {
    /// Parses the YAML text. Anchors and merge keys (`<<: *base`, nested) are resolved by the
    /// YAML reader, which follows YAML 1.2, so `5E-4` is a float as in the tutorial's loader.
    /// Keys a config leaves out take `base`'s values from the tutorial.
    pub fn parse(text: &str) -> Result<ConfigFile, Error> {
        let raw: Option<IndexMap<String, Value>> =
            serde_saphyr::from_str(text).map_err(|e| Error::Parse { what: "config file".into(), message: e.to_string() })?;
        let raw = raw.unwrap_or_default();
        if raw.is_empty() {
            return Err(Error::Parse { what: "config file".into(), message: "it defines no configs".into() });
        }
        let mut problems = Problems::default();
        // (field, message) -> configs where it occurs: a bad key in `base` is merged into every
        // config, and one line naming them all reads better than one line per config.
        let mut bad_entries: IndexMap<(String, String), Vec<&str>> = IndexMap::new();
        let mut configs = IndexMap::new();
        for (name, body) in &raw {
            let Value::Object(body) = body else {
                problems.push(name.as_str(), format!("is not a mapping of keys to values (got {})", entries::show(body)));
                continue;
            };
            let mut good = Map::new();
            for (key, value) in body {
                let value = entries::normalize(value.clone());
                match entries::check(key, &value) {
                    Ok(()) => {
                        good.insert(key.clone(), value);
                    }
                    Err(message) => bad_entries.entry((key.clone(), message)).or_default().push(name),
                }
            }
            configs.insert(name.clone(), good);
        }
        for ((key, message), names) in bad_entries {
            problems.push(key, format!("{message} (in {})", list_configs(&names)));
        }
        if !problems.is_empty() {
            return Err(Error::Invalid(problems));
        }
        let base = TrainConfig::default();
        let configs = configs.into_iter().map(|(name, body)| Ok((name, entries::overlay(&base, body)?))).collect::<Result<_, Error>>()?;
        Ok(ConfigFile { configs })
    }

    /// Config names in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.configs.keys().map(String::as_str)
    }

    /// The configs sized for a CPU (named `cpu_…`, the file's convention): what a sweep runs
    /// here, one run after another, in minutes. The others are the tutorial's GPU configs.
    pub fn cpu_names(&self) -> impl Iterator<Item = &str> {
        self.names().filter(|n| n.starts_with(super::CPU_PREFIX))
    }

    pub fn get(&self, name: &str) -> Result<TrainConfig, Error> {
        self.configs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownConfig { name: crate::excerpt(name), known: self.names().collect::<Vec<_>>().join(", ") })
    }
}

fn list_configs(names: &[&str]) -> String {
    let shown = names.iter().take(NAMES_SHOWN).copied().collect::<Vec<_>>().join(", ");
    match names.len() {
        1 => format!("config {shown}"),
        n if n <= NAMES_SHOWN => format!("configs {shown}"),
        n => format!("configs {shown} and {} more", n - NAMES_SHOWN),
    }
}
