//! The run block's signals and the effects that tie them to the server's answers, so the
//! component itself only lays them out. What they decide is `scalebook_page`'s run model.

use leptos::prelude::*;
use scalebook_page::blocks::run_model::{self, Gate, Settled, Waiting};
use scalebook_shared::Problems;
use scalebook_shared::cluster::{Cluster, ExecutorKind};
use scalebook_shared::config::TrainConfig;
use scalebook_shared::protocol::{LaunchRequest, LearnerRuns, RunId, SlurmRequest};

use super::run_status::{remember, remembered};
use crate::classroom::Classroom;
use crate::library::{Library, Ready};
use crate::net::ws::ConnectionState;
use crate::runs::{Runs, Whose};
use crate::working::WorkingConfig;

#[derive(Clone, Copy)]
pub struct RunState {
    pub runs: Runs,
    pub library: Library,
    pub working: WorkingConfig,
    /// The run the block shows (remembered across reloads).
    pub current: RwSignal<Option<RunId>>,
    /// `LOCAL` or a cluster's name (the working config's).
    pub target: RwSignal<String>,
    pub slurm: RwSignal<SlurmRequest>,
    pub waiting: RwSignal<Option<Waiting>>,
    /// The batch script last shown, with the request it is for.
    pub previewed: RwSignal<Option<(LaunchRequest, String)>>,
    /// The server's refusal of the last request, with the problems beside their fields.
    pub refusal: RwSignal<Option<(String, Problems)>>,
    pub open: Callback<RunId>,
    /// What this page may launch as a learner (`None`: the instructor's page, or a viewer's
    /// that launches nothing).
    pub learner: Memo<Option<LearnerRuns>>,
    /// The Slurm cluster chosen, if the target is one (never for a learner).
    pub slurm_cluster: Memo<Option<Cluster>>,
}

impl RunState {
    pub fn new(config: &str, dp: u32) -> RunState {
        let runs = expect_context::<Runs>();
        let library = expect_context::<Library>();
        let working = WorkingConfig::claim(config, dp);
        let memory_key = format!("scalebook-run:{}", window().location().hash().unwrap_or_default());
        let current = RwSignal::new(remembered(&memory_key));
        if let Some(id) = current.get_untracked() {
            runs.watch(&id);
        }
        let open = Callback::new(move |id: RunId| {
            runs.watch(&id);
            remember(&memory_key, &id);
            current.set(Some(id));
        });
        let target = working.target;
        let learner = Memo::new(move |_| runs.learner_runs());
        let slurm_cluster = Memo::new(move |_| {
            let clusters = library.clusters.ready().filter(|_| learner.with(Option::is_none))?;
            clusters.get(&target.get()).ok().filter(|c| c.executor == ExecutorKind::Slurm).cloned()
        });
        let state = RunState {
            runs,
            library,
            working,
            current,
            target,
            slurm: RwSignal::new(SlurmRequest::default()),
            waiting: RwSignal::new(None),
            previewed: RwSignal::new(None),
            refusal: RwSignal::new(None),
            open,
            learner,
            slurm_cluster,
        };
        state.follow_the_presenter();
        state.settle_answers();
        // A refusal stands for the request it answered: a changed request clears it.
        Effect::new(move |_| {
            state.request();
            state.refusal.set(None);
        });
        state
    }

    /// The config as it will run: the named one with the working changes.
    fn effective(&self) -> Option<TrainConfig> {
        run_model::effective(&*self.library.configs.ready()?, &self.working.name.get()?, &self.working.overrides.get())
    }

    /// The request a launch would send now.
    pub fn request(&self) -> Option<LaunchRequest> {
        let slurm = self.slurm_cluster.get().map(|_| SlurmRequest { cluster: self.target.get(), ..self.slurm.get() });
        Some(run_model::request(self.working.name.get()?, self.working.overrides.get(), self.working.dp.get(), slurm))
    }

    /// The Slurm settings checked as the server will check them.
    pub fn slurm_problems(&self) -> Problems {
        let layout = self.effective().and_then(|c| c.layout_for_dp(self.working.dp.get() as usize).ok());
        let (Some(_), Some(clusters), Some(layout)) = (self.slurm_cluster.get(), self.library.clusters.ready(), layout) else {
            return Problems::default();
        };
        let request = SlurmRequest { cluster: self.target.get(), ..self.slurm.get() };
        request.resolve(&clusters, &layout).err().map(|e| e.problems()).unwrap_or_default()
    }

    /// A learner's rules as the server will check them: shown as they edit, gone once fixed.
    pub fn learner_problems(&self) -> Problems {
        let (Some(allowed), Some(request)) = (self.learner.get(), self.request()) else { return Problems::default() };
        let (config, file) = (self.effective(), self.library.configs.ready());
        let sized = match (&config, &file) {
            (Some(config), Some(file)) => Some((config, &**file)),
            _ => None,
        };
        run_model::learner_problems(&allowed, &request, sized)
    }

    /// Why the Launch button is off, or `None` when it is on.
    pub fn blocked(&self) -> Option<String> {
        let learner = self.learner.get().map(|allowed| {
            let in_use = self.runs.learner_runs_in_use();
            (allowed, self.learner_problems().is_empty(), in_use)
        });
        Gate {
            learner,
            config_problems: self.working.problems.get(),
            slurm_ok: self.slurm_problems().is_empty(),
            connected: self.runs.connection.get() == ConnectionState::Open,
            waiting: self.waiting.with(Option::is_some),
        }
        .blocked()
    }

    /// Sends the request: a launch, or (`preview`) a request for its batch script.
    pub fn send(&self, preview: bool) {
        self.refusal.set(None);
        let Some(request) = self.request() else { return };
        let sent = if preview {
            self.runs.preview_slurm(request.clone()).map(|t| Waiting::Preview(t, request))
        } else {
            self.runs.launch(request).map(Waiting::Launch)
        };
        match sent {
            Ok(w) => self.waiting.set(Some(w)),
            Err(message) => self.refusal.set(Some((message, Problems::default()))),
        }
    }

    /// Whether the script shown is the one the current settings would submit.
    pub fn script_is_current(&self) -> bool {
        self.previewed.with(|p| p.as_ref().is_some_and(|(r, _)| Some(r) == self.request().as_ref()))
    }

    /// A page following the instructor shows the run the instructor charts (its state, log
    /// and cancel where allowed), unless it opened one of its own.
    fn follow_the_presenter(self) {
        let Some(classroom) = use_context::<Classroom>() else { return };
        Effect::new(move |_| {
            let Some(presented) = classroom.presented_run() else { return };
            let own = self
                .current
                .with_untracked(|id| id.as_ref().and_then(|id| self.runs.record(id)).is_some_and(|r| self.runs.whose(&r) == Whose::Yours));
            if !own && self.current.with_untracked(|id| id.as_ref() != Some(&presented)) {
                self.runs.watch(&presented);
                self.current.set(Some(presented));
            }
        });
    }

    /// Acts on the server's answer to the waiting request.
    fn settle_answers(self) {
        Effect::new(move |_| {
            let Some(waiting) = self.waiting.get() else { return };
            let ticket = match &waiting {
                Waiting::Launch(t) | Waiting::Preview(t, _) => *t,
            };
            let Some(answer) = self.runs.answer(ticket) else { return };
            self.waiting.set(None);
            match run_model::settle(waiting, answer) {
                Settled::Open(id) => self.open.run(id),
                Settled::Script(request, script) => self.previewed.set(Some((request, script))),
                Settled::Refused(message, problems) => self.refusal.set(Some((message, problems))),
                Settled::Nothing => {}
            }
        });
    }
}
