//! The run block: launch the chapter's working config (with the changes made in its editor)
//! on local ranks, follow the run's state, reason and log as they stream in, cancel it, and
//! pick from every run to chart or reopen (the block remembers its run across reloads).

use leptos::prelude::*;
use scalebook_shared::Problems;
use scalebook_shared::charts::format_clock;
use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::{LayoutSpec, Sizes};
use scalebook_shared::protocol::{ExecutorSpec, LaunchRequest, RunId, RunRecord};

use super::unique_id;
use crate::library::Library;
use crate::runs::Runs;
use crate::working::WorkingConfig;

/// Log lines shown (the stream keeps more).
const LOG_LINES_SHOWN: usize = 200;

#[component]
pub fn RunBlock(config: String, dp: u32) -> impl IntoView {
    let runs = expect_context::<Runs>();
    let library = expect_context::<Library>();
    let working = WorkingConfig::claim(&config, dp);
    let memory_key = format!("scalebook-run:{}", window().location().hash().unwrap_or_default());
    let current = RwSignal::new(remembered(&memory_key));
    if let Some(id) = current.get_untracked() {
        runs.watch(&id);
    }
    let ticket = RwSignal::new(None::<u64>);
    let refusal = RwSignal::new(None::<(String, Problems)>);

    let open = {
        let key = memory_key.clone();
        move |id: RunId| {
            runs.watch(&id);
            remember(&key, &id);
            current.set(Some(id));
        }
    };
    let open_launched = open.clone();
    Effect::new(move |_| {
        let Some(t) = ticket.get() else { return };
        match runs.outcome(t) {
            Some(Ok(id)) => {
                ticket.set(None);
                open_launched(id);
            }
            Some(Err(report)) => {
                ticket.set(None);
                refusal.set(Some((report.message, report.problems)));
            }
            None => {}
        }
    });

    // The config as it will run: the named one with the working changes.
    let effective = move || -> Option<TrainConfig> {
        let file = library.configs.get().ready()?;
        let mut config = file.get(&working.name.get()?).ok()?;
        config.apply_overrides(&working.overrides.get()).ok()?;
        Some(config)
    };
    let launch = move |_| {
        refusal.set(None);
        let Some(name) = working.name.get_untracked() else { return };
        let layout = effective().map(|c| LayoutSpec {
            sizes: Sizes { tp: c.tensor_parallel as u32, cp: c.context_parallel as u32, dp: working.dp.get_untracked(), pp: 1 },
            order: c.parallel_order,
        });
        let request =
            LaunchRequest { config: name, overrides: working.overrides.get_untracked(), layout, executor: ExecutorSpec::Local, seed: None };
        match runs.launch(request) {
            Ok(t) => ticket.set(Some(t)),
            Err(message) => refusal.set(Some((message, Problems::default()))),
        }
    };
    let blocked = move || {
        if working.problems.get() > 0 {
            Some("fix the config's problems first".to_owned())
        } else if runs.connection.get() != crate::net::ws::ConnectionState::Open {
            Some("waiting for the server connection".to_owned())
        } else {
            ticket.get().map(|_| "launching…".to_owned())
        }
    };
    let config_id = unique_id("run-config");
    let dp_id = unique_id("run-dp");
    view! {
        <section class="block run-block" aria-label="Run">
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="run-config" on:change=move |ev| working.switch(event_target_value(&ev))>
                    {move || library.configs.get().ready().map(|file| file.names().map(|n| {
                        let name = n.to_owned();
                        let selected = working.name.get().as_deref() == Some(n);
                        view! { <option value=name.clone() selected=selected>{name.clone()}</option> }
                    }).collect_view())}
                </select>
                <label for=dp_id.clone()>"ranks (dp)"</label>
                <input id=dp_id class="dp" type="number" min="1" max="8" prop:value=move || working.dp.get()
                    on:input=move |ev| working.dp.set(event_target_value(&ev).trim().parse().unwrap_or(1)) />
                <button type="button" class="launch" on:click=launch disabled=move || blocked().is_some()>"Launch on this machine"</button>
                <span class="muted">{blocked}</span>
            </div>
            <p class="muted">{move || {
                let changes = working.overrides.get();
                if changes.is_empty() { "Runs the config as the file defines it.".to_owned() } else { format!("With your changes: {}", changes.join(", ")) }
            }}</p>
            {move || refusal.get().map(|(message, problems)| view! {
                <div class="refusal" role="alert">
                    <p class="error">{message}</p>
                    {problems.0.into_iter().map(|p| view! { <p class="error" data-field=p.field.clone()>{p.to_string()}</p> }).collect_view()}
                </div>
            })}
            {move || current.get().map(|id| view! { <CurrentRun id runs /> })}
            <RunList runs current open=Callback::new(open.clone()) />
        </section>
    }
}

#[component]
fn CurrentRun(id: RunId, runs: Runs) -> impl IntoView {
    let stream = runs.watch(&id);
    let record = {
        let id = id.clone();
        Memo::new(move |_| runs.record(&id))
    };
    let log = NodeRef::<leptos::html::Pre>::new();
    let lines = stream.log.clone();
    Effect::new(move |_| {
        lines.track();
        if let Some(pre) = log.get() {
            pre.set_scroll_top(pre.scroll_height());
        }
    });
    let cancel_id = id.clone();
    let log_text = move || {
        stream.log.with(|lines| {
            let skip = lines.len().saturating_sub(LOG_LINES_SHOWN);
            lines[skip..].iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join("\n")
        })
    };
    view! {
        <div class="current-run" data-run=id.to_string()>
            {move || record.get().map(|r| {
                let state = r.state();
                let reason = r.reason().map(str::to_owned);
                let cancel_id = cancel_id.clone();
                view! {
                    <p class="run-state" data-state=format!("{state:?}").to_lowercase()>
                        <span class=format!("badge state-{}", state.label().replace(' ', "-"))>{state.label()}</span>
                        {format!(" run {} of {}", r.id, r.config)}
                        {reason.map(|why| view! { <span class="reason">{format!(": {why}")}</span> })}
                        {(!state.is_final()).then(|| view! {
                            <button type="button" class="cancel" on:click=move |_| { runs.cancel(&cancel_id); }>"Cancel"</button>
                        })}
                    </p>
                }
            })}
            <pre class="log" node_ref=log tabindex="0" aria-label="Log of the run">{log_text}</pre>
        </div>
    }
}

#[component]
fn RunList(runs: Runs, current: RwSignal<Option<RunId>>, open: Callback<RunId>) -> impl IntoView {
    let rows = move || {
        let mut records: Vec<RunRecord> = runs.records.get();
        records.reverse();
        records
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
                view! {
                    <tr data-run=id.to_string() class:current=is_current>
                        <td class="mono">{id.to_string()}</td>
                        <td>{r.config.clone()}</td>
                        <td>{r.state().label()}</td>
                        <td>{format_clock(r.created_at, -(js_sys::Date::new_0().get_timezone_offset() as i32))}</td>
                        <td><label><input type="checkbox" class="chart-toggle" prop:checked=charted
                            on:change=move |ev| runs.set_charted(&toggle_id, event_target_checked(&ev)) />" chart"</label></td>
                        <td><button type="button" on:click=move |_| open.run(open_id.clone())>"Open"</button></td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <details class="run-list">
            <summary>{move || format!("All runs ({})", runs.records.with(Vec::len))}</summary>
            <table>
                <thead><tr><th>"run"</th><th>"config"</th><th>"state"</th><th>"created"</th><th></th><th></th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </details>
    }
}

fn remembered(key: &str) -> Option<RunId> {
    let storage = window().local_storage().ok().flatten()?;
    RunId::parse(&storage.get_item(key).ok().flatten()?).ok()
}

fn remember(key: &str, id: &RunId) {
    if let Some(storage) = window().local_storage().ok().flatten() {
        let _ = storage.set_item(key, id.as_str());
    }
}
