//! A run as the run block follows it: its state and reason, the log streaming in, cancel; and
//! the list of every run, to chart or reopen, each marked with whose it is (a learner's own
//! listed first). On a viewer's page the controls that would start or stop a run give way to
//! [`ViewerNote`], except a learner's for their own runs when the instructor allows them; no
//! page offers to stop a run of the class its server follows.

use leptos::prelude::*;
use scalebook_page::progress::Progress;
use scalebook_shared::Problems;
use scalebook_shared::estimate::Prediction;
use scalebook_shared::protocol::{RunId, Series, run_list};

use super::run_placement::RunPlacement;
use super::run_prediction::{self, RunPrediction};
use super::run_slurm::{RunErrors, RunSlurm};
use crate::clock::local_clock;
use crate::runs::{Runs, from_class};
use crate::storage;

/// Log lines shown (the stream keeps more).
const LOG_LINES_SHOWN: usize = 200;

/// A log box scrolled this close to its end counts as at its end (rounding, a last half line).
const TAIL_SLACK_PX: i32 = 8;

#[component]
pub fn CurrentRun(id: RunId, runs: Runs) -> impl IntoView {
    let stream = runs.watch(&id);
    let record = {
        let id = id.clone();
        Memo::new(move |_| runs.record(&id))
    };
    let log = NodeRef::<leptos::html::Pre>::new();
    let error_log = stream.log.clone();
    let lines = stream.log.clone();
    let log_text = move || {
        lines.with(|lines| {
            let skip = lines.len().saturating_sub(LOG_LINES_SHOWN);
            lines[skip..].iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join("\n")
        })
    };
    // The text and the scroll are set together, after each other: a scroll made before the
    // text was drawn would leave the last lines (a run's result) below the box.
    Effect::new(move |_| {
        let text = log_text();
        if let Some(pre) = log.get() {
            follow_tail(&pre, &text);
        }
    });
    let prediction = run_prediction::load(&id);
    let cancel_id = id.clone();
    view! {
        <div class="current-run" data-run=id.to_string()>
            {move || record.get().map(|r| {
                let state = r.state();
                let reason = r.reason().map(str::to_owned);
                let (cancel_id, resume_id) = (cancel_id.clone(), cancel_id.clone());
                let may = runs.may_cancel(&r);
                view! {
                    <p class="run-state" data-state=format!("{state:?}").to_lowercase()>
                        <span class=format!("badge state-{}", state.label().replace(' ', "-"))>{state.label()}</span>
                        // One item of the line's flex row, its reason right after the config:
                        // the row's gap would stand between them otherwise.
                        <span class="run-what">
                            {format!(" run {} of {}", r.id, r.config)}
                            {reason.map(|why| view! { <span class="reason">{format!(": {why}")}</span> })}
                        </span>
                        {(!state.is_final() && may).then(|| view! {
                            <button type="button" class="cancel" on:click=move |_| { runs.cancel(&cancel_id); }>"Cancel"</button>
                        })}
                        // Offered only where the server found a checkpoint to go on from.
                        {(r.resumable() && may).then(|| view! {
                            <button type="button" class="resume" title="Go on from its last checkpoint (saved after every epoch)"
                                on:click=move |_| { runs.resume(&resume_id); }>"Resume"</button>
                        })}
                    </p>
                }
            })}
            <RunSlurm record runs />
            <RunErrors record log=error_log />
            <RunProgress series=stream.series.clone() running=Signal::derive(move || record.with(|r| r.as_ref().is_some_and(|r| !r.state().is_final()))) prediction />
            <RunPrediction id=id.clone() series=stream.series.clone() loaded=prediction />
            <RunPlacement id=id.clone() record />
            <pre class="log" node_ref=log tabindex="0" aria-label="Log of the run"></pre>
        </div>
    }
}

/// Shows `text` in the log box `pre`, which stays at its end if it was there (a reader who
/// scrolled up to older lines is left where they are).
fn follow_tail(pre: &web_sys::HtmlElement, text: &str) {
    let at_end = pre.scroll_top() + pre.client_height() >= pre.scroll_height() - TAIL_SLACK_PX;
    pre.set_text_content(Some(text));
    if at_end {
        pre.set_scroll_top(pre.scroll_height());
    }
}

/// A run's step out of the steps it takes, as a bar, and while it goes the time it has left
/// (at the predicted pace until a step is measured).
#[component]
fn RunProgress(series: ArcRwSignal<Vec<Series>>, running: Signal<bool>, prediction: RwSignal<Option<Prediction>>) -> impl IntoView {
    let progress = Memo::new(move |_| {
        let step_s = prediction.with(|p| p.as_ref().map(|p| p.estimate.step_time_s));
        series.with(|s| Progress::of(s, step_s))
    });
    move || {
        progress.get().map(|p| {
            view! {
                <div class="run-progress" data-step=p.step data-total=p.total data-predicted=p.predicted.to_string()>
                    <progress max=p.total value=p.step aria-label="Steps taken"></progress>
                    <span class="muted">{p.text(running.get())}</span>
                </div>
            }
        })
    }
}

/// The server's refusal of a launch, each problem beside the field it names.
#[component]
pub fn Refusal(refusal: RwSignal<Option<(String, Problems)>>) -> impl IntoView {
    move || {
        refusal.get().map(|(message, problems)| {
            view! {
                <div class="refusal" role="alert">
                    // The message lists the problems too: said once, each beside its field.
                    <p class="error">{if problems.is_empty() { message } else { "The server refused the launch:".to_owned() }}</p>
                    {problems.0.into_iter().map(|p| view! { <p class="error" data-field=p.field.clone()>{p.to_string()}</p> }).collect_view()}
                </div>
            }
        })
    }
}

/// What a viewer's page shows where the launch controls would be: the room follows, the
/// instructor launches.
#[component]
pub fn ViewerNote() -> impl IntoView {
    view! { <p class="muted viewer-note">"viewing: the instructor launches runs"</p> }
}

#[component]
pub fn RunList(runs: Runs, current: RwSignal<Option<RunId>>, open: Callback<RunId>) -> impl IntoView {
    let rows = move || {
        runs.listed()
            .into_iter()
            .map(|r| {
                let id = r.id.clone();
                let charted = {
                    let id = id.clone();
                    move || runs.charted.with(|c| c.contains(&id))
                };
                let is_current = {
                    let id = id.clone();
                    move || current.with(|c| c.as_ref() == Some(&id))
                };
                let toggle_id = id.clone();
                let open_id = id.clone();
                let whose = runs.whose(&r).label();
                let class_run = from_class(&r)
                    .then_some("a run of the class you follow: it trains on the instructor's server, and only they can stop it");
                view! {
                    <tr data-run=id.to_string() data-whose=whose class:current=is_current>
                        <td class="mono">{id.to_string()}</td>
                        <td class="whose" title=class_run>{whose}</td>
                        <td>{r.config.clone()}</td>
                        <td>{r.state().label()}</td>
                        <td>{local_clock(r.created_at)}</td>
                        <td><label><input type="checkbox" class="chart-toggle" prop:checked=charted
                            on:change=move |ev| runs.set_charted(&toggle_id, event_target_checked(&ev)) />" chart"</label></td>
                        <td><button type="button" on:click=move |_| open.run(open_id.clone())>"Open"</button></td>
                    </tr>
                }
            })
            .collect_view()
    };
    // Other learners' older runs come a page at a time (a class keeps thousands).
    let older = move || {
        let older = runs.older.get();
        (older > 0).then(|| {
            let next = older.min(run_list::RUN_PAGE as u64);
            view! {
                <p class="older-runs">
                    <button type="button" on:click=move |_| { runs.show_older(); }>{format!("Show {next} older runs")}</button>
                    <span class="muted">{format!(" of {older} other learners' runs not listed yet")}</span>
                </p>
            }
        })
    };
    view! {
        <details class="run-list">
            <summary>{move || list_title(runs.records.with(Vec::len), runs.older.get())}</summary>
            <div class="run-table">
                <table>
                    <thead><tr><th>"run"</th><th>"whose"</th><th>"config"</th><th>"state"</th><th>"created"</th><th></th><th></th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            {older}
        </details>
    }
}

/// The run list's title: how many runs it lists, and of how many when older ones are not
/// listed yet.
fn list_title(listed: usize, older: u64) -> String {
    match older {
        0 => format!("All runs ({listed})"),
        older => format!("All runs ({listed} of {})", listed as u64 + older),
    }
}

pub fn remembered(key: &str) -> Option<RunId> {
    RunId::parse(&storage::load(key)?).ok()
}

pub fn remember(key: &str, id: &RunId) {
    storage::keep(key, id.as_str());
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::{LogLine, RunRecord, RunState};
    use wasm_bindgen::JsCast;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::runs::test_record;
    use crate::testing::{Mounted, mount, settle};

    /// Run `r1` as the run block shows it, under a `Suspense` as every block is, its log in a
    /// box a few lines high as the page's style draws it.
    fn mount_run(runs: Runs) -> Mounted {
        mount(move || {
            view! {
                <style>"pre.log { max-height: 4rem; overflow: auto; }"</style>
                <Suspense fallback=|| view! { <p class="block-loading">"Loading this block…"</p> }>
                    <CurrentRun id=RunId::parse("r1").unwrap() runs />
                </Suspense>
            }
        })
    }

    fn lines(range: std::ops::Range<u64>) -> Vec<LogLine> {
        range.map(|seq| LogLine { seq, text: format!("line {seq}") }).collect()
    }

    /// Run `r1`, launched and then ended in `state` for `reason`.
    fn ended(state: RunState, reason: &str, checkpoint: bool) -> RunRecord {
        let mut record = test_record("r1", None);
        record.transition(state, 1.0, Some(reason.to_owned()));
        RunRecord { checkpoint, ..record }
    }

    fn scrolled(block: &Mounted) -> String {
        let Some(pre) = block.find("pre.log").and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok()) else { return "no pre".into() };
        format!(
            "top {} client {} height {} loading {}",
            pre.scroll_top(),
            pre.client_height(),
            pre.scroll_height(),
            block.find(".block-loading").is_some()
        )
    }

    /// Whether the log box shows its last line.
    fn at_the_end(block: &Mounted) -> bool {
        let Some(pre) = block.find("pre.log").and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok()) else { return false };
        pre.scroll_height() > pre.client_height() && pre.scroll_top() + pre.client_height() >= pre.scroll_height() - 1
    }

    #[wasm_bindgen_test]
    async fn the_log_stays_at_its_end_as_the_run_ends() {
        let runs = Runs::unconnected();
        runs.records.set(vec![test_record("r1", None)]);
        let block = mount_run(runs);
        runs.watch(&RunId::parse("r1").unwrap()).add_log(lines(1..40));
        settle().await;
        assert!(at_the_end(&block), "the running log follows its tail: {}", scrolled(&block));
        // The run ends: its state changes, and its last lines (the result) arrive.
        runs.records.set(vec![ended(RunState::Completed, "done", false)]);
        runs.watch(&RunId::parse("r1").unwrap()).add_log(lines(40..45));
        for _ in 0..5 {
            settle().await;
        }
        assert!(block.find(".block-loading").is_none(), "the block went back to loading");
        assert!(at_the_end(&block), "the log left its end: {}", block.text("pre.log"));
    }

    #[wasm_bindgen_test]
    async fn the_state_line_reads_as_one_sentence_and_offers_resume_only_with_a_checkpoint() {
        let runs = Runs::unconnected();
        runs.records.set(vec![ended(RunState::Cancelled, "cancelled before it started", false)]);
        let block = mount_run(runs);
        settle().await;
        // The config and its reason in one item of the row: no gap before the colon.
        assert_eq!(block.text(".run-state .run-what").trim(), "run r1 of cpu_tiny: cancelled before it started");
        assert!(block.find(".run-state button.resume").is_none(), "Resume offered with no checkpoint");
        runs.records.set(vec![ended(RunState::Cancelled, "cancelled", true)]);
        settle().await;
        assert!(block.find(".run-state button.resume").is_some(), "no Resume although a checkpoint is there");
    }
}
