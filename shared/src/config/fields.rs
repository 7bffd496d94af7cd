//! The typed training config and the metadata that lets a form, the overrides parser and the
//! error messages talk about its fields without repeating the list.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Mixed precision for the forward pass and the loss (`torch.autocast`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AmpMode {
    /// fp32 (with TF32 matmuls where the hardware has them).
    #[default]
    None,
    /// fp16 with dynamic loss scaling.
    Fp16,
    /// bf16, no loss scaling needed.
    Bf16,
}

impl AmpMode {
    pub const NAMES: &'static [&'static str] = &["none", "fp16", "bf16"];
}

/// The sc23/sc24/sc25 data-loader switch. Scalebook has one loader; the key exists so that
/// those editions' files load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataLoaderKind {
    #[default]
    Pytorch,
    Dali,
}

impl DataLoaderKind {
    pub const NAMES: &'static [&'static str] = &["pytorch", "dali"];
}

/// The sc25 model-implementation switch. Scalebook has one ViT; the key exists so that sc25's
/// file loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ModelBackend {
    #[default]
    #[serde(rename = "pytorch")]
    Pytorch,
    #[serde(rename = "transformer-engine")]
    TransformerEngine,
}

impl ModelBackend {
    pub const NAMES: &'static [&'static str] = &["pytorch", "transformer-engine"];
}

/// The optimizer. The tutorial trains with Adam; SC22's "putting it all together" challenge
/// invites others, so AdamW and SGD with momentum are there to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Optimizer {
    /// betas 0.9/0.95, eps 1e-8, no weight decay.
    #[default]
    Adam,
    /// Adam with decoupled weight decay 0.01 (PyTorch's default).
    AdamW,
    /// SGD with momentum 0.9.
    #[serde(rename = "SGD")]
    Sgd,
}

impl Optimizer {
    pub const NAMES: &'static [&'static str] = &["Adam", "AdamW", "SGD"];
}

/// SC22's benchy trials: time the data loading alone, the training step alone on one cached
/// batch, or both as in a real run, to see which one bounds the throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchyTrial {
    /// A real run.
    #[default]
    Full,
    /// Only the loader: batches are read and dropped, no step, no validation.
    Io,
    /// Only the steps, all on the first batch, which is read once.
    Synthetic,
}

impl BenchyTrial {
    pub const NAMES: &'static [&'static str] = &["full", "io", "synthetic"];
}

/// The order a pipeline stage runs its micro-batches' forward and backward passes in
/// ([`crate::pipeline::Schedule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PipelineSchedule {
    /// Every forward, then every backward (GPipe).
    #[serde(rename = "gpipe")]
    GPipe,
    /// Fill the pipeline, then one forward and one backward (PipeDream-Flush, Megatron's).
    #[default]
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// 1F1B over `virtual_pipeline_stages` model chunks per rank (Megatron's interleaving).
    #[serde(rename = "interleaved")]
    Interleaved,
}

impl PipelineSchedule {
    pub const NAMES: &'static [&'static str] = &["gpipe", "1f1b", "interleaved"];
    pub const ALL: [PipelineSchedule; 3] = [PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved];

    /// The name a config writes.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// One training config. Field names are the tutorial's keys, so a `config/ViT.yaml` from the
/// tutorial loads unchanged and the names users read in the tutorial are the names they edit.
///
/// `Default` is the tutorial's `base` config (with the trainers' command-line defaults), which
/// is what a key left out of a config falls back to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    pub embed_dim: usize,
    pub depth: usize,
    pub dropout: f64,
    pub patch_size: usize,
    pub num_heads: usize,
    /// `[H, W]`: the crop read from every sample.
    pub img_size: [usize; 2],
    pub dt: usize,
    pub global_batch_size: usize,
    pub num_iters: usize,
    pub amp_mode: AmpMode,
    pub enable_jit: bool,
    pub expdir: String,
    pub lr_schedule: String,
    pub lr: f64,
    pub warmup: usize,
    pub optimizer: Optimizer,
    pub num_data_workers: usize,
    pub n_in_channels: usize,
    pub n_out_channels: usize,
    pub train_data_path: String,
    pub valid_data_path: String,
    pub inf_data_path: String,
    pub time_means_path: String,
    pub global_means_path: String,
    pub global_stds_path: String,
    pub limit_nsamples: Option<usize>,
    pub limit_nsamples_val: Option<usize>,
    pub wireup_info: String,
    pub wireup_store: String,
    pub tensor_parallel: usize,
    pub context_parallel: usize,
    pub parallel_order: String,
    /// When set, replaces the global batch by `dp × local_batch_size`, as the tutorial's
    /// `--local_batch_size` flag does.
    pub local_batch_size: Option<usize>,
    pub enable_fused: bool,
    pub data_loader_config: DataLoaderKind,
    pub enable_apex: bool,
    pub model_backend: ModelBackend,
    /// DDP's gradient bucket size, in MB (SC22's `--bucket_cap_mb`).
    pub bucket_cap_mb: f64,
    /// The size, in MB, at which DDP closes its first gradient bucket, the one backward fills
    /// first (`torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`, 1 MiB): small, so the last
    /// layers' gradients set off at once instead of waiting for a whole `bucket_cap_mb`.
    pub first_bucket_cap_mb: f64,
    /// SC22's `--disable_broadcast_buffers`.
    pub disable_broadcast_buffers: bool,
    /// SC22's `--noddp`: no gradient all-reduce, to measure what it costs.
    pub noddp: bool,
    /// All-reduce each gradient bucket during backward as soon as it is full, as DDP does
    /// (Megatron's `--overlap-grad-reduce`); false waits for the whole backward first.
    pub overlap_grad_reduce: bool,
    /// Micro-batches per step: each rank's batch is run through forward and backward in this
    /// many slices whose gradients add up before the one all-reduce (DDP's `no_sync`).
    pub gradient_accumulation_steps: usize,
    /// Recompute each block's activations in backward instead of keeping them
    /// (`torch.utils.checkpoint` around every block).
    pub activation_checkpointing: bool,
    /// ZeRO over the data-parallel group: 0 is DDP (every dp rank holds everything); 1 shards
    /// Adam's moments over dp, 2 also the gradients (reduce-scatter in place of all-reduce),
    /// 3 also the parameters (each block gathered before its forward and its backward, FSDP).
    pub zero_stage: usize,
    /// pp: pipeline stages, each a run of consecutive blocks (the patch embedding with the
    /// first, the head and the loss with the last); Megatron-LM's
    /// `--pipeline-model-parallel-size`. The tutorial draws it but never trains it.
    pub pipeline_parallel: usize,
    /// Micro-batches each dp rank's batch is cut into for the pipeline (pp > 1); Megatron's
    /// number of micro-batches. With pp = 1 accumulation is `gradient_accumulation_steps`.
    pub num_micro_batches: usize,
    pub pipeline_schedule: PipelineSchedule,
    /// Model chunks per rank under the interleaved schedule (Megatron's virtual stages).
    pub virtual_pipeline_stages: usize,
    /// With 0 workers, read a batch's samples one after another on the training thread, as
    /// the tutorial's `DataLoader` does; otherwise they are spread over the compute threads.
    pub serial_read: bool,
    pub benchy_trial: BenchyTrial,
    /// Steps to record with libtorch's profiler on every rank, `START:END` like a Python slice
    /// ([`crate::profile::StepWindow`]); empty records none.
    pub profile: String,
}

impl Default for TrainConfig {
    fn default() -> Self {
        let data = |rest: &str| format!("/data/{rest}");
        TrainConfig {
            embed_dim: 384,
            depth: 12,
            dropout: 0.0,
            patch_size: 8,
            num_heads: 8,
            img_size: [360, 720],
            dt: 1,
            global_batch_size: 16,
            num_iters: 30000,
            amp_mode: AmpMode::None,
            enable_jit: false,
            expdir: "/logs".into(),
            lr_schedule: "cosine".into(),
            lr: 5e-4,
            warmup: 0,
            optimizer: Optimizer::Adam,
            num_data_workers: 0,
            n_in_channels: 20,
            n_out_channels: 20,
            train_data_path: data("train"),
            valid_data_path: data("valid"),
            inf_data_path: data("test"),
            time_means_path: data("stats/time_means.npy"),
            global_means_path: data("stats/global_means.npy"),
            global_stds_path: data("stats/global_stds.npy"),
            limit_nsamples: None,
            limit_nsamples_val: None,
            wireup_info: "env".into(),
            wireup_store: "tcp".into(),
            tensor_parallel: 1,
            context_parallel: 1,
            parallel_order: crate::layout::DEFAULT_ORDER.into(),
            local_batch_size: None,
            enable_fused: false,
            data_loader_config: DataLoaderKind::Pytorch,
            enable_apex: false,
            model_backend: ModelBackend::Pytorch,
            bucket_cap_mb: 25.0,
            first_bucket_cap_mb: 1.0,
            disable_broadcast_buffers: false,
            noddp: false,
            overlap_grad_reduce: true,
            gradient_accumulation_steps: 1,
            activation_checkpointing: false,
            zero_stage: 0,
            pipeline_parallel: 1,
            num_micro_batches: 1,
            pipeline_schedule: PipelineSchedule::OneFOneB,
            virtual_pipeline_stages: 2,
            serial_read: false,
            benchy_trial: BenchyTrial::Full,
            profile: String::new(),
        }
    }
}

/// What values a field takes; drives the form widget and the "expected ..." of type errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "choices", rename_all = "snake_case")]
pub enum FieldKind {
    Count,
    Number,
    Bool,
    Text,
    OptionalCount,
    ImageSize,
    Choice(&'static [&'static str]),
}

impl FieldKind {
    /// The accepted values in words, as error messages say "expected ...".
    pub fn describe(self) -> String {
        match self {
            FieldKind::Count => "a whole number".into(),
            FieldKind::Number => "a number".into(),
            FieldKind::Bool => "true or false".into(),
            FieldKind::Text => "a string".into(),
            FieldKind::OptionalCount => "a whole number or None".into(),
            FieldKind::ImageSize => "a list [H, W] of two whole numbers".into(),
            FieldKind::Choice(names) => format!("one of {}", names.join(", ")),
        }
    }
}

/// Where a key comes from, so the form can group them the way the tutorial presents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldOrigin {
    /// A key of the tutorial's `config/ViT.yaml` (dl4sci25).
    Yaml,
    /// A command-line flag of `train_mp.py` that the tutorial writes into its params.
    CommandLine,
    /// A key only the sc23/sc24/sc25 editions have; accepted so their files load.
    Edition,
    /// A knob of SC22's trainer (DDP tuning, benchy) that the chapters experiment with.
    Tuning,
    /// Pipeline stages, which the tutorial draws but does not train (Megatron-LM's names).
    Pipeline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FieldInfo {
    pub name: &'static str,
    pub kind: FieldKind,
    pub origin: FieldOrigin,
    pub doc: &'static str,
}

const fn field(name: &'static str, kind: FieldKind, origin: FieldOrigin, doc: &'static str) -> FieldInfo {
    FieldInfo { name, kind, origin, doc }
}

impl TrainConfig {
    /// Every field in declaration order (the tutorial's key order, then the flags, then the
    /// later editions' keys).
    pub const FIELDS: &'static [FieldInfo] = {
        use FieldKind::*;
        use FieldOrigin::*;
        &[
            field("embed_dim", Count, Yaml, "token width D of the transformer"),
            field("depth", Count, Yaml, "number of transformer blocks"),
            field("dropout", Number, Yaml, "dropout, attention dropout and stochastic-depth rate"),
            field("patch_size", Count, Yaml, "side of the square patches the image is cut into"),
            field("num_heads", Count, Yaml, "attention heads; head_dim = embed_dim / num_heads"),
            field("img_size", ImageSize, Yaml, "[H, W] crop read from every sample"),
            field("dt", Count, Yaml, "target = input time index + dt (one step is 6 hours)"),
            field("global_batch_size", Count, Yaml, "samples per optimizer step over all dp ranks"),
            field("num_iters", Count, Yaml, "LR-schedule horizon; epochs = num_iters // iterations per epoch"),
            field("amp_mode", Choice(AmpMode::NAMES), Yaml, "mixed precision: none, fp16 (loss scaling) or bf16"),
            field("enable_jit", Bool, Yaml, "what compiling fuses: fused Adam and one q/k/v matrix product"),
            field("expdir", Text, Yaml, "root directory of the run outputs"),
            field("lr_schedule", Text, Yaml, "learning-rate schedule; the tutorial handles only cosine"),
            field("lr", Number, Yaml, "Adam base learning rate"),
            field("warmup", Count, Yaml, "linear warm-up steps (0: plain cosine)"),
            field("optimizer", Choice(Optimizer::NAMES), Yaml, "Adam (the tutorial's), AdamW or SGD with momentum"),
            field("num_data_workers", Count, Yaml, "data-loading workers per rank"),
            field("n_in_channels", Count, Yaml, "model input channels (20 ERA5 variables)"),
            field("n_out_channels", Count, Yaml, "model output channels"),
            field("train_data_path", Text, Yaml, "directory of the training *.h5 files"),
            field("valid_data_path", Text, Yaml, "directory of the validation *.h5 files"),
            field("inf_data_path", Text, Yaml, "directory of the test files (unused)"),
            field("time_means_path", Text, Yaml, "time-mean statistics (unused)"),
            field("global_means_path", Text, Yaml, "per-channel means used to normalise"),
            field("global_stds_path", Text, Yaml, "per-channel standard deviations used to normalise"),
            field("limit_nsamples", OptionalCount, Yaml, "cap on the number of training samples"),
            field("limit_nsamples_val", OptionalCount, Yaml, "cap on the number of validation samples"),
            field("wireup_info", Text, Yaml, "process-group wire-up source (unused since sc24)"),
            field("wireup_store", Text, Yaml, "process-group rendezvous store (unused since sc24)"),
            field("tensor_parallel", Count, CommandLine, "tp: ranks that split every weight matrix"),
            field("context_parallel", Count, CommandLine, "cp: ranks that split the token sequence"),
            field("parallel_order", Text, CommandLine, "rank order, fastest varying first, e.g. tp-cp-dp"),
            field("local_batch_size", OptionalCount, CommandLine, "per-dp-rank batch; when set, global = dp × local"),
            field("enable_fused", Bool, Edition, "fused Adam (sc23/sc24/sc25 key)"),
            field("data_loader_config", Choice(DataLoaderKind::NAMES), Edition, "sc23/sc24/sc25 loader switch; Scalebook has one loader"),
            field("enable_apex", Bool, Edition, "sc23 key, unused"),
            field("model_backend", Choice(ModelBackend::NAMES), Edition, "sc25 model switch; Scalebook has one ViT"),
            field("bucket_cap_mb", Number, Tuning, "DDP gradient bucket size in MB: fewer, larger all-reduces when bigger"),
            field(
                "first_bucket_cap_mb",
                Number,
                Tuning,
                "size in MB at which DDP closes its first gradient bucket (the last layers'), 1 MiB as PyTorch's",
            ),
            field("disable_broadcast_buffers", Bool, Tuning, "skip DDP's per-step broadcast of buffers (none in the ViT)"),
            field("noddp", Bool, Tuning, "skip the gradient all-reduce, to measure its cost (replicas drift apart)"),
            field(
                "overlap_grad_reduce",
                Bool,
                Tuning,
                "all-reduce each gradient bucket during backward, as soon as it is full (DDP's overlap)",
            ),
            field(
                "gradient_accumulation_steps",
                Count,
                Tuning,
                "micro-batches per step, gradients added up before one all-reduce (DDP's no_sync)",
            ),
            field(
                "activation_checkpointing",
                Bool,
                Tuning,
                "recompute each block's activations in backward: less memory, one more forward pass",
            ),
            field(
                "zero_stage",
                Count,
                Tuning,
                "ZeRO over dp: 0 DDP, 1 shards Adam's moments, 2 also the gradients, 3 also the weights (FSDP)",
            ),
            field("pipeline_parallel", Count, Pipeline, "pp: pipeline stages, each a run of consecutive blocks"),
            field("num_micro_batches", Count, Pipeline, "micro-batches a dp rank's batch is cut into for the pipeline (pp > 1)"),
            field(
                "pipeline_schedule",
                Choice(PipelineSchedule::NAMES),
                Pipeline,
                "gpipe (all forwards, then all backwards), 1f1b, or interleaved (virtual stages per rank)",
            ),
            field("virtual_pipeline_stages", Count, Pipeline, "model chunks per rank under the interleaved schedule (2 or more)"),
            field(
                "serial_read",
                Bool,
                Tuning,
                "with 0 workers, read a batch's samples one by one on the training thread, as the tutorial's loader does",
            ),
            field("benchy_trial", Choice(BenchyTrial::NAMES), Tuning, "full run, io (loading only) or synthetic (steps on one batch)"),
            field("profile", Text, Tuning, "steps to profile on every rank, START:END like a Python slice (5:8 is 5, 6, 7); empty: none"),
        ]
    };

    pub fn field(name: &str) -> Option<&'static FieldInfo> {
        Self::FIELDS.iter().find(|f| f.name == name)
    }

    /// The config as a JSON object keyed by field name. Serialising numbers, strings and unit
    /// enums into a `Value` cannot fail, so the empty fallback is never taken in practice.
    pub fn to_json(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }

    /// The fields whose values differ, in field order (what "diff against base" shows).
    pub fn diff(&self, other: &TrainConfig) -> Vec<FieldDiff> {
        let (left, right) = (self.to_json(), other.to_json());
        Self::FIELDS
            .iter()
            .filter_map(|f| {
                let (a, b) = (left.get(f.name)?, right.get(f.name)?);
                (a != b).then(|| FieldDiff { field: f.name, left: a.clone(), right: b.clone() })
            })
            .collect()
    }
}

/// One field that differs between two configs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDiff {
    pub field: &'static str,
    pub left: Value,
    pub right: Value,
}
