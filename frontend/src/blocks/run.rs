//! The run block: launch the chapter's working config (with the changes made in its editor),
//! on this machine's cores or as a Slurm batch job whose script is shown before it is
//! submitted; then follow the run (state, reason, log, cancel) and pick from every run to
//! chart or reopen. The block remembers its run across reloads.

use leptos::prelude::*;
use scalebook_shared::Problems;
use scalebook_shared::cluster::ExecutorKind;
use scalebook_shared::config::TrainConfig;
use scalebook_shared::protocol::{ExecutorSpec, LaunchRequest, RunId, SlurmRequest};

use super::run_status::{CurrentRun, RunList, ViewerNote, remember, remembered};
use super::slurm_fields::SlurmFields;
use super::unique_id;
use crate::library::{Library, Ready};
use crate::net::ws::ConnectionState;
use crate::runs::{Answer, Runs};
use crate::working::WorkingConfig;

/// Where runs go when no cluster is chosen.
const LOCAL: &str = "local";

/// A request waiting for the server: a launch, or a preview of the script for this request.
#[derive(Debug, Clone, PartialEq)]
enum Waiting {
    Launch(u64),
    Preview(u64, LaunchRequest),
}

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
    let target = RwSignal::new(LOCAL.to_owned());
    let slurm = RwSignal::new(SlurmRequest::default());
    let waiting = RwSignal::new(None::<Waiting>);
    let previewed = RwSignal::new(None::<(LaunchRequest, String)>);
    let refusal = RwSignal::new(None::<(String, Problems)>);

    let open = Callback::new(move |id: RunId| {
        runs.watch(&id);
        remember(&memory_key, &id);
        current.set(Some(id));
    });
    Effect::new(move |_| {
        let (ticket, preview) = match waiting.get() {
            Some(Waiting::Launch(t)) => (t, None),
            Some(Waiting::Preview(t, request)) => (t, Some(request)),
            None => return,
        };
        let Some(answer) = runs.answer(ticket) else { return };
        waiting.set(None);
        match (answer, preview) {
            (Answer::Launched(id), _) => open.run(id),
            (Answer::Script(script), Some(request)) => previewed.set(Some((request, script))),
            (Answer::Refused(report), _) => refusal.set(Some((report.message, report.problems))),
            (Answer::Script(_), None) => {}
        }
    });

    let slurm_cluster = Memo::new(move |_| {
        let clusters = library.clusters.ready()?;
        let cluster = clusters.get(&target.get()).ok()?;
        (cluster.executor == ExecutorKind::Slurm).then(|| cluster.clone())
    });
    // The config as it will run: the named one with the working changes, on its layout.
    let effective = move || -> Option<TrainConfig> {
        let file = library.configs.ready()?;
        let mut config = file.get(&working.name.get()?).ok()?;
        config.apply_overrides(&working.overrides.get()).ok()?;
        Some(config)
    };
    // The layout the server will derive: the config's tp, cp and order with the chosen dp.
    let layout = move || {
        let config = effective()?;
        config.layout(config.tensor_parallel * config.context_parallel * working.dp.get() as usize).ok()
    };
    let request = move || -> Option<LaunchRequest> {
        let executor = match slurm_cluster.get() {
            Some(_) => ExecutorSpec::Slurm(Box::new(SlurmRequest { cluster: target.get(), ..slurm.get() })),
            None => ExecutorSpec::Local,
        };
        Some(LaunchRequest { config: working.name.get()?, overrides: working.overrides.get(), dp: working.dp.get(), executor, seed: None })
    };
    // The Slurm settings checked as the server will check them.
    let slurm_problems = Signal::derive(move || {
        let (Some(_), Some(clusters), Some(layout)) = (slurm_cluster.get(), library.clusters.ready(), layout()) else {
            return Problems::default();
        };
        let request = SlurmRequest { cluster: target.get(), ..slurm.get() };
        request.resolve(&clusters, &layout).err().map(|e| e.problems()).unwrap_or_default()
    });
    let blocked = move || {
        if working.problems.get() > 0 {
            Some("fix the config's problems first".to_owned())
        } else if !slurm_problems.with(Problems::is_empty) {
            Some("fix the job settings first".to_owned())
        } else if runs.connection.get() != ConnectionState::Open {
            Some("waiting for the server connection".to_owned())
        } else {
            waiting.get().map(|_| "waiting for the server…".to_owned())
        }
    };
    let send = move |preview: bool| {
        refusal.set(None);
        let Some(request) = request() else { return };
        let sent = if preview {
            runs.preview_slurm(request.clone()).map(|t| Waiting::Preview(t, request))
        } else {
            runs.launch(request).map(Waiting::Launch)
        };
        match sent {
            Ok(w) => waiting.set(Some(w)),
            Err(message) => refusal.set(Some((message, Problems::default()))),
        }
    };
    let script_is_current = move || previewed.with(|p| p.as_ref().is_some_and(|(r, _)| Some(r) == request().as_ref()));

    let config_id = unique_id("run-config");
    let target_id = unique_id("run-target");
    let dp_id = unique_id("run-dp");
    view! {
        <section class="block run-block" aria-label="Run">
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="run-config" on:change=move |ev| working.switch(event_target_value(&ev))>
                    {move || library.configs.ready().map(|file| file.names().map(|n| {
                        let selected = working.name.get().as_deref() == Some(n);
                        view! { <option value=n.to_owned() selected=selected>{n.to_owned()}</option> }
                    }).collect_view())}
                </select>
                <label for=dp_id.clone()>"ranks (dp)"</label>
                <input id=dp_id class="dp" type="number" min="1" max="4096" prop:value=move || working.dp.get()
                    on:input=move |ev| working.dp.set(event_target_value(&ev).trim().parse().unwrap_or(1)) />
                <label for=target_id.clone()>"where"</label>
                <select id=target_id class="run-target" on:change=move |ev| { target.set(event_target_value(&ev)); previewed.set(None); }>
                    <option value=LOCAL selected=true>"this machine"</option>
                    {move || library.clusters.ready().map(|clusters| clusters.names()
                        .filter(|n| clusters.get(n).is_ok_and(|c| c.executor == ExecutorKind::Slurm))
                        .map(|n| view! { <option value=n.to_owned()>{format!("{n} (Slurm)")}</option> })
                        .collect_view())}
                </select>
            </div>
            <Show when=move || runs.may_launch() fallback=|| view! { <ViewerNote /> }>
            {move || slurm_cluster.get().map(|cluster| view! { <SlurmFields cluster request=slurm problems=slurm_problems /> })}
            <div class="toolbar">
                {move || match slurm_cluster.get() {
                    None => view! {
                        <button type="button" class="launch" on:click=move |_| send(false) disabled=move || blocked().is_some()>"Launch on this machine"</button>
                    }.into_any(),
                    Some(_) => view! {
                        <button type="button" class="preview" on:click=move |_| send(true) disabled=move || blocked().is_some()>"Show the batch script"</button>
                        <button type="button" class="launch" on:click=move |_| send(false)
                            disabled=move || blocked().is_some() || !script_is_current()
                            title="Submit after reading the script it will run">{format!("Submit to {}", target.get())}</button>
                    }.into_any(),
                }}
                <span class="muted">{blocked}</span>
            </div>
            </Show>
            <p class="muted">{move || {
                let changes = working.overrides.get();
                if changes.is_empty() { "Runs the config as the file defines it.".to_owned() } else { format!("With your changes: {}", changes.join(", ")) }
            }}</p>
            {move || previewed.get().filter(|_| slurm_cluster.get().is_some()).map(|(_, script)| view! {
                <details class="slurm-script" open>
                    <summary>{move || if script_is_current() { "The batch script that will be submitted" } else { "The batch script (settings changed since: show it again)" }}</summary>
                    <pre>{script}</pre>
                </details>
            })}
            {move || refusal.get().map(|(message, problems)| view! {
                <div class="refusal" role="alert">
                    <p class="error">{message}</p>
                    {problems.0.into_iter().map(|p| view! { <p class="error" data-field=p.field.clone()>{p.to_string()}</p> }).collect_view()}
                </div>
            })}
            {move || current.get().map(|id| view! { <CurrentRun id runs /> })}
            <RunList runs current open />
        </section>
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use scalebook_shared::config::ConfigFile;
    use scalebook_shared::protocol::{Role, ServerInfo};
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::testing::{mount, settle};

    const CONFIGS: &str = include_str!("../../../config/ViT.yaml");

    fn welcome(role: Role) -> ServerInfo {
        ServerInfo {
            version: "test".into(),
            configs: vec!["cpu_short".into()],
            max_message_bytes: 65536,
            heartbeat_secs: 20,
            max_local_ranks: 1,
            role,
        }
    }

    #[wasm_bindgen_test]
    async fn a_viewer_sees_a_note_where_the_instructor_has_the_launch_button() {
        let runs = Runs::unconnected();
        let block = mount(move || {
            let file = Arc::new(ConfigFile::parse(CONFIGS).unwrap());
            provide_context(Library {
                configs: LocalResource::new(move || std::future::ready(Ok(file.clone()))),
                clusters: LocalResource::new(std::future::pending),
                baseline: LocalResource::new(std::future::pending),
            });
            provide_context(runs);
            view! { <RunBlock config="cpu_short".to_owned() dp=1 /> }
        });
        runs.server.set(Some(welcome(Role::Viewer)));
        settle().await;
        assert!(block.find("button.launch").is_none(), "a viewer's page offers a launch");
        assert_eq!(block.text(".viewer-note"), "viewing: the instructor launches runs");
        // The config stays the viewer's to explore.
        assert!(block.find("select.run-config").is_some() && block.find("input.dp").is_some());

        runs.server.set(Some(welcome(Role::Instructor)));
        settle().await;
        assert!(block.find("button.launch").is_some(), "the instructor's page has no launch");
        assert!(block.find(".viewer-note").is_none());
    }
}
