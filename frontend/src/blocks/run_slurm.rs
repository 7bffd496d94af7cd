//! What a run's page says beyond its state: for a Slurm run, Slurm's word on its job (place in
//! the queue and expected start, nodes, time and resources held, and how old that word is);
//! for a run that failed, the lines of its log that say why, before the log itself.

use leptos::prelude::*;
use scalebook_page::runs::slurm::{age, describe, error_lines};
use scalebook_shared::protocol::{ExecutorSpec, LogLine, RunRecord, RunState};

use crate::clock::local_clock;
use crate::runs::Runs;

/// The states whose log is searched for what went wrong.
const FAILED: [RunState; 5] = [RunState::Failed, RunState::OutOfMemory, RunState::NodeFailure, RunState::Timeout, RunState::Lost];

#[component]
pub fn RunSlurm(record: Memo<Option<RunRecord>>, runs: Runs) -> impl IntoView {
    move || {
        let r = record.get().filter(|r| matches!(r.executor, ExecutorSpec::Slurm(_)))?;
        let now = js_sys::Date::now() / 1000.0;
        let lines = r.slurm.as_ref().map(|s| describe(s, r.state(), now, local_clock)).unwrap_or_default();
        // How old: only while Slurm's word can still change.
        let answered = runs.slurm_at.get().filter(|_| !r.state().is_final()).map(|(server_now, at)| age(at, server_now, local_clock));
        (!lines.is_empty() || answered.is_some()).then(|| {
            view! {
                <ul class="run-slurm" aria-label="Slurm's word on the job">
                    {lines.into_iter().map(|line| view! { <li>{line}</li> }).collect_view()}
                    {answered.map(|text| view! { <li class="muted slurm-age">{text}</li> })}
                </ul>
            }
        })
    }
}

#[component]
pub fn RunErrors(record: Memo<Option<RunRecord>>, log: ArcRwSignal<Vec<LogLine>>) -> impl IntoView {
    move || {
        record.with(|r| r.as_ref().is_some_and(|r| FAILED.contains(&r.state()))).then_some(())?;
        let lines: Vec<String> =
            log.with(|lines| error_lines(lines.iter().map(|l| l.text.as_str())).into_iter().map(str::to_owned).collect());
        (!lines.is_empty()).then(|| {
            view! {
                <div class="run-errors" role="status">
                    <strong>"What went wrong (the log's error lines, before the whole log):"</strong>
                    <pre>{lines.join("\n")}</pre>
                </div>
            }
        })
    }
}
