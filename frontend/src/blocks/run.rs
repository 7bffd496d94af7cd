//! The run block: launch the chapter's working config (with the changes made in its editor),
//! on this machine's cores or as a Slurm batch job whose script is shown before it is
//! submitted; then follow the run (state, reason, log, cancel) and pick from every run to
//! chart or reopen. The block remembers its run across reloads. A learner (a viewer's page,
//! when the instructor allows it) launches only the learner configs, on this machine, and is
//! told how many of their runs they are using.

use leptos::prelude::*;
use scalebook_page::blocks::run_model::changes_line;
use scalebook_shared::cluster::ExecutorKind;

use super::run_state::RunState;
use super::run_status::{CurrentRun, Refusal, RunList, ViewerNote};
use super::slurm_fields::SlurmFields;
use crate::ids::unique_id;
use crate::library::Ready;
use crate::working::LOCAL;

#[component]
pub fn RunBlock(config: String, dp: u32) -> impl IntoView {
    let state = RunState::new(&config, dp);
    let RunState { runs, library, working, current, target, slurm, previewed, refusal, open, learner, slurm_cluster, .. } = state;
    let slurm_problems = Signal::derive(move || state.slurm_problems());
    let learner_problems = Memo::new(move |_| state.learner_problems());
    let blocked = move || state.blocked();
    let send = move |preview: bool| state.send(preview);
    let script_is_current = move || state.script_is_current();
    let config_id = unique_id("run-config");
    let target_id = unique_id("run-target");
    let dp_id = unique_id("run-dp");
    view! {
        <section class="block run-block" aria-label="Run">
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="run-config" on:change=move |ev| working.switch(event_target_value(&ev))>
                    // A learner's page whose chapter config is not theirs to launch: shown, not offered.
                    {move || working.name.get().filter(|n| learner.with(|l| l.as_ref().is_some_and(|l| !l.configs.contains(n)))).map(|n| view! {
                        <option value="" disabled=true selected=true>{format!("{n} (not a learner config)")}</option>
                    })}
                    {move || library.configs.ready().map(|file| file.names()
                        .filter(|n| learner.with(|l| l.as_ref().is_none_or(|l| l.configs.iter().any(|c| c == n))))
                        .map(|n| {
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
                    {move || library.clusters.ready().filter(|_| learner.with(Option::is_none)).map(|clusters| clusters.names()
                        .filter(|n| clusters.get(n).is_ok_and(|c| c.executor == ExecutorKind::Slurm))
                        .map(|n| view! { <option value=n.to_owned()>{format!("{n} (Slurm)")}</option> })
                        .collect_view())}
                </select>
            </div>
            <Show when=move || runs.may_launch() || learner.with(Option::is_some) fallback=|| view! { <ViewerNote /> }>
            {move || learner.get().map(|allowed| view! {
                <p class="muted learner-quota">{move || format!(
                    "As a learner you launch {} on this machine's CPU: you are using {} of your {} runs.",
                    allowed.configs.join(", "), runs.learner_runs_in_use(), allowed.per_learner
                )}</p>
            })}
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
            <p class="muted">{move || working.overrides.with(|changes| changes_line(changes))}</p>
            {move || previewed.get().filter(|_| slurm_cluster.get().is_some()).map(|(_, script)| view! {
                <details class="slurm-script" open>
                    <summary>{move || if script_is_current() { "The batch script that will be submitted" } else { "The batch script (settings changed since: show it again)" }}</summary>
                    <pre>{script}</pre>
                </details>
            })}
            <ul class="learner-problems">
                {move || learner_problems.get().0.into_iter().map(|p| view! { <li class="error" data-field=p.field.clone()>{p.to_string()}</li> }).collect_view()}
            </ul>
            <Refusal refusal />
            {move || current.get().map(|id| view! { <CurrentRun id runs /> })}
            <RunList runs current open />
        </section>
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::{Learner, LearnerIdentity, LearnerKey, LearnerRuns, Role, RunHandle, RunId, ServerInfo};
    use wasm_bindgen::JsCast;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::runs::{Runs, test_record};
    use crate::testing::{Mounted, mount, provide_configs, settle};
    use crate::working::WorkingConfig;

    fn welcome(role: Role) -> ServerInfo {
        ServerInfo {
            version: "test".into(),
            configs: vec!["cpu_short".into()],
            max_message_bytes: 65536,
            heartbeat_secs: 20,
            max_local_ranks: 1,
            memory_bytes: 24 << 30,
            role,
            learner_runs: LearnerRuns::default(),
            learner: None,
        }
    }

    /// A viewer's welcome when learners may launch `per_learner` runs of `cpu_tiny`.
    fn learner_welcome(per_learner: u32) -> ServerInfo {
        let key = LearnerKey::parse(&"0a".repeat(16)).unwrap();
        ServerInfo {
            learner_runs: LearnerRuns {
                per_learner,
                configs: vec!["cpu_tiny".into()],
                time_limit_minutes: 30,
                ranks: 2,
                memory_share_bytes: None,
            },
            learner: Some(LearnerIdentity { key, learner: Learner::parse("aaaaaaaaaaaa").unwrap() }),
            ..welcome(Role::Viewer)
        }
    }

    /// Every element of `block` matching `css`, in document order.
    fn all(block: &Mounted, css: &str) -> Vec<web_sys::Element> {
        let list = block.root.query_selector_all(css).unwrap();
        (0..list.length()).filter_map(|i| list.item(i)?.dyn_into().ok()).collect()
    }

    fn mount_block(runs: Runs) -> Mounted {
        mount(move || {
            provide_configs();
            provide_context(runs);
            view! { <RunBlock config="cpu_short".to_owned() dp=1 /> }
        })
    }

    #[wasm_bindgen_test]
    async fn a_viewer_sees_a_note_where_the_instructor_has_the_launch_button() {
        let runs = Runs::unconnected();
        let block = mount_block(runs);
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

    #[wasm_bindgen_test]
    async fn a_learner_launches_learner_configs_here_and_cancels_only_their_own_runs() {
        let runs = Runs::unconnected();
        let block = mount_block(runs);
        runs.server.set(Some(learner_welcome(2)));
        settle().await;
        assert!(block.find(".viewer-note").is_none() && block.find("button.launch").is_some(), "a learner has no launch");
        // The chapter's cpu_short is not a learner config: shown, not offered; only cpu_tiny is.
        let offered: Vec<String> =
            all(&block, "select.run-config option:not([disabled])").iter().map(|o| o.text_content().unwrap()).collect();
        assert_eq!(offered, ["cpu_tiny"]);
        assert!(block.find("button.launch").unwrap().has_attribute("disabled"));
        assert_eq!(block.text(".learner-quota"), "As a learner you launch cpu_tiny on this machine's CPU: you are using 0 of your 2 runs.");

        // Their own run, the instructor's and another learner's: theirs first, each marked,
        // and only theirs may be cancelled.
        let (me, other) = (Learner::parse("aaaaaaaaaaaa").unwrap(), Learner::parse("bbbbbbbbbbbb").unwrap());
        let records = vec![test_record("r1", None), test_record("r2", Some(&other)), test_record("r3", Some(&me))];
        let own = records[2].clone();
        runs.records.set(records.clone());
        settle().await;
        let whose: Vec<String> = all(&block, ".run-list tbody tr").iter().map(|r| r.get_attribute("data-whose").unwrap()).collect();
        assert_eq!(whose, ["yours", "learner", "instructor's"]);
        assert_eq!(block.text(".learner-quota"), "As a learner you launch cpu_tiny on this machine's CPU: you are using 1 of your 2 runs.");
        assert!(runs.may_cancel(&own) && !runs.may_cancel(&records[0]) && !runs.may_cancel(&records[1]));
    }

    #[wasm_bindgen_test]
    async fn a_learner_sees_each_bound_beside_its_field_as_they_edit_and_it_goes_once_fixed() {
        let (runs, working) = (Runs::unconnected(), WorkingConfig::new());
        let block = mount(move || {
            provide_configs();
            provide_context(runs);
            provide_context(working);
            view! { <RunBlock config="cpu_short".to_owned() dp=1 /> }
        });
        runs.server.set(Some(learner_welcome(2)));
        settle().await;
        let fields =
            || -> Vec<String> { all(&block, ".learner-problems li").iter().filter_map(|li| li.get_attribute("data-field")).collect() };
        // cpu_short is not a learner config, larger than cpu_tiny (the largest there is), in
        // its size and in its work a step (FLOPs, and ops), and validates on more samples than
        // a learner may train on.
        assert_eq!(fields(), ["config", "embed_dim", "global_batch_size", "num_iters", "limit_nsamples_val", "depth", "depth"]);
        working.switch("cpu_tiny".into());
        settle().await;
        assert!(fields().is_empty(), "{:?}", fields());
        // A model larger than any learner config, on more ranks than the instructor lets a
        // learner run (two).
        working.overrides.set(vec!["embed_dim=4096".into()]);
        working.dp.set(4);
        settle().await;
        assert_eq!(fields(), ["dp", "embed_dim", "depth"], "its parameters, and its FLOPs a step");
        assert!(block.text(".learner-problems li[data-field='embed_dim']").contains("reduce embed_dim or depth"));
        assert!(block.find("button.launch").unwrap().has_attribute("disabled"));
        working.overrides.set(vec![]);
        working.dp.set(1);
        settle().await;
        assert!(fields().is_empty(), "fixed, yet {:?}", fields());
    }

    #[wasm_bindgen_test]
    async fn the_runs_of_a_followed_class_are_the_instructors_and_never_offer_cancel() {
        let runs = Runs::unconnected();
        let block = mount_block(runs);
        runs.server.set(Some(welcome(Role::Instructor)));
        let mut mirrored = test_record("r2", None);
        mirrored.handle = Some(RunHandle::Class { address: "login01:8443".into(), upstream: RunId::parse("r7").unwrap() });
        runs.records.set(vec![test_record("r1", None), mirrored]);
        settle().await;
        let open = |run: &str| {
            let button = block.find(&format!(".run-list tr[data-run='{run}'] button")).unwrap();
            button.unchecked_into::<web_sys::HtmlElement>().click();
        };
        // This server's own run: its owner may cancel it.
        open("r1");
        settle().await;
        assert!(block.find(".current-run[data-run='r1'] button.cancel").is_some());
        // The class instructor's: marked theirs, and no cancel even for this server's owner.
        open("r2");
        settle().await;
        assert!(block.find(".current-run[data-run='r2'] .run-state").is_some());
        assert!(block.find(".current-run button.cancel").is_none(), "a class run offers cancel");
        assert_eq!(block.text(".run-list tr[data-run='r2'] .whose"), "instructor's");
        assert_eq!(block.text(".run-list tr[data-run='r1'] .whose"), "yours", "the owner's own run");
        assert!(block.attr(".run-list tr[data-run='r2'] .whose", "title").is_some_and(|t| t.contains("only they can stop it")));
    }
}
