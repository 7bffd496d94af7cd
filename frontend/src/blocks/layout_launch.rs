//! "Run this layout": the layout explored in an estimate or a rank grid, launched with a
//! config on this machine (or, from an estimate of a Slurm cluster's GPU, as a batch job whose
//! script is shown before it is submitted), then followed under the block: its progress, and
//! the prediction the server recorded at launch beside what the run measures.

use leptos::prelude::*;
use scalebook_page::blocks::run_model::{self, Settled, Waiting};
use scalebook_shared::Problems;
use scalebook_shared::protocol::{LaunchRequest, RunId, SlurmRequest};

use super::layout_state::LayoutState;
use super::run_status::{CurrentRun, Refusal, ViewerNote};
use crate::net::ws::ConnectionState;
use crate::runs::Runs;

/// Where a layout runs: this machine, or a Slurm cluster's GPU model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Where {
    Here,
    Slurm { cluster: String, gpu: String },
}

#[component]
pub fn LayoutLaunch(config: Signal<String>, state: LayoutState, place: Signal<Where>) -> impl IntoView {
    let runs = expect_context::<Runs>();
    let waiting = RwSignal::new(None::<Waiting>);
    let previewed = RwSignal::new(None::<(LaunchRequest, String)>);
    let refusal = RwSignal::new(None::<(String, Problems)>);
    let launched = RwSignal::new(None::<RunId>);
    // A learner launches on this machine only; the server would refuse a batch job anyway.
    let place = Signal::derive(move || if runs.learner_runs().is_some() { Where::Here } else { place.get() });
    let request = Memo::new(move |_| {
        let layout = state.layout.get().map_err(|e| e.problems())?;
        let slurm = match place.get() {
            Where::Here => None,
            Where::Slurm { cluster, gpu } => Some(SlurmRequest { cluster, gpu: Some(gpu), ..SlurmRequest::default() }),
        };
        run_model::layout_request(config.get(), &state.run(&layout), slurm).map_err(|p| Problems(vec![p]))
    });
    // A changed request clears the last refusal, which answered another one.
    Effect::new(move |_| {
        request.track();
        refusal.set(None);
    });
    Effect::new(move |_| {
        let Some(w) = waiting.get() else { return };
        let ticket = match &w {
            Waiting::Launch(t) | Waiting::Preview(t, _) => *t,
        };
        let Some(answer) = runs.answer(ticket) else { return };
        waiting.set(None);
        match run_model::settle(w, answer) {
            Settled::Open(id) => {
                runs.watch(&id);
                launched.set(Some(id));
            }
            Settled::Script(asked, script) => previewed.set(Some((asked, script))),
            Settled::Refused(message, problems) => refusal.set(Some((message, problems))),
            Settled::Nothing => {}
        }
    });
    let send = move |preview: bool| {
        let Ok(asked) = request.get_untracked() else { return };
        let sent = match preview {
            true => runs.preview_slurm(asked.clone()).map(|t| Waiting::Preview(t, asked)),
            false => runs.launch(asked).map(Waiting::Launch),
        };
        match sent {
            Ok(w) => waiting.set(Some(w)),
            Err(message) => refusal.set(Some((message, Problems::default()))),
        }
    };
    let blocked = move || runs.connection.get() != ConnectionState::Open || waiting.with(Option::is_some) || request.with(Result::is_err);
    let script_is_current =
        move || previewed.with(|p| p.as_ref().is_some_and(|(asked, _)| request.with(|r| r.as_ref().ok() == Some(asked))));
    view! {
        <div class="layout-launch">
            <Show when=move || runs.may_launch() || runs.learner_runs().is_some() fallback=|| view! { <ViewerNote /> }>
                <div class="toolbar">
                    {move || match place.get() {
                        Where::Here => view! {
                            <button type="button" class="run-layout" on:click=move |_| send(false) disabled=blocked>
                                {move || format!("Run this layout with {} on this machine", config.get())}
                            </button>
                        }.into_any(),
                        Where::Slurm { cluster, .. } => view! {
                            <button type="button" class="preview-layout" on:click=move |_| send(true) disabled=blocked>"Show the batch script"</button>
                            <button type="button" class="run-layout" on:click=move |_| send(false) disabled=move || blocked() || !script_is_current()
                                title="Submit after reading the script it will run">{format!("Submit to {cluster}")}</button>
                        }.into_any(),
                    }}
                    <span class="muted">{move || request.get().err().map(|p| p.to_string())}</span>
                </div>
            </Show>
            {move || previewed.get().filter(|_| matches!(place.get(), Where::Slurm { .. })).map(|(_, script)| view! {
                <details class="slurm-script" open>
                    <summary>"The batch script that will be submitted"</summary>
                    <pre>{script}</pre>
                </details>
            })}
            <Refusal refusal />
            {move || launched.get().map(|id| view! { <CurrentRun id runs /> })}
        </div>
    }
}
