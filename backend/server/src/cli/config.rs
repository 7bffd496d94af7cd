//! `scalebook config`: what a named config expands to (every key, then the numbers that follow
//! from it for a world size), checked by the same rules the browser and the trainer apply.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use scalebook_shared::Error;
use scalebook_shared::config::{ConfigFile, Derived, TrainConfig, round_significant, yaml_value};
use scalebook_shared::numbers::thousands;

use super::EXIT_INVALID_INPUT;

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print a config with every key and the values derived from it, or every problem in it.
    Show(ShowArgs),
    /// List the configs of a file, each with how it differs from the tutorial's base.
    List(FileArgs),
}

#[derive(Debug, clap::Args)]
pub struct FileArgs {
    /// The YAML file of named configs.
    #[arg(long = "yaml", value_name = "FILE", default_value = "config/ViT.yaml")]
    pub(super) yaml: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The config's name in the file (e.g. base, short, mp).
    name: String,
    #[command(flatten)]
    file: FileArgs,
    /// Override a key, as the tutorial's command-line flags do (repeatable): --set lr=1e-3
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Number of ranks (GPUs or CPU processes); dp = world / (tensor_parallel · context_parallel).
    #[arg(long, default_value_t = 1)]
    world: usize,
    /// Training samples in the dataset (default: the tutorial's ERA5 set, 37,960).
    #[arg(long, value_name = "N")]
    dataset_samples: Option<usize>,
    /// Print `{"name", "config", "derived"}` as JSON instead.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: ConfigCommand) -> anyhow::Result<ExitCode> {
    let result = match cmd {
        ConfigCommand::Show(args) => show(&args),
        ConfigCommand::List(args) => list(&args),
    };
    Ok(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(EXIT_INVALID_INPUT)
        }
    })
}

/// Input the user must fix, worded for the terminal (problems one per line, `field: rule`).
pub(super) struct Invalid(pub(super) String);

impl From<Error> for Invalid {
    fn from(err: Error) -> Self {
        Invalid(err.to_string())
    }
}

impl Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn load(path: &Path) -> Result<ConfigFile, Invalid> {
    let text = std::fs::read_to_string(path).map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
    ConfigFile::parse(&text).map_err(|e| in_file(path, e))
}

pub(super) fn in_file(path: &Path, err: Error) -> Invalid {
    match err {
        Error::Invalid(problems) => Invalid(format!("{}:\n{problems}", path.display())),
        other => Invalid(format!("{}: {other}", path.display())),
    }
}

fn show(args: &ShowArgs) -> Result<(), Invalid> {
    let mut config = load(&args.file.yaml)?.get(&args.name)?;
    config.apply_overrides(&args.set)?;
    let derived = config.derived(args.world, args.dataset_samples)?;
    if args.json {
        let doc = serde_json::json!({ "name": args.name, "config": config, "derived": derived });
        println!("{doc:#}");
    } else {
        print!("{}", config.to_yaml(&args.name));
        print!("{}", describe(&config, &derived));
    }
    Ok(())
}

/// The derived values as YAML comments, so the whole output is still a loadable config file.
fn describe(config: &TrainConfig, d: &Derived) -> String {
    let p = &d.params;
    let [rows, cols] = d.patch_grid;
    let dataset = if d.dataset_assumed { "the tutorial's ERA5 training set" } else { "the dataset" };
    let lines = [
        format!("derived for world {} = tp {} × cp {} × dp {} × pp {}:", d.world, d.tp, d.cp, d.dp, d.pp),
        format!("  global_batch_size: {} ({} per dp rank)", d.global_batch_size, d.local_batch_size),
        format!("  tokens_per_sample: {} ({rows} × {cols} patches)", d.tokens_per_sample),
        format!("  cp_split: {:?}", d.cp_split),
        format!("  head_dim: {} ({} heads per tp rank)", d.head_dim, d.heads_per_tp_rank),
        format!("  mlp_width: {}", d.mlp_width),
        format!(
            "  parameters: {} (patch embed {}, pos embed {}, blocks {}, final norm {}, head {})",
            thousands(p.total),
            thousands(p.patch_embed),
            thousands(p.pos_embed),
            thousands(p.blocks),
            thousands(p.final_norm),
            thousands(p.head)
        ),
        format!("  train_samples: {} (of {} in {dataset})", thousands(d.train_samples as u64), thousands(d.dataset_samples as u64)),
        format!("  iters_per_epoch: {}", d.iters_per_epoch),
        format!("  num_epochs: {} (runs {} of num_iters {} steps)", d.num_epochs, d.steps, config.num_iters),
        format!("  final_lr: {}", rate(d.final_lr)),
        format!("  lr_sqrt_rule: {} (5e-4 · sqrt({} / 16); this config: {})", rate(d.lr_sqrt_rule), d.global_batch_size, rate(config.lr)),
    ];
    lines.iter().map(|line| format!("# {line}\n")).collect()
}

/// A learning rate the way the tutorial writes them (`5e-4`, `3.35803e-7`, `0`).
fn rate(lr: f64) -> String {
    if lr == 0.0 { "0".into() } else { format!("{:e}", round_significant(lr, 6)) }
}

/// Differences shown per config before "+N more".
const DIFFS_SHOWN: usize = 6;

fn list(args: &FileArgs) -> Result<(), Invalid> {
    let file = load(&args.yaml)?;
    let base = TrainConfig::default();
    let width = file.names().map(str::len).max().unwrap_or(0);
    for name in file.names() {
        let diffs = base.diff(&file.get(name)?);
        let mut shown: Vec<String> = diffs.iter().take(DIFFS_SHOWN).map(|d| format!("{}={}", d.field, yaml_value(&d.right))).collect();
        if diffs.len() > DIFFS_SHOWN {
            shown.push(format!("+{} more", diffs.len() - DIFFS_SHOWN));
        }
        let summary = if shown.is_empty() { "(the tutorial's base)".to_owned() } else { shown.join(" ") };
        println!("{name:<width$}  {summary}");
    }
    Ok(())
}
