//! Training configs: the tutorial's `config/ViT.yaml` keys as a typed [`TrainConfig`], loaded
//! from YAML files of named configs ([`ConfigFile`]), changed by `key=value` overrides,
//! validated against every rule the trainer relies on (all problems at once, each naming its
//! field), and expanded into [`Derived`] numbers.
//!
//! Loading follows the tutorial's `YParams`: YAML 1.2 (so `5E-4` is a float), anchors and
//! merge keys, and the string `None` read as null. Unlike `YParams`, an unknown key is an
//! error: a misspelt key would otherwise be silently ignored by the trainer.

mod data_dir;
mod derived;
mod entries;
mod fields;
mod layout_run;
mod load;
mod overrides;
mod pipeline;
mod schedule;
mod validate;
mod write;

pub use data_dir::{DataPathKind, MAX_STATS_FILE_BYTES, data_dir_overrides};
pub use derived::{Derived, ERA5_TRAIN_SAMPLES, MLP_RATIO, ParamCount, compute_split_shapes, iters_per_epoch, tokens_per_sample};
pub use fields::{
    AmpMode, BenchyTrial, DataLoaderKind, FieldDiff, FieldInfo, FieldKind, FieldOrigin, ModelBackend, Optimizer, PipelineSchedule,
    TrainConfig,
};
pub use layout_run::LayoutRun;
pub use load::ConfigFile;
pub use schedule::{lr_at, sqrt_rule_lr};
pub use validate::{MAX_ZERO_STAGE, zero_stage_problem};
// Where the tutorial's rates are rounded; kept here too, where configs are read.
pub use crate::numbers::round_significant;
pub use write::yaml_value;

/// The config the app starts with: small enough to train visibly on two CPU cores.
pub const DEFAULT_CONFIG: &str = "cpu_short";
/// How the names of the configs sized for a CPU start ([`ConfigFile::cpu_names`]).
pub const CPU_PREFIX: &str = "cpu_";

/// Batches each data-loader worker may hold ready (PyTorch's default `prefetch_factor`): the
/// trainer's queue length, and what an estimate counts in a CPU rank's memory.
pub const PREFETCH_PER_WORKER: usize = 2;
