//! The estimate block: a config on a layout of a cluster's GPUs (or of this machine's cores, as
//! `scalebook-train machine` measured them), with the rank grid and the analytic estimate of
//! one step beside it (memory per GPU by part and whether it fits, the step's time and
//! samples/s, every collective with its bytes and link). The grid's group table shows each
//! group's share of the communication, and "Run this layout" runs it, its measurement landing
//! beside the prediction.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_page::blocks::hardware_words::Hardware;
use scalebook_shared::cluster::{Cluster, Clusters, ExecutorKind};
use scalebook_shared::config::ConfigFile;
use scalebook_shared::estimate::{Estimate, EstimateOptions, estimate};
use scalebook_shared::machine::MachineModel;
use scalebook_shared::{Error, Problem, Problems};

use super::GridSpec;
use super::estimate_view::EstimateView;
use super::layout_launch::{LayoutLaunch, Where};
use super::layout_state::{LayoutControls, LayoutState};
use super::rank_grid::RankGrid;
use crate::ids::unique_id;
use crate::library::{Library, when_loaded};
use crate::net::fetched::fetched;
use crate::net::{fetch, urls};

/// The GPU select's value for this machine's cores.
const HERE: &str = "@this-machine";

#[component]
pub fn EstimateBlock(config: String, grid: GridSpec, cluster: Option<String>, gpu: Option<String>) -> impl IntoView {
    let library = expect_context::<Library>();
    let gpu_name = RwSignal::new(gpu);
    let state = LayoutState::new(&grid, hardware_of(gpu_name));
    let config_name = RwSignal::new(config);
    let inputs = move || async move { Ok((library.configs.await?, library.clusters.await?)) };
    view! {
        <section class="block estimate-block" aria-label="Estimate of one training step">
            <LayoutControls state />
            {when_loaded("configs and clusters", inputs, move |(configs, clusters): (Arc<ConfigFile>, Arc<Clusters>)| {
                match pick_cluster(&clusters, cluster.as_deref()) {
                    Ok((cluster_name, cluster)) => view! { <EstimateFor configs cluster cluster_name state config_name gpu_name /> }.into_any(),
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                }
            })}
        </section>
    }
}

/// What a layout's ranks run on, given the hardware select's choice.
pub(super) fn hardware_of(gpu_name: RwSignal<Option<String>>) -> Signal<Hardware> {
    Signal::derive(move || match gpu_name.get().as_deref() == Some(HERE) {
        true => Hardware::CpuCores,
        false => Hardware::Gpus,
    })
}

/// The named cluster, or the first one that has GPUs (estimates model GPU clusters), with its
/// name.
fn pick_cluster(clusters: &Clusters, name: Option<&str>) -> Result<(String, Cluster), Error> {
    let name = match name {
        Some(name) => name.to_owned(),
        None => clusters.names().find(|n| clusters.get(n).is_ok_and(|c| !c.gpus.is_empty())).unwrap_or_default().to_owned(),
    };
    Ok((name.clone(), clusters.get(&name)?.clone()))
}

fn problem(field: &str, message: impl Into<String>) -> Error {
    Error::Invalid(Problems(vec![Problem::new(field, message)]))
}

/// This machine's measurement, from the server (which measures it the first time).
pub(super) async fn this_machine() -> Result<MachineModel, String> {
    let text = fetch::text(&urls::api("machine.json")).await?;
    serde_json::from_str(&text).map_err(|e| format!("the server's measurement of this machine does not parse: {e}"))
}

/// The config and hardware choices, the rank grid and the estimate of `state`'s layout on
/// `cluster`, and "Run this layout" (also what the layout search opens a layout in).
#[component]
pub(super) fn EstimateFor(
    configs: Arc<ConfigFile>,
    cluster: Cluster,
    cluster_name: String,
    state: LayoutState,
    config_name: RwSignal<String>,
    gpu_name: RwSignal<Option<String>>,
) -> impl IntoView {
    let names: Vec<String> = configs.names().map(str::to_owned).collect();
    let gpus: Vec<String> = cluster.gpus.iter().map(|g| g.name.clone()).collect();
    let here = Memo::new(move |_| state.hardware.get() == Hardware::CpuCores);
    // Fetched each time this machine is chosen (the server measures it once).
    let machine = fetched(move || here.get(), |wanted| async move { if wanted { Some(this_machine().await) } else { None } });
    let result = {
        let cluster = cluster.clone();
        Memo::new(move |_| {
            let layout = state.layout.get()?;
            let config = configs.get(&config_name.get())?.with_layout(&state.run(&layout))?;
            let (cluster, gpu) = if here.get() {
                let measured = machine.get().flatten().ok_or_else(|| problem("gpu", "measuring this machine (a few seconds, once)…"))?;
                measured.map_err(|e| problem("gpu", e))?.for_run(&config, layout.world() as usize)?
            } else {
                let wanted = gpu_name.get();
                let gpu = wanted.as_deref().and_then(|name| cluster.gpu(name)).or(cluster.gpus.first()).cloned();
                (cluster.clone(), gpu.ok_or_else(|| problem("gpu", "the cluster lists no GPUs"))?)
            };
            estimate(&config, &layout, &cluster, &gpu, &EstimateOptions::default())
        })
    };
    let slurm = cluster.executor == ExecutorKind::Slurm;
    let place = Signal::derive({
        let current = gpus.clone();
        move || match (here.get(), slurm) {
            (false, true) => {
                Where::Slurm { cluster: cluster_name.clone(), gpu: gpu_name.get().or_else(|| current.first().cloned()).unwrap_or_default() }
            }
            _ => Where::Here,
        }
    });
    let traffic = Signal::derive(move || result.with(|r| r.as_ref().map(Estimate::by_group).unwrap_or_default()));
    let config_id = unique_id("estimate-config");
    let gpu_id = unique_id("estimate-gpu");
    let current_gpu = move || gpu_name.get().or_else(|| gpus.first().cloned()).unwrap_or_default();
    let gpu_options = cluster.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>();
    view! {
        <div class="toolbar">
            <label for=config_id.clone()>"config"</label>
            <select id=config_id class="estimate-config" on:change=move |ev| config_name.set(event_target_value(&ev))>
                {names.into_iter().map(|n| {
                    let value = n.clone();
                    let selected = move || config_name.get() == value;
                    view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                }).collect_view()}
            </select>
            // One choice of hardware: a GPU of the cluster, or this machine's cores.
            <label for=gpu_id.clone()>"hardware"</label>
            <select id=gpu_id class="estimate-gpu" on:change=move |ev| gpu_name.set(Some(event_target_value(&ev)))>
                {gpu_options.into_iter().map(|n| {
                    let current_gpu = current_gpu.clone();
                    let value = n.clone();
                    let selected = move || current_gpu() == value && !here.get();
                    let text = format!("{n} GPUs ({})", cluster.description);
                    view! { <option value=n.clone() selected=selected>{text}</option> }
                }).collect_view()}
                <option value=HERE selected=move || here.get()>"this machine's CPU cores (measured)"</option>
            </select>
        </div>
        <div class="estimate-columns">
            <RankGrid state traffic />
            {move || match result.get() {
                Ok(estimate) => view! { <EstimateView estimate hardware=state.hardware.get() /> }.into_any(),
                Err(e) => view! {
                    <div class="estimate-problems" role="alert">
                        <p>"No estimate for this combination:"</p>
                        {e.problems().0.into_iter().map(|p| view! { <p class="error" data-field=p.field.clone()>{p.to_string()}</p> }).collect_view()}
                    </div>
                }.into_any(),
            }}
        </div>
        <LayoutLaunch config=config_name.into() state place />
    }
}
