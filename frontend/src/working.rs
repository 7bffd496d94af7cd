//! A chapter's working config: the config its blocks are about, with the learner's changes.
//! The editor writes it; the run block launches it; so what is launched is what was edited.
//! It is kept in the browser's storage per chapter, so edits survive leaving the chapter (and a
//! reload): the learner comes back to the config they left.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::storage;

/// What is kept of a chapter's working config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Kept {
    name: String,
    overrides: Vec<String>,
    dp: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct WorkingConfig {
    /// The config's name; the first block that names one sets it.
    pub name: RwSignal<Option<String>>,
    /// The learner's changes as `key=value` overrides of the named config.
    pub overrides: RwSignal<Vec<String>>,
    /// How many problems the edited config has (a launch waits until there are none).
    pub problems: RwSignal<usize>,
    /// Data-parallel ranks to run it on.
    pub dp: RwSignal<u32>,
    /// Where the run block sends it: [`LOCAL`] or a Slurm cluster's name (the editor checks
    /// it against this machine only when it runs here).
    pub target: RwSignal<String>,
}

/// The run block's target for this machine.
pub const LOCAL: &str = "local";

impl WorkingConfig {
    pub fn new() -> WorkingConfig {
        WorkingConfig {
            name: RwSignal::new(None),
            overrides: RwSignal::new(Vec::new()),
            problems: RwSignal::new(0),
            dp: RwSignal::new(1),
            target: RwSignal::new(LOCAL.to_owned()),
        }
    }

    /// The chapter's working config, taking `name` and `dp` if no block has named one yet.
    pub fn claim(name: &str, dp: u32) -> WorkingConfig {
        let working = use_context::<WorkingConfig>().unwrap_or_else(WorkingConfig::new);
        if working.name.get_untracked().is_none() {
            working.name.set(Some(name.to_owned()));
            working.dp.set(dp);
        }
        working
    }

    /// Chapter `slug`'s working config as the learner left it (a new one if they never edited
    /// it), kept from now on as it changes.
    pub fn for_chapter(slug: &str) -> WorkingConfig {
        let working = WorkingConfig::new();
        let key = format!("scalebook-working-config:{slug}");
        if let Some(kept) = storage::load_json::<Kept>(&key) {
            working.name.set(Some(kept.name));
            working.overrides.set(kept.overrides);
            working.dp.set(kept.dp);
        }
        Effect::new(move |_| {
            let Some(name) = working.name.get() else { return };
            storage::keep_json(&key, &Kept { name, overrides: working.overrides.get(), dp: working.dp.get() });
        });
        working
    }

    /// Switches to another config, dropping the changes made to the previous one.
    pub fn switch(&self, name: String) {
        if self.name.get_untracked().as_deref() != Some(name.as_str()) {
            self.overrides.set(Vec::new());
            self.problems.set(0);
            self.name.set(Some(name));
        }
    }
}
