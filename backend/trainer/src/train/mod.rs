//! The training run: the tutorial's `train.py` loop (step-0 evaluation, epochs of training
//! steps with a per-iteration cosine schedule, per-epoch validation and logging), writing the
//! run's outputs and a checkpoint after every epoch.

pub mod amp;
pub mod bench;
pub mod checkpoint;
pub(crate) mod clock;
mod feed;
mod lanes;
pub mod loss;
mod maps;
pub mod optim;
pub mod pipeline;
mod profile;
mod report;
pub mod reshard;
mod rollout;
mod run;
mod split;
mod step;
mod sync;
pub mod zero;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use scalebook_shared::config::{BenchyTrial, Derived, TrainConfig};
use scalebook_shared::layout::Token;
use scalebook_shared::metrics::tags;
use scalebook_shared::rundir;
use tch::Device;

use crate::Error;
use crate::data::{Batch, DataLoader, Era5Dataset, ShardedSampler, Stats};
use crate::dist::{Comm, RankEnv};
use crate::model::VitSpec;
use crate::output::{Logger, py_float};
use crate::parallel::Parallel;
use checkpoint::Checkpoints;
use maps::WeatherMaps;
use profile::StepProfile;
use report::{Reporter, ValidReport};
use run::Run;

pub use lanes::Lanes;
pub(crate) use lanes::slices;
pub use step::{Learner, StepTimes};
pub use sync::{DdpKnobs, GradSync};

/// The tutorial's "GB" in its memory lines is 1024³ bytes.
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// Bytes per MiB, as the training state held is reported.
const MIB: f64 = 1024.0 * 1024.0;

/// Everything a run needs besides its config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub config: TrainConfig,
    pub config_name: String,
    pub yaml_path: PathBuf,
    pub run_dir: PathBuf,
    /// Continue from the run directory's last checkpoint.
    pub resume: bool,
    /// Seeds the model's initialisation and the data order.
    pub seed: u64,
    pub device: Device,
    /// TF32 for float32 matmuls on GPUs (on by default in the tutorial's NGC container).
    pub tf32: bool,
    /// Stop after this many epochs of this invocation, checkpointed, to go on later with
    /// `resume` (a long run split into jobs that fit a time limit). The schedule still
    /// follows `num_iters`.
    pub max_epochs: Option<u64>,
}

/// What a finished run reports back.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub steps: u64,
    pub epochs: u64,
    pub final_train_loss: f64,
    pub final_valid_loss: f64,
    pub final_rmse_u10: f64,
}

struct Loaders {
    train: DataLoader,
    valid: DataLoader,
}

/// The loaders of this rank (its dp shard of each set, at the local batch size), and the run's
/// batch sizes, epochs and steps as `shared` derives them for this world and this training set:
/// the same numbers the browser showed and the server checked, from the same code.
fn open_loaders(c: &TrainConfig, seed: u64, device: Device, log: &Logger, comm: &Comm) -> Result<(Loaders, Derived), Error> {
    let rank = comm.env().rank;
    log.info(&format!("rank {rank}, begin data loader init"));
    let stats = Stats::load(Path::new(&c.global_means_path), Path::new(&c.global_stds_path), c.n_in_channels)?;
    let img = c.img_size;
    let open = |dir: &str, limit| Era5Dataset::open(Path::new(dir), img, c.n_in_channels, c.dt, limit, stats.clone());
    let train = Arc::new(open(&c.train_data_path, c.limit_nsamples)?);
    let valid = Arc::new(open(&c.valid_data_path, c.limit_nsamples_val)?);
    let derived = c.derived(comm.env().world, Some(train.len()))?;
    let (dp, dp_rank) = (comm.size(Token::DP), comm.rank(Token::DP));
    let batch = derived.local_batch_size;
    // Both sets are shuffled, as the tutorial's single-GPU loaders (`shuffle=True`) and its
    // DistributedSampler for training do; every rank of a tp-cp group reads the same shard.
    let loader = |ds: &Arc<Era5Dataset>| -> Result<DataLoader, Error> {
        Ok(DataLoader::new(ds.clone(), ShardedSampler::new(ds.len(), dp, dp_rank, true, seed)?, batch, c.num_data_workers)?
            .for_device(device)
            .serial(c.serial_read))
    };
    let (train, valid) = (loader(&train)?, loader(&valid)?);
    log.info(&format!("rank {rank}, data loader initialized"));
    Ok((Loaders { train, valid }, derived))
}

fn check_run_dir(dir: &Path) -> Result<(), Error> {
    let fail = |message: String| Error::RunDir { path: dir.to_owned(), message };
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot be created: {e}")))?;
    let probe = dir.join(".write-test");
    std::fs::write(&probe, b"").map_err(|e| fail(format!("is not writable: {e}")))?;
    std::fs::remove_file(&probe).map_err(|e| fail(format!("is not writable: {e}")))
}

/// This rank's node and local rank, in the run directory (`rundir::PLACEMENT_DIR`).
fn record_placement(run_dir: &Path, env: &RankEnv) -> Result<(), Error> {
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .or_else(|| nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()))
        .unwrap_or_default();
    let place = rundir::RankPlacement { rank: env.rank, local_rank: env.local_rank, node };
    let dir = run_dir.join(rundir::PLACEMENT_DIR);
    let fail = |e: std::io::Error| Error::RunDir { path: dir.clone(), message: format!("cannot record where rank {} runs: {e}", env.rank) };
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let json = serde_json::to_string(&place).unwrap_or_default();
    std::fs::write(dir.join(rundir::placement_file(env.rank)), json).map_err(fail)
}

fn log_config(log: &Logger, opts: &RunOptions) {
    log.info("------------------ Configuration ------------------");
    log.info(&format!("Configuration file: {}", opts.yaml_path.display()));
    log.info(&format!("Configuration name: {}", opts.config_name));
    for (key, value) in opts.config.to_json() {
        let value = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Null => "None".into(),
            other => other.to_string(),
        };
        log.info(&format!("{key} {value}"));
    }
    log.info("---------------------------------------------------");
}

/// Runs (or resumes) training as configured, as one rank of `comm`'s layout. `log` carries
/// the progress bar, if any; rank 0 writes the run's outputs.
/// Which attention kernel the model's heads run on this GPU, a choice libtorch makes by
/// shape, type and GPU, said in the log so that a profile's kernel names can be read.
pub fn attention_line(config: &TrainConfig, device: Device) -> String {
    let spec = VitSpec::from(config);
    let kind = amp::autocast_kind(config.amp_mode).unwrap_or(tch::Kind::Float);
    let (heads, dim) = (spec.num_heads, spec.head_dim());
    format!("Attention: {} ({heads} heads of {dim} in {kind:?})", crate::model::attention_kernel(&spec, kind, device))
}

pub fn train(opts: &RunOptions, log: &Logger, comm: Rc<Comm>) -> Result<Summary, Error> {
    if comm.is_root() {
        check_run_dir(&opts.run_dir)?;
        log.attach_file(&opts.run_dir.join(rundir::OUT_LOG))?;
    }
    record_placement(&opts.run_dir, comm.env())?;
    log_config(log, opts);
    let l = comm.layout().sizes();
    log.info(&format!("Setting DP = {}, TP = {}, CP = {}, PP = {}", l.dp, l.tp, l.cp, l.pp));
    if opts.device == Device::Cpu {
        let policy = std::env::var("OMP_WAIT_POLICY").unwrap_or_else(|_| "unset: OpenMP's threads spin while they wait".into());
        log.info(&format!("CPU threads per rank: {} (OMP_WAIT_POLICY {policy})", tch::get_num_threads()));
    }
    if opts.device.is_cuda() {
        crate::ffi::set_tf32(opts.tf32)?;
        log.info(&attention_line(&opts.config, opts.device));
    }
    let (mut run, epoch0) = start(opts, log, comm.clone())?;
    let num_epochs = run.num_epochs;
    let last_epoch = opts.max_epochs.map_or(num_epochs, |n| num_epochs.min(epoch0 + n));
    let planned = last_epoch.saturating_sub(epoch0) * run.iters_per_epoch;
    if let Some(bar) = log.progress() {
        bar.set_length(planned);
    }
    run.report.scalar(run.steps, epoch0, tags::run::STEPS, (run.steps + planned) as f64)?;
    if comm.is_root() {
        log_prediction(log, &opts.run_dir, planned);
    }
    if let Device::Cuda(i) = opts.device
        && let Ok(used) = crate::ffi::gpu_memory_used(i)
    {
        log.info(&format!("Scaffolding memory high watermark: {} GB.", py_float(used as f64 / GIB)));
    }
    log.info("Starting Training Loop...");
    if !opts.resume {
        step_zero(&run.learner, &run.loaders, &mut run.report)?;
    }
    // SC22's benchy: `io` reads batches and drops them; `synthetic` steps on one cached batch.
    let trial = opts.config.benchy_trial;
    if trial != BenchyTrial::Full {
        log.info(&format!("benchy: timing {}", trial_scope(trial)));
    }
    let nan = f64::NAN;
    let mut summary = Summary { steps: run.steps, epochs: num_epochs, final_train_loss: nan, final_valid_loss: nan, final_rmse_u10: nan };
    for epoch in epoch0..last_epoch {
        if let Some(after) = run.epoch(epoch)? {
            summary = after;
        }
    }
    run.profile.save(log)?;
    if last_epoch < num_epochs {
        log.info(&format!("Stopping after epoch {last_epoch} of {num_epochs}; continue with --resume"));
    }
    log.info(&format!("DONE ---- rank {}", comm.env().rank));
    Ok(summary)
}

/// The prediction the server recorded at launch (`prediction.json`, if the run has one), as the
/// time the planned steps should take: what the log can say before the first step is measured.
fn log_prediction(log: &Logger, run_dir: &Path, planned: u64) {
    let Ok(text) = std::fs::read_to_string(run_dir.join(rundir::PREDICTION)) else { return };
    let Ok(prediction) = serde_json::from_str::<scalebook_shared::estimate::Prediction>(&text) else { return };
    let e = &prediction.estimate;
    let minutes = planned as f64 * e.step_time_s / 60.0;
    log.info(&format!(
        "Predicted at launch for {}: {:.1} samples/s, {:.3} s a step, {planned} steps in about {minutes:.1} min",
        prediction.basis, e.samples_per_sec, e.step_time_s
    ));
}

/// Everything before the first epoch: where a resumed run stands, the seed every rank agrees
/// on, the loaders, the model and its gradient sync, the reporter, the step profile and the
/// maps; and the epoch to start from.
fn start<'a>(opts: &'a RunOptions, log: &'a Logger, comm: Rc<Comm>) -> Result<(Run<'a>, u64), Error> {
    let c = &opts.config;
    let model_parallel = comm.size(Token::TP) * comm.size(Token::CP) > 1;
    let checkpoints = Checkpoints::new(&opts.run_dir, model_parallel.then(|| comm.rank(Token::TP_CP)));
    let resumed = if opts.resume { Some(checkpoints.load()?) } else { None };
    // A resumed run keeps its original data order whatever --seed says now.
    let seed = resumed.as_ref().map_or(opts.seed, |(p, _)| p.seed);
    let seed = comm.agree(seed as i64)? as u64;
    tch::manual_seed(seed as i64);
    let (loaders, derived) = open_loaders(c, seed, opts.device, log, &comm)?;
    let parallel = model_parallel.then(|| Parallel::new(comm.clone(), VitSpec::from(c).num_tokens() as usize));
    let stages = (comm.size(Token::PP) > 1).then(|| comm.shared_group(Token::PP));
    let (vs, mut learner) = Learner::build_stage(c, opts.device, parallel, stages)?;
    if comm.env().world > 1 {
        let sync = GradSync::new(comm.clone(), &vs, DdpKnobs::new(c))?;
        if comm.size(Token::DP) > 1 {
            log.info(&sync.describe());
        }
        sync.broadcast_parameters()?;
        learner.attach(sync, c)?;
        if let Some(line) = learner.describe_zero() {
            log.info(&line);
        }
    }
    let config_json = resumable_config(c);
    let (mut epoch0, mut steps) = (0u64, 0u64);
    if let Some((position, saved)) = resumed {
        checkpoint::restore(&vs, &mut learner, &position, saved, &config_json, &opts.run_dir)?;
        (epoch0, steps) = (position.epochs_done, position.steps);
        log.info(&format!("Resuming after epoch {epoch0} (step {steps})"));
    }
    let report = if comm.is_root() { Reporter::open(&opts.run_dir, opts.resume.then_some(steps))? } else { Reporter::silent() };
    let cached = match c.benchy_trial {
        BenchyTrial::Synthetic => Some(first_batch(&loaders.train)?),
        BenchyTrial::Full | BenchyTrial::Io => None,
    };
    let profile = StepProfile::new(c, &opts.run_dir, comm.env().rank, opts.device)?;
    let maps = match c.benchy_trial {
        BenchyTrial::Full if comm.rank(Token::DP) == 0 => Some(WeatherMaps::new(loaders.valid.dataset(), &opts.run_dir)?),
        _ => None,
    };
    let (global_batch, iters_per_epoch, num_epochs) =
        (derived.global_batch_size as f64, derived.iters_per_epoch as u64, derived.num_epochs as u64);
    let run = Run {
        config: c,
        log,
        comm,
        vs,
        learner,
        loaders,
        report,
        profile,
        maps,
        cached,
        checkpoints,
        seed,
        config_json,
        global_batch,
        iters_per_epoch,
        num_epochs,
        steps,
        ahead: None,
    };
    Ok((run, epoch0))
}

fn trial_scope(trial: BenchyTrial) -> &'static str {
    match trial {
        BenchyTrial::Full => "loading and steps",
        BenchyTrial::Io => "the data loading only (no steps, no validation, no checkpoints)",
        BenchyTrial::Synthetic => "the steps only, on the first batch over and over",
    }
}

/// The first batch of the loader's first epoch. Training has a full batch (the config's rules
/// ensure it); a validation set smaller than one batch is the user's to fix.
fn first_batch(loader: &DataLoader) -> Result<Batch, Error> {
    loader.epoch(0).next().transpose()?.ok_or_else(|| Error::DataSetting(format!("{} samples give no full batch", loader.dataset().len())))
}

/// The tutorial's step-0 logging: one train and one validation batch through the untrained
/// model, so every curve starts at step 0.
fn step_zero(learner: &Learner, loaders: &Loaders, report: &mut Reporter) -> Result<(), Error> {
    let (train_loss, _) = learner.evaluate(&first_batch(&loaders.train)?)?;
    let (valid_loss, rmse) = learner.evaluate(&first_batch(&loaders.valid)?)?;
    report.scalar(0, 0, tags::LOSS_TRAIN, learner.dp_mean(train_loss)?)?;
    report.valid(0, 0, &ValidReport { loss: learner.dp_mean(valid_loss)?, rmse_u10: learner.dp_mean(rmse.get(0))? })?;
    report.flush()
}

/// Mean loss and u10 RMSE over the validation loader, averaged over dp like the tutorial.
fn validate(learner: &Learner, valid: &DataLoader, epoch: u64) -> Result<(f64, f64), Error> {
    let (mut loss_sum, mut rmse_sum, mut n) = (0.0, 0.0, 0usize);
    for batch in valid.epoch(epoch) {
        let (loss, rmse) = learner.evaluate(&batch?)?;
        loss_sum += f64::try_from(&loss)?;
        rmse_sum += f64::try_from(&rmse.get(0))?;
        n += 1;
    }
    let n = n.max(1) as f64;
    let mean = |sum: f64| learner.dp_mean(tch::Tensor::from(sum / n));
    Ok((mean(loss_sum)?, mean(rmse_sum)?))
}

/// The config as a checkpoint records it: everything that changes the result. The number of
/// data workers does not (batches arrive in the same order), so a run may resume with more;
/// nor does ZeRO's stage or dp (the same sums, and a checkpoint of any layout is resharded at
/// load), so a run may resume at another; nor do the pipeline's stages, micro-batches and
/// schedule, or the order of the groups (a pipeline's checkpoint is one file with one run's
/// keys), so a pipelined run resumes on one rank and the other way round.
fn resumable_config(c: &TrainConfig) -> serde_json::Value {
    let mut json = c.to_json();
    for key in [
        "num_data_workers",
        "zero_stage",
        "pipeline_parallel",
        "num_micro_batches",
        "pipeline_schedule",
        "virtual_pipeline_stages",
        "parallel_order",
    ] {
        json.remove(key);
    }
    serde_json::Value::Object(json)
}
