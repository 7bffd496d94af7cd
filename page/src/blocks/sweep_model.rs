//! What a sweep block decides and draws, without the page: where the sweep stands and what
//! each answer and each run's end does to it, the number each finished run contributes, and
//! the bars and curves that draw them (the variants themselves are `shared::sweep`'s).

use scalebook_shared::charts::{Scale, format_tick, linear_ticks};
use scalebook_shared::config::ConfigFile;
use scalebook_shared::estimate::Estimate;
use scalebook_shared::metrics::tags;
use scalebook_shared::protocol::{ErrorCode, ExecutorSpec, LaunchRequest, RunId, RunState, Series};
use scalebook_shared::sweep::Variant;

use super::run_model::effective;
use crate::requests::Answer;

/// What the block draws once its runs are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Training samples per second, side by side.
    Throughput,
    /// Samples per second per rank, relative to the first variant's.
    Efficiency,
    /// The validation-loss curves, overlaid.
    Loss,
    /// The training loss of every step, overlaid: what a warm-up changes happens in the first
    /// steps, before the first validation.
    StepLoss,
    /// The validation RMSE of u10m, the tutorial's forecast metric, overlaid: DL4SCI25 compares
    /// its data-parallel runs by it against wall-clock time.
    Rmse,
    /// The validation-loss curves overlaid, and whether each variant learns the same as the
    /// first at every epoch (`sweep_agreement`): do the layouts learn the same?
    Agreement,
    /// The scaling board (`sweep_scaling`): throughput per rank against the ideal and the
    /// efficiency of each size, beside the sources' own.
    Scaling,
    /// The most memory a rank held, side by side, each beside the estimate's total.
    Memory,
    /// The training state the fullest rank holds (parameters, gradients, optimizer state),
    /// side by side, each beside the estimate's: what ZeRO's stages shard.
    State,
}

impl Measure {
    pub const NAMES: &'static str = "throughput, efficiency, scaling, memory, state, loss, step-loss, rmse or agreement";

    pub fn parse(name: &str) -> Result<Measure, String> {
        match name {
            "throughput" => Ok(Measure::Throughput),
            "efficiency" => Ok(Measure::Efficiency),
            "loss" => Ok(Measure::Loss),
            "step-loss" => Ok(Measure::StepLoss),
            "rmse" => Ok(Measure::Rmse),
            "agreement" => Ok(Measure::Agreement),
            "scaling" => Ok(Measure::Scaling),
            "memory" => Ok(Measure::Memory),
            "state" => Ok(Measure::State),
            other => Err(format!("measure `{other}` is not one of {}", Measure::NAMES)),
        }
    }
}

/// Where the sweep stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Idle,
    /// Waiting for the server to accept variant `index`'s launch.
    Launching {
        index: usize,
        ticket: u64,
    },
    /// Variant `index` is running.
    Running(usize),
    /// Variant `index` waits for one of the learner's own runs to end: they have as many
    /// queued or running as the instructor allows at once.
    Waiting(usize),
    Stopped(String),
}

impl Progress {
    /// The state's name, for the page's `data-progress` (what a test or a style can match).
    pub fn name(&self) -> &'static str {
        match self {
            Progress::Idle => "idle",
            Progress::Launching { .. } => "launching",
            Progress::Running(_) => "running",
            Progress::Waiting(_) => "waiting",
            Progress::Stopped(_) => "stopped",
        }
    }

    /// Whether a variant is on its way: the sweep may not start again, nor its config change.
    pub fn busy(&self) -> bool {
        matches!(self, Progress::Launching { .. } | Progress::Running(_) | Progress::Waiting(_))
    }

    /// The line beside "Run all": which variant runs, why the sweep stopped, or (idle) whether
    /// every variant has a result (`all_ran`). `queued` is why the server still holds the
    /// running variant's run in its queue (its place among the room's runs), if it does.
    pub fn status(&self, variants: &[Variant], all_ran: bool, queued: Option<&str>) -> String {
        match self {
            Progress::Idle if all_ran => "All variants ran.".to_owned(),
            Progress::Idle => "Runs each variant here, one after another.".to_owned(),
            Progress::Running(index) if queued.is_some() => {
                let why = queued.unwrap_or_default();
                format!("{} of {}, {}, is queued on the server: {why}", index + 1, variants.len(), label(variants, *index))
            }
            Progress::Launching { index, .. } | Progress::Running(index) => {
                format!("Running {} of {}: {}", index + 1, variants.len(), label(variants, *index))
            }
            Progress::Waiting(index) => format!(
                "{} of {}, {}, waits for one of your runs to end (you may have as many at once as the instructor allows).",
                index + 1,
                variants.len(),
                label(variants, *index)
            ),
            Progress::Stopped(why) => why.clone(),
        }
    }
}

/// The variants' labels, in order.
pub fn labels(variants: &[Variant]) -> Vec<String> {
    variants.iter().map(|v| v.label.clone()).collect()
}

fn label(variants: &[Variant], index: usize) -> &str {
    variants.get(index).map_or("", |v| v.label.as_str())
}

/// Where the block remembers its runs across reloads (each variant's under this key with
/// `:index` after it): one memory per chapter (the page's `hash`), config, measure and set of
/// variants as they run (label, ranks and changes), so neither an edited sweep nor another
/// block whose variants carry the same labels shows this sweep's runs.
pub fn memory_key(hash: &str, config: &str, measure: Measure, variants: &[Variant]) -> String {
    let variants: Vec<String> = variants.iter().map(|v| format!("{}|dp={} {}", v.label, v.dp, v.overrides.join(" "))).collect();
    format!("scalebook-sweep:{hash}:{config}:{measure:?}:{}", variants.join("/"))
}

/// The seed every variant of the sweep remembered under `memory_key` runs with: one for all,
/// so the variants differ only by their changes (the data order and the initial weights are
/// the same), and the same each time the sweep runs, so running it again reproduces it.
pub fn seed(memory_key: &str) -> u64 {
    // FNV-1a, kept to 31 bits so the seed reads short in the run list.
    let hash = memory_key.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    u64::from(hash >> 1)
}

/// The launch of a variant: the sweep's config with the variant's changes, on this machine,
/// with the sweep's `seed`.
pub fn request(config: String, variant: Variant, seed: u64) -> LaunchRequest {
    LaunchRequest { config, overrides: variant.overrides, dp: variant.dp, executor: ExecutorSpec::Local, seed: Some(seed) }
}

/// What the server's answer to variant `index`'s launch does to the sweep.
#[derive(Debug, Clone, PartialEq)]
pub enum Launched {
    /// Launched: watch this run until it ends.
    Run(RunId),
    /// Refused: the sweep stops, saying why.
    Stop(String),
    /// Refused for now (the learner's runs at once are all in use): launch it again when one
    /// of theirs ends.
    Wait,
    /// A batch script (never asked for by a sweep): nothing.
    Nothing,
}

/// What `answer` to variant `index`'s launch does.
pub fn launched(variants: &[Variant], index: usize, answer: Answer) -> Launched {
    match answer {
        Answer::Launched(id) => Launched::Run(id),
        Answer::Refused(report) if report.code == ErrorCode::QuotaExceeded => Launched::Wait,
        Answer::Refused(report) => {
            let problems: Vec<String> = report.problems.0.iter().map(ToString::to_string).collect();
            Launched::Stop(format!("“{}” was refused: {} {}", label(variants, index), report.message, problems.join("; ")))
        }
        Answer::Script(_) => Launched::Nothing,
    }
}

/// What follows variant `index`'s run reaching `state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// It completed: launch variant `index + 1` (past the last, the sweep is done).
    Launch(usize),
    /// It ended otherwise: the sweep stops there, saying how.
    Stop(String),
}

/// What follows variant `index`'s run reaching `state`, or `None` while it has not ended.
pub fn after_run(variants: &[Variant], index: usize, state: RunState) -> Option<Next> {
    match state {
        RunState::Completed => Some(Next::Launch(index + 1)),
        s if s.is_final() => Some(Next::Stop(format!("“{}” ended {s:?}; see its log in the run list", label(variants, index)))),
        _ => None,
    }
}

/// What a bar measure reads from a run: its peak memory in GiB for [`Measure::Memory`], the
/// training state a rank holds in MiB for [`Measure::State`], otherwise its training
/// throughput.
pub fn measured(measure: Measure, series: &[Series]) -> Option<f64> {
    match measure {
        Measure::Memory => peak_memory(series),
        Measure::State => state_held(series),
        _ => throughput(series),
    }
}

/// What a bar measure predicts for a run from the estimate made at its launch, in the bar's
/// unit.
pub fn predicted(measure: Measure, estimate: &Estimate) -> f64 {
    let memory = &estimate.memory_gb;
    match measure {
        Measure::Memory => memory.total,
        Measure::State => (memory.weights + memory.gradients + memory.optimizer_state) * MIB_PER_GIB,
        _ => estimate.samples_per_sec,
    }
}

const MIB_PER_GIB: f64 = 1024.0;

/// The training state the fullest rank held at the run's last report, in MiB: its parameters,
/// gradients and optimizer state added up.
pub fn state_held(series: &[Series]) -> Option<f64> {
    let last = |tag: &str| series.iter().find(|s| s.tag == tag)?.buckets.last().map(|b| b.last);
    tags::run::STATE_HELD.iter().map(|tag| last(tag)).sum()
}

/// The largest peak memory a run reported (the trainer reports the peak so far every epoch).
pub fn peak_memory(series: &[Series]) -> Option<f64> {
    let peaks = series.iter().find(|s| s.tag == tags::run::PEAK_MEMORY)?.buckets.iter().map(|b| b.max);
    peaks.reduce(f64::max)
}

/// A run's training throughput: the median of its per-epoch samples/s after the first epoch
/// (which pays for warming up, as the tutorial's logs show), or the first when it is alone.
pub fn throughput(series: &[Series]) -> Option<f64> {
    let per_epoch: Vec<f64> = series.iter().find(|s| s.tag == tags::SAMPLES_PER_SEC)?.buckets.iter().map(|b| b.last).collect();
    let mut steady: Vec<f64> = if per_epoch.len() > 1 { per_epoch[1..].to_vec() } else { per_epoch };
    steady.sort_by(f64::total_cmp);
    steady.get(steady.len().checked_sub(1)? / 2).copied()
}

/// The ranks variant `variant` of a sweep of `config` runs on: the world of its effective
/// config with the variant's dp (dp alone when the config is not known).
pub fn ranks(file: Option<&ConfigFile>, config: &str, variant: &Variant) -> u32 {
    let model = file.and_then(|file| effective(file, config, &variant.overrides));
    model.map_or(variant.dp, |c| u32::try_from(c.world(variant.dp as usize)).unwrap_or(u32::MAX))
}

/// Per-rank throughput relative to the first variant's, the weak- and strong-scaling
/// efficiency: 1.0 is perfect scaling.
pub fn efficiencies(values: &[(u32, Option<f64>)]) -> Vec<Option<f64>> {
    let base = values.first().and_then(|&(dp, v)| Some(v? / dp as f64));
    values.iter().map(|&(dp, v)| Some(v? / dp as f64 / base?)).collect()
}

/// One horizontal bar, in a viewBox [`WIDTH`] wide, with the tick of what was predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub y: f64,
    pub width: f64,
    /// Where the prediction made at launch falls on the same scale.
    pub predicted_x: Option<f64>,
    pub text: String,
}

/// One variant as its bar shows it: measured, predicted at launch, and the measured
/// throughput's share of the hardware's peak (MFU, percent).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    pub measured: Option<f64>,
    pub predicted: Option<f64>,
    pub mfu: Option<f64>,
}

pub const WIDTH: f64 = 720.0;
pub const LABEL_WIDTH: f64 = 220.0;
pub const BAR_HEIGHT: f64 = 26.0;
const BAR_GAP: f64 = 10.0;
/// Room right of the longest bar for its value, its prediction and its MFU.
const VALUE_ROOM: f64 = 270.0;

/// Bars for the finished variants (an unfinished one gets no bar but keeps its row, and its
/// prediction's tick once launched).
pub fn bars(labels: &[String], figures: &[Figures], measure: Measure) -> Vec<Bar> {
    let max = figures.iter().flat_map(|f| [f.measured, f.predicted]).flatten().fold(0.0, f64::max);
    let span = WIDTH - LABEL_WIDTH - VALUE_ROOM;
    let at = |v: f64| if max > 0.0 { v / max * span } else { 0.0 };
    let show = |v: f64| match measure {
        Measure::Efficiency => format!("{:.0} %", v * 100.0),
        Measure::Memory => format!("{v:.2} GiB"),
        Measure::State => format!("{v:.2} MiB"),
        _ => format!("{v:.1} samples/s"),
    };
    labels
        .iter()
        .zip(figures)
        .enumerate()
        .map(|(i, (label, f))| {
            let mut text = f.measured.map_or_else(|| "not run yet".to_owned(), show);
            if let Some(p) = f.predicted {
                text.push_str(&format!(" · predicted {}", show(p)));
            }
            if let (Some(mfu), Some(_)) = (f.mfu, f.measured) {
                text.push_str(&format!(" · MFU {mfu:.1} %"));
            }
            Bar {
                label: label.clone(),
                y: i as f64 * (BAR_HEIGHT + BAR_GAP),
                width: f.measured.map_or(0.0, at),
                predicted_x: f.predicted.map(at),
                text,
            }
        })
        .collect()
}

pub fn bars_height(rows: usize) -> f64 {
    rows as f64 * (BAR_HEIGHT + BAR_GAP)
}

/// The validation-loss curves of the variants as SVG paths in a `WIDTH` × [`CURVES_HEIGHT`]
/// box (the plot area inside [`CURVES_MARGIN`]), over a shared step axis, with y ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Curves {
    pub paths: Vec<Option<String>>,
    pub y_ticks: Vec<(f64, String)>,
    pub x_ticks: Vec<(f64, String)>,
}

pub const CURVES_HEIGHT: f64 = 240.0;
pub const CURVES_MARGIN: f64 = 48.0;

/// An SVG path through `points` placed by `x_at` and `y_at`, or `None` when there are none.
pub fn polyline(points: &[(f64, f64)], x_at: &dyn Fn(f64) -> f64, y_at: &dyn Fn(f64) -> f64) -> Option<String> {
    let mut d = String::new();
    for (i, &(x, y)) in points.iter().enumerate() {
        d.push_str(&format!("{}{:.1} {:.1}", if i == 0 { 'M' } else { 'L' }, x_at(x), y_at(y)));
    }
    (!d.is_empty()).then_some(d)
}

pub fn curves(runs: &[Option<Vec<(f64, f64)>>]) -> Curves {
    let points = runs.iter().flatten().flatten();
    let (mut x_max, mut y_lo, mut y_hi) = (0.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in points {
        x_max = x_max.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    if !y_lo.is_finite() {
        return Curves { paths: runs.iter().map(|_| None).collect(), y_ticks: Vec::new(), x_ticks: Vec::new() };
    }
    let m = CURVES_MARGIN;
    let (xs, ys) = (Scale::new(0.0, x_max.max(1.0), false), Scale::new(y_lo, if y_hi > y_lo { y_hi } else { y_lo + 1.0 }, false));
    let x_at = |x: f64| m + xs.unit(x).unwrap_or(0.0) * (WIDTH - 1.5 * m);
    let y_at = |y: f64| CURVES_HEIGHT - m / 2.0 - ys.unit(y).unwrap_or(0.0) * (CURVES_HEIGHT - m);
    let paths = runs.iter().map(|run| polyline(run.as_deref()?, &x_at, &y_at)).collect();
    let ticks = |scale: &Scale, at: &dyn Fn(f64) -> f64| {
        let (ticks, step) = linear_ticks(scale.lo(), scale.hi(), 5);
        ticks.into_iter().map(|t| (at(t), format_tick(t, step))).collect()
    };
    Curves { paths, y_ticks: ticks(&ys, &y_at), x_ticks: ticks(&xs, &x_at) }
}

impl Measure {
    /// The tag a loss measure overlays, and its words for the legend.
    pub fn loss_tag(self) -> Option<(&'static str, &'static str)> {
        match self {
            Measure::Loss | Measure::Agreement => Some((tags::LOSS_VALID, "validation loss (Loss/valid)")),
            Measure::StepLoss => Some((tags::step::LOSS_TRAIN, "training loss of every step (Step/Loss/train)")),
            Measure::Rmse => Some((tags::RMSE_U10M_VALID, "validation RMSE of u10m (RMSE(u10m)/valid)")),
            Measure::Throughput | Measure::Efficiency | Measure::Scaling | Measure::Memory | Measure::State => None,
        }
    }
}

/// What a loss measure's curves run along: steps, or seconds since each run started (runs that
/// take different steps compared by what they cost, as TensorBoard's relative axis does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossAxis {
    Step,
    Time,
}

impl LossAxis {
    pub fn name(self) -> &'static str {
        match self {
            LossAxis::Step => "step",
            LossAxis::Time => "time",
        }
    }

    /// The axis's words under the picture.
    pub fn words(self) -> &'static str {
        match self {
            LossAxis::Step => "by step",
            LossAxis::Time => "by seconds since the run started",
        }
    }
}

/// A run's `tag` along `axis`, the curve a loss measure overlays.
pub fn loss_curve(series: &[Series], tag: &str, axis: LossAxis) -> Option<Vec<(f64, f64)>> {
    let s = series.iter().find(|s| s.tag == tag)?;
    let start = series.iter().filter_map(|s| s.buckets.first()).map(|b| b.first_wall).fold(f64::INFINITY, f64::min);
    let x = |b: &scalebook_shared::protocol::Bucket| match axis {
        LossAxis::Step => b.last_step as f64,
        LossAxis::Time => b.last_wall - start,
    };
    Some(s.buckets.iter().map(|b| (x(b), b.last)).collect())
}

#[cfg(test)]
mod tests {
    use scalebook_shared::Problem;
    use scalebook_shared::protocol::{Bucket, ErrorReport};

    use super::*;

    fn series(tag: &str, values: &[f64]) -> Series {
        let bucket = |(i, &v): (usize, &f64)| Bucket {
            first_step: i as u64 * 10,
            last_step: i as u64 * 10,
            first_wall: 0.0,
            last_wall: 0.0,
            epoch: i as u64 + 1,
            min: v,
            max: v,
            last: v,
            count: 1,
            non_finite: 0,
        };
        Series { tag: tag.into(), buckets: values.iter().enumerate().map(bucket).collect() }
    }

    fn variants() -> Vec<Variant> {
        ["one rank", "two ranks"]
            .iter()
            .zip([1, 2])
            .map(|(l, dp)| Variant { label: (*l).into(), dp, overrides: vec!["lr=0.1".into()] })
            .collect()
    }

    #[test]
    fn blocks_whose_variants_share_their_labels_remember_their_runs_apart() {
        let weak = variants();
        let mut strong = variants();
        strong.iter_mut().for_each(|v| v.overrides = vec!["global_batch_size=8".into()]);
        let key = |variants: &[Variant], measure| memory_key("#data-parallel", "cpu_short", measure, variants);
        assert_ne!(key(&weak, Measure::Scaling), key(&strong, Measure::Scaling), "the same labels, other changes");
        assert_ne!(key(&weak, Measure::Scaling), key(&weak, Measure::Efficiency), "the same variants, another measure");
        assert_eq!(key(&weak, Measure::Scaling), key(&variants(), Measure::Scaling), "the same block, found again");
    }

    #[test]
    fn the_sweep_runs_its_variants_in_turn_and_stops_at_a_failure() {
        let v = variants();
        let key = memory_key("#ddp", "cpu_tiny", Measure::Throughput, &v);
        assert_eq!(key, "scalebook-sweep:#ddp:cpu_tiny:Throughput:one rank|dp=1 lr=0.1/two ranks|dp=2 lr=0.1");
        let seed = seed(&key);
        let asked = request("cpu_tiny".into(), v[1].clone(), seed);
        assert_eq!((asked.dp, asked.overrides.as_slice(), &asked.executor), (2, &["lr=0.1".to_owned()][..], &ExecutorSpec::Local));
        assert_eq!(request("cpu_tiny".into(), v[0].clone(), seed).seed, asked.seed, "one seed for every variant");
        assert_eq!(asked.seed, Some(seed));
        assert!(seed < 1 << 31);
        assert_ne!(super::seed("scalebook-sweep:#ddp:cpu_tiny:a/b"), seed, "another sweep, another seed");
        assert_eq!(after_run(&v, 0, RunState::Running), None);
        assert_eq!(after_run(&v, 0, RunState::Completed), Some(Next::Launch(1)));
        assert_eq!(
            after_run(&v, 1, RunState::OutOfMemory),
            Some(Next::Stop("“two ranks” ended OutOfMemory; see its log in the run list".into()))
        );
        let id = RunId::parse("20261125-101010-cpu_tiny").unwrap();
        assert_eq!(launched(&v, 0, Answer::Launched(id.clone())), Launched::Run(id));
        assert_eq!(launched(&v, 0, Answer::Script("#!/bin/bash".into())), Launched::Nothing);
        let mut report = ErrorReport::new(ErrorCode::BadRequest, "no.");
        report.problems.0.push(Problem::new("dp", "too many ranks"));
        let Launched::Stop(why) = launched(&v, 1, Answer::Refused(report)) else { panic!("a refusal goes on") };
        assert!(why.starts_with("“two ranks” was refused: no. ") && why.contains("too many ranks"), "{why}");
        let full = ErrorReport::new(ErrorCode::QuotaExceeded, "learner1 has 1 run queued or running");
        assert_eq!(launched(&v, 1, Answer::Refused(full)), Launched::Wait, "a learner's full quota waits, it does not stop");
    }

    #[test]
    fn the_status_says_which_variant_runs_or_why_the_sweep_stopped() {
        let v = variants();
        assert_eq!(Progress::Idle.status(&v, false, None), "Runs each variant here, one after another.");
        assert_eq!(Progress::Idle.status(&v, true, None), "All variants ran.");
        assert_eq!(Progress::Launching { index: 1, ticket: 7 }.status(&v, false, None), "Running 2 of 2: two ranks");
        assert_eq!(Progress::Running(0).status(&v, true, None), "Running 1 of 2: one rank");
        assert_eq!(
            Progress::Running(1).status(&v, false, Some("waiting behind 1 queued run (1 of 1 ranks in use)")),
            "2 of 2, two ranks, is queued on the server: waiting behind 1 queued run (1 of 1 ranks in use)",
            "a variant the server holds in its queue says its place there"
        );
        assert_eq!(Progress::Stopped("why".into()).status(&v, true, None), "why");
        assert!(Progress::Waiting(1).status(&v, false, None).starts_with("2 of 2, two ranks, waits for one of your runs to end"));
        let busy: Vec<(&str, bool)> = [
            Progress::Idle,
            Progress::Launching { index: 0, ticket: 1 },
            Progress::Running(0),
            Progress::Waiting(1),
            Progress::Stopped("x".into()),
        ]
        .iter()
        .map(|p| (p.name(), p.busy()))
        .collect();
        assert_eq!(busy, [("idle", false), ("launching", true), ("running", true), ("waiting", true), ("stopped", false)]);
        assert_eq!(labels(&v), ["one rank", "two ranks"]);
    }

    #[test]
    fn measures_are_named() {
        assert_eq!(Measure::parse("efficiency"), Ok(Measure::Efficiency));
        assert_eq!(Measure::parse("agreement"), Ok(Measure::Agreement));
        assert_eq!(Measure::parse("scaling"), Ok(Measure::Scaling));
        assert_eq!(Measure::parse("memory"), Ok(Measure::Memory));
        assert_eq!(Measure::parse("state"), Ok(Measure::State));
        assert_eq!(Measure::Agreement.loss_tag().map(|t| t.0), Some(tags::LOSS_VALID));
        assert!(
            Measure::parse("speed")
                .unwrap_err()
                .contains("throughput, efficiency, scaling, memory, state, loss, step-loss, rmse or agreement")
        );
    }

    #[test]
    fn memory_is_the_largest_peak_reported() {
        let peaks = series(tags::run::PEAK_MEMORY, &[0.5, 0.75, 0.75]);
        assert_eq!(measured(Measure::Memory, std::slice::from_ref(&peaks)), Some(0.75));
        assert_eq!(measured(Measure::Throughput, &[peaks]), None);
    }

    #[test]
    fn the_state_held_is_its_three_parts_at_the_last_report() {
        let [params, grads, optimizer] = tags::run::STATE_HELD;
        let held = [series(params, &[4.0, 2.0]), series(grads, &[4.0, 2.0]), series(optimizer, &[8.0, 4.0])];
        assert_eq!(measured(Measure::State, &held), Some(8.0));
        assert_eq!(measured(Measure::State, &held[..2]), None, "a part not reported is no total");
    }

    #[test]
    fn throughput_is_the_median_after_the_first_epoch() {
        assert_eq!(throughput(&[series(tags::SAMPLES_PER_SEC, &[3.0, 10.0, 12.0, 11.0])]), Some(11.0));
        assert_eq!(throughput(&[series(tags::SAMPLES_PER_SEC, &[3.0])]), Some(3.0));
        assert_eq!(throughput(&[series(tags::LOSS_TRAIN, &[3.0])]), None);
        assert_eq!(throughput(&[series(tags::SAMPLES_PER_SEC, &[])]), None);
    }

    #[test]
    fn efficiency_is_per_rank_throughput_over_the_first_variants() {
        let e = efficiencies(&[(1, Some(10.0)), (2, Some(15.0)), (4, None)]);
        assert_eq!(e, vec![Some(1.0), Some(0.75), None]);
        assert_eq!(efficiencies(&[(1, None), (2, Some(15.0))]), vec![None, None]);
    }

    #[test]
    fn bars_scale_to_the_largest_value_and_leave_unrun_rows_empty() {
        let labels = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let measured = |m: Option<f64>| Figures { measured: m, ..Figures::default() };
        let b = bars(&labels, &[measured(Some(10.0)), measured(Some(5.0)), measured(None)], Measure::Throughput);
        assert_eq!(b[0].width, WIDTH - LABEL_WIDTH - VALUE_ROOM);
        assert_eq!(b[1].width * 2.0, b[0].width);
        assert_eq!((b[2].width, b[2].text.as_str()), (0.0, "not run yet"));
        assert!(b[2].y > b[1].y && b[1].y > b[0].y);
        assert_eq!(bars(&labels[..1], &[measured(Some(0.75))], Measure::Efficiency)[0].text, "75 %");
    }

    #[test]
    fn a_bar_carries_its_prediction_as_a_tick_and_its_mfu_in_words() {
        let labels = ["a".to_owned(), "b".to_owned()];
        let figures = [
            Figures { measured: Some(10.0), predicted: Some(20.0), mfu: Some(1.25) },
            Figures { measured: None, predicted: Some(5.0), mfu: None },
        ];
        let b = bars(&labels, &figures, Measure::Throughput);
        let span = WIDTH - LABEL_WIDTH - VALUE_ROOM;
        assert_eq!((b[0].width, b[0].predicted_x), (span / 2.0, Some(span)), "the larger of the two sets the scale");
        assert_eq!(b[0].text, "10.0 samples/s · predicted 20.0 samples/s · MFU 1.2 %");
        assert_eq!(b[1].text, "not run yet · predicted 5.0 samples/s");
    }

    #[test]
    fn curves_share_one_box_and_skip_missing_runs() {
        let c = curves(&[Some(vec![(0.0, 1.0), (10.0, 0.5)]), None, Some(vec![(0.0, 0.8), (20.0, 0.25)])]);
        assert!(c.paths[1].is_none());
        let first = c.paths[0].as_deref().unwrap();
        assert!(first.starts_with(&format!("M{CURVES_MARGIN:.1} ")), "{first}");
        // The highest loss sits at the top of the plot area, the lowest at the bottom.
        assert!(first.starts_with(&format!("M{CURVES_MARGIN:.1} {:.1}", CURVES_MARGIN / 2.0)), "{first}");
        assert!(c.paths[2].as_deref().unwrap().ends_with(&format!(
            "{:.1} {:.1}",
            WIDTH - CURVES_MARGIN / 2.0,
            CURVES_HEIGHT - CURVES_MARGIN / 2.0
        )));
        assert!(!c.y_ticks.is_empty() && !c.x_ticks.is_empty());
        assert!(curves(&[None, Some(vec![])]).paths.iter().all(Option::is_none));
        let valid = series(tags::LOSS_VALID, &[0.5, 0.25]);
        assert_eq!(loss_curve(std::slice::from_ref(&valid), tags::LOSS_VALID, LossAxis::Step), Some(vec![(0.0, 0.5), (10.0, 0.25)]));
        // Along time, from the run's first point: a run that started at wall 100 and reported
        // again 30 s later.
        let mut timed = valid;
        for (i, b) in timed.buckets.iter_mut().enumerate() {
            (b.first_wall, b.last_wall) = (100.0 + 30.0 * i as f64, 100.0 + 30.0 * i as f64);
        }
        assert_eq!(loss_curve(&[timed], tags::LOSS_VALID, LossAxis::Time), Some(vec![(0.0, 0.5), (30.0, 0.25)]));
        assert_eq!(Measure::parse("rmse").unwrap().loss_tag().unwrap().0, tags::RMSE_U10M_VALID);
        assert_eq!(Measure::parse("step-loss").unwrap().loss_tag().unwrap().0, tags::step::LOSS_TRAIN);
        assert!(Measure::parse("steploss").unwrap_err().contains("step-loss"));
    }

    #[test]
    fn a_variant_runs_on_dp_times_its_model_parallel_ranks() {
        let file = ConfigFile::parse(include_str!("../../shipped/ViT.yaml")).unwrap();
        let variant =
            |dp, overrides: &[&str]| Variant { label: "v".into(), dp, overrides: overrides.iter().map(|o| (*o).to_owned()).collect() };
        assert_eq!(ranks(Some(&file), "cpu_mp", &variant(2, &["tensor_parallel=2"])), 4);
        assert_eq!(ranks(Some(&file), "cpu_mp", &variant(1, &["context_parallel=2"])), 2);
        assert_eq!(ranks(None, "cpu_mp", &variant(2, &["tensor_parallel=2"])), 2, "dp alone without the file");
    }
}
