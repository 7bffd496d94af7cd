//! The rules a config must follow for the trainer to run it on a given number of ranks.
//!
//! Every rule is checked and every broken one reported, each against the field to edit. Rules
//! that depend on another value only run once that value is itself usable, so one mistake
//! (say `num_heads: 0`) yields one problem, not a cascade.
//!
//! Epoch rules: a run whose training loader yields no full batch, or whose `num_iters` is
//! shorter than one epoch, silently trains nothing in the tutorial (`num_epochs = num_iters //
//! iterations per epoch` is 0); an empty validation loader divides by zero. These depend on the
//! number of samples, so they are checked whenever it is known: from `limit_nsamples` /
//! `limit_nsamples_val`, capped by the dataset size when the caller knows it (the trainer
//! does, the browser does not). With neither known they are not checked, and the derived
//! values show the epochs for the tutorial's ERA5 dataset size instead.

use super::{TrainConfig, derived};
use crate::layout::{Layout, Sizes};
use crate::profile::StepWindow;
use crate::{Error, Problems};

/// ZeRO's last stage: 3 shards the parameters too.
pub const MAX_ZERO_STAGE: usize = 3;

/// What is wrong with ZeRO stage `stage` over `dp` replicas (when known), in words: a stage
/// ZeRO has not, or one with nothing to shard over. The config's rule, and the page's before
/// it sends a layout to run.
pub fn zero_stage_problem(stage: usize, dp: Option<usize>) -> Option<String> {
    if stage > MAX_ZERO_STAGE {
        return Some(format!("must be 0, 1, 2 or 3 (ZeRO's stages; 0 is DDP), got {stage}"));
    }
    (stage > 0 && dp == Some(1)).then(|| {
        format!("ZeRO stage {stage} shards over dp, which is 1 here: one replica has nothing to share (set 0, or run more dp ranks)")
    })
}

impl TrainConfig {
    /// Checks the config for a run of `world` ranks (dp = world / (tp·cp·pp)).
    pub fn validate(&self, world: usize) -> Result<(), Error> {
        self.problems(world, None).into_result(())
    }

    pub(super) fn problems(&self, world: usize, train_samples: Option<usize>) -> Problems {
        let mut problems = Problems::default();
        self.check_positive(world, &mut problems);
        let tokens = self.check_model(&mut problems);
        let dp = self.check_parallel(world, tokens, &mut problems);
        self.check_zero(dp, &mut problems);
        self.check_stages(&mut problems);
        self.check_optimizer(&mut problems);
        self.check_paths(&mut problems);
        let profile = self.check_profile(&mut problems);
        if let Some(dp) = dp
            && let Some(local) = self.check_batch(dp, &mut problems)
        {
            self.check_micro_batches(local, &mut problems);
            self.check_epochs(dp, local, train_samples, profile, &mut problems);
        }
        problems
    }

    fn check_positive(&self, world: usize, problems: &mut Problems) {
        let counts = [
            ("embed_dim", self.embed_dim),
            ("depth", self.depth),
            ("patch_size", self.patch_size),
            ("num_heads", self.num_heads),
            ("dt", self.dt),
            ("global_batch_size", self.global_batch_size),
            ("num_iters", self.num_iters),
            ("n_in_channels", self.n_in_channels),
            ("n_out_channels", self.n_out_channels),
            ("tensor_parallel", self.tensor_parallel),
            ("gradient_accumulation_steps", self.gradient_accumulation_steps),
            ("context_parallel", self.context_parallel),
            ("pipeline_parallel", self.pipeline_parallel),
            ("num_micro_batches", self.num_micro_batches),
            ("virtual_pipeline_stages", self.virtual_pipeline_stages),
            ("world", world),
        ];
        let optional = [
            ("local_batch_size", self.local_batch_size),
            ("limit_nsamples", self.limit_nsamples),
            ("limit_nsamples_val", self.limit_nsamples_val),
        ];
        let zeros = counts.into_iter().chain(optional.into_iter().filter_map(|(f, v)| Some((f, v?))));
        for (field, _) in zeros.filter(|&(_, v)| v == 0) {
            problems.push(field, "must be at least 1, got 0");
        }
        for (side, size) in ["height", "width"].into_iter().zip(self.img_size) {
            if size == 0 {
                problems.push("img_size", format!("{side} must be at least 1, got 0"));
            }
        }
    }

    /// Shape rules of the ViT; the tokens per sample when the patch grid is whole.
    fn check_model(&self, problems: &mut Problems) -> Option<usize> {
        let (d, heads, p) = (self.embed_dim, self.num_heads, self.patch_size);
        if d > 0 && heads > 0 && !d.is_multiple_of(heads) {
            problems.push("embed_dim", format!("{d} is not divisible by num_heads {heads}"));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            problems.push("dropout", format!("must be in [0, 1), got {}", self.dropout));
        }
        if p == 0 || self.img_size.contains(&0) {
            return None;
        }
        let mut whole = true;
        for (side, size) in ["height", "width"].into_iter().zip(self.img_size) {
            if !size.is_multiple_of(p) {
                problems.push("img_size", format!("{side} {size} is not divisible by patch_size {p}"));
                whole = false;
            }
        }
        whole.then(|| derived::tokens_per_sample(self.img_size, p))
    }

    /// Tensor, context and data parallel rules; dp when the world splits evenly.
    fn check_parallel(&self, world: usize, tokens: Option<usize>, problems: &mut Problems) -> Option<usize> {
        let (tp, cp, pp) = (self.tensor_parallel, self.context_parallel, self.pipeline_parallel);
        if tp == 0 || cp == 0 || pp == 0 {
            return None;
        }
        let heads = self.num_heads;
        if heads > 0 && !heads.is_multiple_of(tp) {
            problems.push("tensor_parallel", format!("{tp} does not divide num_heads {heads} (every tp rank owns whole heads)"));
        }
        let mlp = self.embed_dim.saturating_mul(derived::MLP_RATIO);
        if mlp > 0 && !mlp.is_multiple_of(tp) {
            problems.push("tensor_parallel", format!("{tp} does not divide the MLP width 4 × embed_dim = {mlp}"));
        }
        if let Some(tokens) = tokens
            && cp > tokens
        {
            problems.push(
                "context_parallel",
                format!("{cp} is more than the {tokens} tokens per sample (every cp rank needs at least one token)"),
            );
        }
        let model = self.model_parallel();
        let dp = (world > 0 && world.is_multiple_of(model)).then(|| world / model);
        if world > 0 && dp.is_none() {
            problems.push(
                "world",
                format!(
                    "{world} ranks is not divisible by tensor_parallel {tp} × context_parallel {cp} × pipeline_parallel {pp} \
                     = {model} (world = tp × cp × pp × dp)"
                ),
            );
        }
        // Checked even when dp is unknown, so a misspelt order is reported together with a
        // bad world size.
        self.check_order(dp.unwrap_or(1), problems);
        dp
    }

    /// The rank layout this config runs as on `world` ranks: dp = world / (tp·cp·pp), in the
    /// config's `parallel_order`. Every problem of the config is reported first.
    pub fn layout(&self, world: usize) -> Result<Layout, Error> {
        self.validate(world)?;
        let dp = world / self.model_parallel();
        Layout::new(self.sizes(dp), &self.parallel_order)
    }

    /// The ranks one replica spans: tp·cp·pp (the tutorial's `{tp·cp}MP`, which never pipelines).
    pub fn model_parallel(&self) -> usize {
        self.tensor_parallel.saturating_mul(self.context_parallel).saturating_mul(self.pipeline_parallel)
    }

    /// The ranks of a run with `dp` replicas: tp·cp·pp·dp. Saturates rather than wraps, so a world
    /// no machine has is refused by [`TrainConfig::validate`] by name, never mistaken for a small one.
    pub fn world(&self, dp: usize) -> usize {
        self.model_parallel().saturating_mul(dp)
    }

    /// The rank layout of a launch with `dp` replicas (the step every launch takes: dp, then the
    /// world, then the layout), with every problem of the config first.
    pub fn layout_for_dp(&self, dp: usize) -> Result<Layout, Error> {
        self.layout(self.world(dp))
    }

    /// The layout's sizes with `dp` replicas: the config's tp, cp and pp.
    /// Sizes beyond `u32` become `u32::MAX`, which `Layout::new` refuses by name.
    pub fn sizes(&self, dp: usize) -> Sizes {
        let size = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Sizes { tp: size(self.tensor_parallel), cp: size(self.context_parallel), dp: size(dp), pp: size(self.pipeline_parallel) }
    }

    fn check_order(&self, dp: usize, problems: &mut Problems) {
        if let Err(err) = Layout::new(self.sizes(dp), &self.parallel_order) {
            for problem in err.problems().0 {
                let field = match problem.field.as_str() {
                    "tp" => "tensor_parallel",
                    "cp" => "context_parallel",
                    "pp" => "pipeline_parallel",
                    "order" => "parallel_order",
                    _ => "world",
                };
                problems.push(field, problem.message);
            }
        }
    }

    /// ZeRO's rules: a stage it has, and something to shard over (dp > 1, gradients reduced).
    fn check_zero(&self, dp: Option<usize>, problems: &mut Problems) {
        let stage = self.zero_stage;
        if let Some(rule) = zero_stage_problem(stage, dp) {
            problems.push("zero_stage", rule);
        } else if stage > 0 && self.noddp {
            problems.push(
                "zero_stage",
                format!(
                    "ZeRO stage {stage} reduces each rank's share of the gradients over dp, which noddp switches off (set noddp false)"
                ),
            );
        }
    }

    fn check_optimizer(&self, problems: &mut Problems) {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            problems.push("lr", format!("must be a positive number, got {}", self.lr));
        }
        if self.num_iters > 0 && self.warmup > self.num_iters {
            problems.push("warmup", format!("{} is more than num_iters {}: the warm-up would never finish", self.warmup, self.num_iters));
        }
        if self.lr_schedule != "cosine" {
            problems.push(
                "lr_schedule",
                format!(
                    "`{}` is not supported: the tutorial handles only `cosine` (any other value leaves it without a scheduler)",
                    self.lr_schedule
                ),
            );
        }
        for (field, mb) in [("bucket_cap_mb", self.bucket_cap_mb), ("first_bucket_cap_mb", self.first_bucket_cap_mb)] {
            if !(mb.is_finite() && mb > 0.0) {
                problems.push(field, format!("must be a positive number of MB, got {mb}"));
            }
        }
    }

    fn check_paths(&self, problems: &mut Problems) {
        let paths = [
            ("expdir", &self.expdir),
            ("train_data_path", &self.train_data_path),
            ("valid_data_path", &self.valid_data_path),
            ("global_means_path", &self.global_means_path),
            ("global_stds_path", &self.global_stds_path),
        ];
        for (field, _) in paths.into_iter().filter(|(_, path)| path.trim().is_empty()) {
            problems.push(field, "must not be empty");
        }
    }

    /// The profiled steps, when the window is well-formed.
    fn check_profile(&self, problems: &mut Problems) -> Option<StepWindow> {
        StepWindow::parse(&self.profile).unwrap_or_else(|rule| {
            problems.push("profile", rule);
            None
        })
    }

    /// The per-rank batch, when the global batch splits over `dp` (and over the micro-batches).
    fn check_batch(&self, dp: usize, problems: &mut Problems) -> Option<usize> {
        let local = self.local_batch(dp, problems)?;
        let micro = self.gradient_accumulation_steps;
        if micro > local {
            problems.push(
                "gradient_accumulation_steps",
                format!("{micro} is more than the {local} samples each dp rank takes per step: every micro-batch needs a sample"),
            );
        }
        Some(local)
    }

    fn local_batch(&self, dp: usize, problems: &mut Problems) -> Option<usize> {
        if let Some(local) = self.local_batch_size {
            return (local > 0).then_some(local);
        }
        let global = self.global_batch_size;
        if global == 0 {
            return None;
        }
        if !global.is_multiple_of(dp) {
            problems.push(
                "global_batch_size",
                format!("{global} is not divisible by dp {dp} (every dp rank takes global_batch_size / dp samples)"),
            );
            return None;
        }
        Some(global / dp)
    }

    fn check_epochs(&self, dp: usize, local: usize, train_samples: Option<usize>, profile: Option<StepWindow>, problems: &mut Problems) {
        // The samples per epoch, and the field that sets them: the limit when it is the
        // smaller bound, otherwise the dataset, where only the batch size can be changed.
        let (train, blame) = match (train_samples, self.limit_nsamples) {
            (Some(n), Some(limit)) if n < limit => (Some(n), "global_batch_size"),
            (_, Some(limit)) => (Some(limit), "limit_nsamples"),
            (n, None) => (n, "global_batch_size"),
        };
        if let Some(n) = train.filter(|&n| n > 0) {
            let per_epoch = derived::iters_per_epoch(n, dp, local);
            if per_epoch == 0 {
                problems.push(
                    blame,
                    format!("{n} training samples over dp {dp} give no full batch of {local} per rank, so an epoch has 0 iterations"),
                );
            } else if self.num_iters > 0 && self.num_iters < per_epoch {
                problems.push(
                    "num_iters",
                    format!(
                        "{} is less than one epoch ({per_epoch} iterations), so the trainer would run 0 epochs \
                         (num_epochs = num_iters // iterations per epoch)",
                        self.num_iters
                    ),
                );
            } else if let Some(window) = profile {
                let steps = self.num_iters / per_epoch * per_epoch;
                if window.start > steps {
                    problems.push("profile", format!("{window} starts after the run's last step ({steps} steps)"));
                }
            }
        }
        if let Some(n) = self.limit_nsamples_val.filter(|&n| n > 0)
            && derived::iters_per_epoch(n, dp, local) == 0
        {
            problems.push(
                "limit_nsamples_val",
                format!(
                    "{n} validation samples over dp {dp} give no full batch of {local} per rank \
                     (validation averages over its batches and would divide by 0)"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_bucket_that_is_not_a_positive_size_is_named_against_its_key() {
        for mb in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let config = TrainConfig { first_bucket_cap_mb: mb, ..TrainConfig::default() };
            let problems = config.problems(1, None);
            let messages: Vec<&str> = problems.for_field("first_bucket_cap_mb").map(|p| p.message.as_str()).collect();
            assert_eq!(messages, [format!("must be a positive number of MB, got {mb}")]);
            assert_eq!(problems.for_field("bucket_cap_mb").count(), 0, "{problems}");
        }
    }

    #[test]
    fn a_zero_stage_needs_a_stage_zero_has_and_dp_ranks_to_shard_over() {
        let messages = |config: TrainConfig, world: usize| -> Vec<String> {
            config.problems(world, None).for_field("zero_stage").map(|p| p.message.clone()).collect()
        };
        for stage in 0..=3 {
            assert_eq!(messages(TrainConfig { zero_stage: stage, ..TrainConfig::default() }, 2), Vec::<String>::new(), "stage {stage}");
        }
        assert_eq!(
            messages(TrainConfig { zero_stage: 4, ..TrainConfig::default() }, 2),
            ["must be 0, 1, 2 or 3 (ZeRO's stages; 0 is DDP), got 4"]
        );
        assert_eq!(
            messages(TrainConfig { zero_stage: 2, ..TrainConfig::default() }, 1),
            ["ZeRO stage 2 shards over dp, which is 1 here: one replica has nothing to share (set 0, or run more dp ranks)"]
        );
        // tp 2 on 2 ranks leaves dp 1 too.
        let tp2 = TrainConfig { zero_stage: 3, tensor_parallel: 2, ..TrainConfig::default() };
        assert_eq!(messages(tp2.clone(), 2).len(), 1);
        assert_eq!(messages(tp2, 4), Vec::<String>::new());
        assert_eq!(
            messages(TrainConfig { zero_stage: 1, noddp: true, ..TrainConfig::default() }, 2),
            ["ZeRO stage 1 reduces each rank's share of the gradients over dp, which noddp switches off (set noddp false)"]
        );
        assert_eq!(messages(TrainConfig { zero_stage: 0, noddp: true, ..TrainConfig::default() }, 1), Vec::<String>::new());
    }
}
