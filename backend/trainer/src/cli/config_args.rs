//! The config flags every training subcommand shares: the tutorial's `--yaml_config` and
//! `--config`, `--set key=value` for everything its other flags did, and `--profile`.

use std::path::PathBuf;

use anyhow::Context;
use scalebook_shared::config::{ConfigFile, DEFAULT_CONFIG, TrainConfig};

#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// YAML file of named configs.
    #[arg(long, default_value = "config/ViT.yaml")]
    pub yaml_config: PathBuf,
    /// Name of the config in that file.
    #[arg(long, default_value = DEFAULT_CONFIG)]
    pub config: String,
    /// Override a config key, e.g. `--set amp_mode=bf16 --set num_iters=64`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Record steps START:END (like a Python slice: `5:8` is steps 5, 6 and 7) with libtorch's
    /// profiler on every rank, into `profile/rank{R}.trace.json` of the run directory; the
    /// config key `profile`.
    #[arg(long, value_name = "STEPS")]
    pub profile: Option<String>,
}

impl ConfigArgs {
    /// The effective config, validated for `world` ranks. Every problem is reported at once.
    pub fn load(&self, world: usize) -> anyhow::Result<TrainConfig> {
        let text = std::fs::read_to_string(&self.yaml_config)
            .with_context(|| format!("cannot read config file {}", self.yaml_config.display()))?;
        let file = ConfigFile::parse(&text).with_context(|| format!("in {}", self.yaml_config.display()))?;
        let mut config = file.get(&self.config)?;
        config.apply_overrides(&self.overrides)?;
        if let Some(steps) = &self.profile {
            config.profile = steps.clone();
        }
        config.validate(world)?;
        Ok(config)
    }
}
