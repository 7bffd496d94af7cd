//! The config editor block: a named config as a form of its fields and as YAML, both editable
//! and kept in sync, checked by `shared`'s validation on every change with each problem shown
//! beside its field; its changes against the named config and against `base`; and the values
//! derived from it. Its changes become the chapter's working config, which the run block
//! launches.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::Problems;
use scalebook_shared::config::{ConfigFile, FieldInfo, FieldKind, FieldOrigin, TrainConfig, yaml_value};

use super::config_model::{Checked, Draft, launch_overrides};
use super::derived_values::DerivedValues;
use crate::ids::unique_id;
use crate::library::{Library, when_loaded};
use crate::runs::Runs;
use crate::working::{LOCAL, WorkingConfig};

/// `fields`: the keys the lesson is about, shown first with every other group folded (and the
/// YAML view folded too); empty, the editor opens its usual groups.
#[component]
pub fn ConfigEditor(config: String, dp: u32, fields: Vec<&'static str>) -> impl IntoView {
    let library = expect_context::<Library>();
    let working = WorkingConfig::claim(&config, dp);
    when_loaded(
        "training configs",
        move || library.configs.into_future(),
        move |file| {
            let (config, fields) = (config.clone(), fields.clone());
            move || {
                let name = working.name.get().unwrap_or_else(|| config.clone());
                view! { <Editor file=file.clone() name working lesson=fields.clone() /> }
            }
        },
    )
}

#[component]
fn Editor(file: Arc<ConfigFile>, name: String, working: WorkingConfig, lesson: Vec<&'static str>) -> impl IntoView {
    let named = match file.get(&name) {
        Ok(named) => named,
        Err(e) => return view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
    };
    let base = file.get("base").ok();
    let names: Vec<String> = file.names().map(str::to_owned).collect();
    // The edits the learner made before (kept with the chapter's working config).
    let mut restored = Draft::new(&name, named);
    restored.apply(&working.overrides.get_untracked());
    let draft = RwSignal::new(restored);
    let yaml = RwSignal::new(draft.with_untracked(Draft::to_yaml));
    let yaml_error = RwSignal::new(None::<String>);
    let machine = machine_memory(working);
    let checked = Memo::new(move |_| draft.with(|d| d.check(working.dp.get(), machine.get())));
    Effect::new(move |_| {
        checked.with(|c| {
            working.overrides.set(launch_overrides(&c.changes));
            working.problems.set(c.problems.0.len());
        });
    });

    let edit_field = Callback::new(move |(field, text): (&'static str, String)| {
        draft.update(|d| d.set(field, text));
        yaml.set(draft.with_untracked(Draft::to_yaml));
        yaml_error.set(None);
    });
    let edit_yaml = move |text: String| {
        let result = draft.try_update(|d| d.read_yaml(&text));
        yaml_error.set(result.and_then(Result::err));
        yaml.set(text);
    };
    // A lesson's editor shows its fields and folds the rest.
    let focused = !lesson.is_empty();
    let dp_id = unique_id("dp");
    let select_id = unique_id("config");

    view! {
        <section class="block config-editor" aria-label=format!("Config editor: {name}")>
            <div class="toolbar">
                <label for=select_id.clone()>"Config"</label>
                <select id=select_id on:change=move |ev| working.switch(event_target_value(&ev))>
                    {names.into_iter().map(|n| {
                        let selected = n == name;
                        view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                    }).collect_view()}
                </select>
                <label for=dp_id.clone()>"data-parallel ranks (dp)"</label>
                <input id=dp_id.clone() class="dp" type="number" min="1" max="4096" data-field="dp"
                    prop:value=move || working.dp.get()
                    on:input=move |ev| working.dp.set(event_target_value(&ev).trim().parse().unwrap_or(0)) />
                <span class="muted">{move || format!("world = tp × cp × dp = {} ranks", checked.with(|c| c.world))}</span>
                <ProblemsFor problems=Signal::derive(move || checked.with(|c| c.problems.clone())) field="world" />
            </div>
            <div class="editor-columns">
                <form class="fields" on:submit=|ev| ev.prevent_default()>
                    {focused.then(|| view! {
                        <div class="lesson-fields field-rows">
                            {lesson.iter().filter_map(|name| TrainConfig::field(name)).map(|info| view! { <FieldRow info=*info draft checked edit=edit_field /> }).collect_view()}
                        </div>
                    })}
                    <FieldGroup title="The tutorial's keys" origin=FieldOrigin::Yaml draft checked edit=edit_field open=!focused skip=lesson.clone() />
                    <FieldGroup title="Parallel layout (train_mp.py flags)" origin=FieldOrigin::CommandLine draft checked edit=edit_field open=!focused skip=lesson.clone() />
                    <FieldGroup title="Tuning and benchmark knobs (SC22 flags)" origin=FieldOrigin::Tuning draft checked edit=edit_field open=false skip=lesson.clone() />
                    <FieldGroup title="Keys of other editions" origin=FieldOrigin::Edition draft checked edit=edit_field open=false skip=lesson.clone() />
                </form>
                <details class="yaml" open=!focused>
                    <summary>"As YAML"</summary>
                    <textarea class="yaml-text" spellcheck="false" rows="24" aria-label="The config as YAML"
                        prop:value=move || yaml.get()
                        on:input=move |ev| edit_yaml(event_target_value(&ev))></textarea>
                    {move || yaml_error.get().map(|e| view! { <p class="error" data-field="yaml" role="alert">"YAML: " {e}</p> })}
                    <OtherProblems problems=Signal::derive(move || checked.with(|c| c.problems.clone())) />
                </details>
            </div>
            <Changes checked base />
            {move || checked.with(|c| c.problems.is_empty().then(|| view! { <DerivedValues config=c.config.clone() world=c.world /> }))}
        </section>
    }
    .into_any()
}

/// The memory of the machine `working` runs on, while it runs on this server's machine and
/// the server has said how much it has: what the editor checks the model's size against, as
/// the launch does.
fn machine_memory(working: WorkingConfig) -> Signal<Option<u64>> {
    let runs = use_context::<Runs>();
    Signal::derive(move || {
        let here = working.target.with(|t| t == LOCAL);
        let memory = runs.and_then(|runs| runs.server.with(|info| info.as_ref().map(|info| info.memory_bytes)));
        memory.filter(|bytes| here && *bytes > 0)
    })
}

#[component]
fn FieldGroup(
    title: &'static str,
    origin: FieldOrigin,
    draft: RwSignal<Draft>,
    checked: Memo<Checked>,
    edit: Callback<(&'static str, String)>,
    open: bool,
    /// Fields shown elsewhere (the lesson's).
    skip: Vec<&'static str>,
) -> impl IntoView {
    let rows = TrainConfig::FIELDS
        .iter()
        .filter(|f| f.origin == origin && !skip.contains(&f.name))
        .map(|info| view! { <FieldRow info=*info draft checked edit /> })
        .collect_view();
    view! {
        <details open=open>
            <summary>{title}</summary>
            <div class="field-rows">{rows}</div>
        </details>
    }
}

#[component]
fn FieldRow(info: FieldInfo, draft: RwSignal<Draft>, checked: Memo<Checked>, edit: Callback<(&'static str, String)>) -> impl IntoView {
    let id = unique_id(info.name);
    let error_id = format!("{id}-error");
    let name = info.name;
    let text = move || draft.with(|d| d.text(name));
    let problems = Signal::derive(move || checked.with(|c| c.problems.clone()));
    let invalid = move || problems.with(|p| p.for_field(name).next().is_some());
    let changed = move || checked.with(|c| c.changes.iter().any(|d| d.field == name));
    let input = match info.kind {
        FieldKind::Bool => view! {
            <input id=id.clone() type="checkbox" data-field=name aria-describedby=error_id.clone()
                prop:checked=move || text() == "true"
                on:change=move |ev| edit.run((name, event_target_checked(&ev).to_string())) />
        }
        .into_any(),
        FieldKind::Choice(choices) => view! {
            <select id=id.clone() data-field=name aria-describedby=error_id.clone()
                prop:value=text
                on:change=move |ev| edit.run((name, event_target_value(&ev)))>
                {choices.iter().map(|c| view! { <option value=*c>{*c}</option> }).collect_view()}
            </select>
        }
        .into_any(),
        _ => view! {
            <input id=id.clone() type="text" data-field=name aria-describedby=error_id.clone() spellcheck="false"
                aria-invalid=move || invalid().to_string()
                prop:value=text
                on:input=move |ev| edit.run((name, event_target_value(&ev))) />
        }
        .into_any(),
    };
    view! {
        <div class="field-row" class:changed=changed>
            <label for=id title=info.doc>{name}</label>
            {input}
            <span class="doc muted">{info.doc}</span>
            <div id=error_id class="field-problems"><ProblemsFor problems field=name /></div>
        </div>
    }
}

/// The problems of one field, each in a line marked with the field's name.
#[component]
pub fn ProblemsFor(problems: Signal<Problems>, field: &'static str) -> impl IntoView {
    move || {
        problems.with(|p| {
            p.for_field(field).map(|p| view! { <p class="error" data-field=field role="alert">{p.message.clone()}</p> }).collect_view()
        })
    }
}

/// Problems that belong to no form field (unknown YAML keys, the override syntax).
#[component]
fn OtherProblems(problems: Signal<Problems>) -> impl IntoView {
    move || {
        problems.with(|p| {
            p.0.iter()
                .filter(|p| TrainConfig::field(&p.field).is_none() && p.field != "world")
                .map(|p| view! { <p class="error" data-field=p.field.clone() role="alert">{p.to_string()}</p> })
                .collect_view()
        })
    }
}

/// The edited config against the named one and against `base`.
#[component]
fn Changes(checked: Memo<Checked>, base: Option<TrainConfig>) -> impl IntoView {
    let against_base = move || {
        let base = base.clone()?;
        let diff = checked.with(|c| base.diff(&c.config));
        Some(view! {
            <details class="diff">
                <summary>{format!("Differences from base ({})", diff.len())}</summary>
                <table>
                    <thead><tr><th>"key"</th><th>"base"</th><th>"this config"</th></tr></thead>
                    <tbody>
                        {diff.into_iter().map(|d| view! {
                            <tr data-field=d.field><td><code>{d.field}</code></td><td>{yaml_value(&d.left)}</td><td>{yaml_value(&d.right)}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </details>
        })
    };
    view! {
        <p class="changes">
            {move || checked.with(|c| if c.changes.is_empty() {
                "No changes to the named config.".to_owned()
            } else {
                format!("Your changes: {}", launch_overrides(&c.changes).join(", "))
            })}
        </p>
        {against_base}
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use scalebook_shared::protocol::{LearnerRuns, Role, ServerInfo};
    use wasm_bindgen::JsCast;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::testing::{mount, provide_configs, settle};

    fn value(editor: &crate::testing::Mounted, css: &str) -> String {
        let field = editor.find(css).unwrap();
        js_sys::Reflect::get(field.unchecked_ref(), &"value".into()).unwrap().as_string().unwrap()
    }

    #[wasm_bindgen_test]
    async fn edits_are_checked_beside_their_fields_and_become_the_working_config() {
        let slot = Rc::new(Cell::new(None::<WorkingConfig>));
        let out = slot.clone();
        let editor = mount(move || {
            provide_configs();
            let working = WorkingConfig::new();
            provide_context(working);
            out.set(Some(working));
            view! { <ConfigEditor config="cpu_short".to_owned() dp=1 fields=vec![] /> }
        });
        settle().await;
        let working = slot.get().unwrap();
        assert_eq!(value(&editor, "input[data-field=embed_dim]"), "128");
        assert!(editor.find(".error").is_none(), "cpu_short is valid");

        editor.input("input[data-field=embed_dim]", "130");
        settle().await;
        assert!(editor.text(".error[data-field=embed_dim]").contains("130 is not divisible by num_heads 4"));
        assert_eq!(working.overrides.get_untracked(), ["embed_dim=130"]);
        assert_eq!(working.problems.get_untracked(), 1);
        assert!(value(&editor, "textarea.yaml-text").contains("  embed_dim: 130\n"), "the YAML follows the form");

        // The YAML view drives the form: a key left out goes back to the named value.
        editor.input("textarea.yaml-text", "cpu_short:\n  depth: 3\n");
        settle().await;
        assert_eq!(value(&editor, "input[data-field=depth]"), "3");
        assert_eq!(value(&editor, "input[data-field=embed_dim]"), "128");
        assert!(editor.find(".error").is_none());
        assert_eq!(working.overrides.get_untracked(), ["depth=3"]);
        assert!(editor.text("dd[data-derived='parameters']").contains(','), "derived values are shown for a valid config");
    }

    #[wasm_bindgen_test]
    async fn a_model_too_large_for_this_machine_is_named_as_it_is_typed_unless_it_runs_elsewhere() {
        let (runs, working) = (Runs::unconnected(), WorkingConfig::new());
        let editor = mount(move || {
            provide_configs();
            provide_context(runs);
            provide_context(working);
            view! { <ConfigEditor config="cpu_short".to_owned() dp=1 fields=vec![] /> }
        });
        runs.server.set(Some(ServerInfo {
            version: "test".into(),
            configs: vec!["cpu_short".into()],
            max_message_bytes: 65536,
            heartbeat_secs: 20,
            max_local_ranks: 1,
            memory_bytes: 24 << 30,
            role: Role::Instructor,
            learner_runs: LearnerRuns::default(),
            learner: None,
        }));
        settle().await;
        editor.input("input[data-field=embed_dim]", "65536");
        settle().await;
        assert!(editor.text(".error[data-field=embed_dim]").contains("this machine has 24 GiB"), "{}", editor.text(".field-problems"));
        assert_eq!(working.problems.get_untracked(), 1, "the launch waits for it");
        // Sent to a Slurm cluster, this machine's memory is not the bound.
        working.target.set("perlmutter".into());
        settle().await;
        assert!(editor.find(".error").is_none(), "{}", editor.text(".error"));
    }
}
