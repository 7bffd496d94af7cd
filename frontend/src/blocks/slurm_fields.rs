//! The few batch-job settings a learner may choose for a Slurm launch, each defaulting to the
//! cluster file's value (shown as the placeholder) and checked as typed by the same `shared`
//! rules the server applies before it writes the script.

use leptos::prelude::*;
use scalebook_shared::Problems;
use scalebook_shared::cluster::Cluster;
use scalebook_shared::protocol::SlurmRequest;

use super::config_editor::ProblemsFor;
use crate::ids::unique_id;

#[component]
pub fn SlurmFields(cluster: Cluster, request: RwSignal<SlurmRequest>, problems: Signal<Problems>) -> impl IntoView {
    let defaults = cluster.slurm.clone();
    let default = move |pick: fn(&scalebook_shared::cluster::SlurmDefaults) -> String| defaults.as_ref().map(pick).unwrap_or_default();
    let text = |label: &'static str,
                field: &'static str,
                placeholder: String,
                get: fn(&SlurmRequest) -> Option<String>,
                set: fn(&mut SlurmRequest, Option<String>)| {
        let id = unique_id(field);
        view! {
            <div class="control">
                <label for=id.clone()>{label}</label>
                <input id=id type="text" data-field=field placeholder=placeholder spellcheck="false"
                    prop:value=move || request.with(|r| get(r).unwrap_or_default())
                    on:input=move |ev| {
                        let value = event_target_value(&ev).trim().to_owned();
                        request.update(|r| set(r, (!value.is_empty()).then_some(value)));
                    } />
                <ProblemsFor problems field=field />
            </div>
        }
    };
    let gpu_id = unique_id("slurm-gpu");
    let nodes_id = unique_id("slurm-nodes");
    let gpus = cluster.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>();
    view! {
        <fieldset class="slurm-fields">
            <legend>{format!("Batch job on {}", cluster.description)}</legend>
            <div class="layout-controls">
                <div class="control">
                    <label for=gpu_id.clone()>"GPU"</label>
                    <select id=gpu_id data-field="slurm.gpu" on:change=move |ev| {
                        let gpu = event_target_value(&ev);
                        request.update(|r| r.gpu = (!gpu.is_empty()).then_some(gpu));
                    }>
                        {gpus.into_iter().map(|g| view! { <option value=g.clone()>{g.clone()}</option> }).collect_view()}
                    </select>
                    <ProblemsFor problems field="slurm.gpu" />
                </div>
                <div class="control">
                    <label for=nodes_id.clone()>"nodes"</label>
                    <input id=nodes_id type="number" min="1" data-field="slurm.nodes" placeholder="as few as fit"
                        prop:value=move || request.with(|r| r.nodes.map(|n| n.to_string()).unwrap_or_default())
                        on:input=move |ev| request.update(|r| r.nodes = event_target_value(&ev).trim().parse().ok()) />
                    <ProblemsFor problems field="slurm.nodes" />
                </div>
                {text("time limit", "slurm.time", default(|d| d.time.clone()), |r| r.time.clone(), |r, v| r.time = v)}
                {text("account", "slurm.account", default(|d| d.account.clone()), |r| r.account.clone(), |r, v| r.account = v)}
                {text("QOS", "slurm.qos", default(|d| d.qos.clone()), |r| r.qos.clone(), |r, v| r.qos = v)}
                {text("reservation", "slurm.reservation", default(|d| d.reservation.clone().unwrap_or_default()), |r| r.reservation.clone(), |r, v| r.reservation = v)}
                {text("job name", "slurm.job_name", "from the layout".into(), |r| r.job_name.clone(), |r, v| r.job_name = v)}
            </div>
            <ProblemsFor problems field="cluster" />
        </fieldset>
    }
}
