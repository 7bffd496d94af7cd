//! The sweep block's signals and the effects that launch its variants one after another, so
//! the component itself only lays them out. What they decide is `scalebook_page`'s sweep
//! model. The state is kept for the page's life ([`crate::kept`]): a sweep runs to its end
//! wherever the page goes, and its block finds it again.

use leptos::prelude::*;
use scalebook_page::prediction::model_flops;
use scalebook_shared::estimate::Prediction;
use scalebook_shared::protocol::{RunId, RunState};
use scalebook_shared::sweep::Variant;

use super::run_prediction;
use super::run_status::{remember, remembered};
use super::sweep_model::{self, Launched, Measure, Next, Progress, measured};
use crate::library::Library;
use crate::net::fetched::fetched;
use crate::net::ws::ConnectionState;
use crate::runs::Runs;

#[derive(Clone, Copy)]
pub struct SweepState {
    pub runs: Runs,
    pub library: Library,
    /// The config the variants change.
    pub chosen: RwSignal<String>,
    /// Each variant's run, once launched (remembered across reloads).
    pub ids: RwSignal<Vec<Option<RunId>>>,
    pub progress: RwSignal<Progress>,
    pub variants: StoredValue<Vec<Variant>>,
    /// Where the runs are remembered ([`sweep_model::memory_key`]).
    memory: StoredValue<String>,
    /// The chapter the sweep's runs are charted in.
    chapter: StoredValue<Option<String>>,
    /// Each variant's measured figure (throughput, or peak memory), once its run has one.
    pub values: Memo<Vec<Option<f64>>>,
    /// Each variant's prediction, recorded as its run launched.
    pub predictions: ReadSignal<Option<Vec<Option<Prediction>>>>,
}

impl SweepState {
    /// The sweep of `config` remembered under `memory`, in `chapter`.
    pub fn new(memory: String, chapter: Option<String>, config: String, variants: Vec<Variant>, measure: Measure) -> SweepState {
        let runs = expect_context::<Runs>();
        let library = expect_context::<Library>();
        let ids = RwSignal::new((0..variants.len()).map(|i| remembered(&format!("{memory}:{i}"))).collect::<Vec<_>>());
        for id in ids.get_untracked().iter().flatten() {
            runs.watch(id);
        }
        let values = Memo::new(move |_| {
            let ids = ids.get();
            let streams = ids.iter().map(|id| id.as_ref().and_then(|id| runs.stream(id)));
            streams.map(|s| s.and_then(|s| s.series.with(|series| measured(measure, series)))).collect::<Vec<_>>()
        });
        let predictions = fetched(
            move || ids.get(),
            |ids| async move {
                let mut loaded = Vec::with_capacity(ids.len());
                for id in ids {
                    loaded.push(match id {
                        Some(id) => run_prediction::fetch(&id).await,
                        None => None,
                    });
                }
                loaded
            },
        );
        let state = SweepState {
            runs,
            library,
            chosen: RwSignal::new(config),
            ids,
            progress: RwSignal::new(Progress::Idle),
            variants: StoredValue::new(variants),
            memory: StoredValue::new(memory),
            chapter: StoredValue::new(chapter),
            values,
            predictions,
        };
        state.settle_launches();
        state.go_on_when_a_run_ends();
        state.launch_when_a_learner_run_ends();
        state
    }

    /// Each variant's throughput predicted at launch, and its bar's figures.
    pub fn figures(&self, measure: sweep_model::Measure) -> Vec<sweep_model::Figures> {
        let predictions = self.predictions.get().unwrap_or_default();
        let values = self.values.get();
        let predicted: Vec<Option<f64>> = (0..values.len())
            .map(|i| {
                let estimate = &predictions.get(i)?.as_ref()?.estimate;
                Some(sweep_model::predicted(measure, estimate))
            })
            .collect();
        // One per variant, before the predictions have loaded too; a rate of memory means nothing.
        let mfu: Vec<Option<f64>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                model_flops(&predictions.get(i)?.as_ref()?.estimate, (*v)?)
                    .share_of_peak
                    .filter(|_| !matches!(measure, Measure::Memory | Measure::State))
            })
            .collect();
        let (values, predicted) = match measure {
            sweep_model::Measure::Efficiency => {
                let dps: Vec<u32> = self.variants.with_value(|v| v.iter().map(|v| v.dp).collect());
                let e = |xs: &[Option<f64>]| sweep_model::efficiencies(&dps.iter().copied().zip(xs.iter().copied()).collect::<Vec<_>>());
                (e(&values), e(&predicted))
            }
            _ => (values, predicted),
        };
        values
            .into_iter()
            .zip(predicted)
            .zip(mfu)
            .map(|((measured, predicted), mfu)| sweep_model::Figures { measured, predicted, mfu })
            .collect()
    }

    /// The one seed every variant runs with ([`sweep_model::seed`]).
    pub fn seed(&self) -> u64 {
        self.memory.with_value(|memory| sweep_model::seed(memory))
    }

    /// Where variant `index`'s run is remembered.
    fn key(&self, index: usize) -> String {
        self.memory.with_value(|memory| format!("{memory}:{index}"))
    }

    /// Launches variant `index`; past the last, the sweep is done.
    fn launch(&self, index: usize) {
        let Some(variant) = self.variants.with_value(|v| v.get(index).cloned()) else {
            self.progress.set(Progress::Idle);
            return;
        };
        let name = Some(variant.label.clone());
        let request = sweep_model::request(self.chosen.get_untracked(), variant, self.seed());
        match self.runs.launch_in(request, name, self.chapter.get_value()) {
            Ok(ticket) => self.progress.set(Progress::Launching { index, ticket }),
            Err(message) => self.progress.set(Progress::Stopped(message)),
        }
    }

    /// "Run all": forgets the runs and launches the first variant.
    pub fn start(&self) {
        self.ids.update(|ids| ids.iter_mut().for_each(|id| *id = None));
        self.launch(0);
    }

    /// Whether a variant is on its way.
    pub fn busy(&self) -> bool {
        self.progress.with(Progress::busy)
    }

    /// Whether "Run all" is off: the sweep is busy, or the server is not connected.
    pub fn blocked(&self) -> bool {
        self.busy() || self.runs.connection.get() != ConnectionState::Open
    }

    /// The line beside "Run all".
    pub fn status(&self) -> String {
        let progress = self.progress.get();
        let all_ran = progress == Progress::Idle && self.values.with(|v| v.iter().all(Option::is_some));
        let queued = self.queued_reason(&progress);
        self.variants.with_value(|v| progress.status(v, all_ran, queued.as_deref()))
    }

    /// Why the server still holds the running variant's run in its queue, if it does.
    fn queued_reason(&self, progress: &Progress) -> Option<String> {
        let Progress::Running(index) = progress else { return None };
        let record = self.ids.with(|ids| ids.get(*index).cloned().flatten()).and_then(|id| self.runs.record(&id))?;
        (record.state() == RunState::Queued).then(|| record.reason().unwrap_or("waiting for its turn").to_owned())
    }

    /// The launch answered: watch the run, or stop and say why the server refused it.
    fn settle_launches(self) {
        Effect::new(move |_| {
            let Progress::Launching { index, ticket } = self.progress.get() else { return };
            let Some(answer) = self.runs.answer(ticket) else { return };
            match self.variants.with_value(|v| sweep_model::launched(v, index, answer)) {
                Launched::Run(id) => {
                    self.runs.watch(&id);
                    remember(&self.key(index), &id);
                    self.ids.update(|ids| {
                        if let Some(slot) = ids.get_mut(index) {
                            *slot = Some(id)
                        }
                    });
                    self.progress.set(Progress::Running(index));
                }
                Launched::Stop(why) => self.progress.set(Progress::Stopped(why)),
                Launched::Wait => self.progress.set(Progress::Waiting(index)),
                Launched::Nothing => {}
            }
        });
    }

    /// A run ended: the next variant starts, or the sweep stops at a run that did not complete.
    fn go_on_when_a_run_ends(self) {
        Effect::new(move |_| {
            let Progress::Running(index) = self.progress.get() else { return };
            let Some(state) =
                self.ids.with(|ids| ids.get(index).cloned().flatten()).and_then(|id| self.runs.record(&id)).map(|r| r.state())
            else {
                return;
            };
            match self.variants.with_value(|v| sweep_model::after_run(v, index, state)) {
                Some(Next::Launch(next)) => self.launch(next),
                Some(Next::Stop(why)) => self.progress.set(Progress::Stopped(why)),
                None => {}
            }
        });
    }

    /// A learner's variant refused for now (their runs at once all in use) is launched again
    /// as soon as one of their runs ends.
    fn launch_when_a_learner_run_ends(self) {
        Effect::new(move |_| {
            let Progress::Waiting(index) = self.progress.get() else { return };
            let allowed = self.runs.learner_runs().map_or(0, |learner| learner.per_learner as usize);
            if self.runs.learner_runs_in_use() < allowed {
                self.launch(index);
            }
        });
    }
}
