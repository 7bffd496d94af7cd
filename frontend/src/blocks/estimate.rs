//! The estimate block: a config on a layout of a cluster's GPUs, with the rank grid and the
//! analytic estimate of one step beside it (memory per GPU by part and whether it fits, the
//! step's time and samples/s, every collective with its bytes and link). The grid's group
//! table shows each group's share of the communication.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::Error;
use scalebook_shared::cluster::{Cluster, Clusters};
use scalebook_shared::config::ConfigFile;
use scalebook_shared::estimate::{Estimate, EstimateOptions, estimate};

use super::GridSpec;
use super::estimate_view::EstimateView;
use super::layout_state::{LayoutControls, LayoutState};
use super::rank_grid::RankGrid;
use crate::ids::unique_id;
use crate::library::{Library, when_loaded};

#[component]
pub fn EstimateBlock(config: String, grid: GridSpec, cluster: Option<String>, gpu: Option<String>) -> impl IntoView {
    let library = expect_context::<Library>();
    let state = LayoutState::new(&grid);
    let config_name = RwSignal::new(config);
    let gpu_name = RwSignal::new(gpu);
    let inputs = move || async move { Ok((library.configs.await?, library.clusters.await?)) };
    view! {
        <section class="block estimate-block" aria-label="Estimate of one training step">
            <LayoutControls state />
            {when_loaded("configs and clusters", inputs, move |(configs, clusters): (Arc<ConfigFile>, Arc<Clusters>)| {
                match pick_cluster(&clusters, cluster.as_deref()) {
                    Ok(cluster) => view! { <EstimateFor configs cluster state config_name gpu_name /> }.into_any(),
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                }
            })}
        </section>
    }
}

/// The named cluster, or the first one that has GPUs (estimates model GPU clusters).
fn pick_cluster(clusters: &Clusters, name: Option<&str>) -> Result<Cluster, Error> {
    let name = match name {
        Some(name) => name.to_owned(),
        None => clusters.names().find(|n| clusters.get(n).is_ok_and(|c| !c.gpus.is_empty())).unwrap_or_default().to_owned(),
    };
    clusters.get(&name).cloned()
}

#[component]
fn EstimateFor(
    configs: Arc<ConfigFile>,
    cluster: Cluster,
    state: LayoutState,
    config_name: RwSignal<String>,
    gpu_name: RwSignal<Option<String>>,
) -> impl IntoView {
    let names: Vec<String> = configs.names().map(str::to_owned).collect();
    let gpus: Vec<String> = cluster.gpus.iter().map(|g| g.name.clone()).collect();
    let result = {
        let cluster = cluster.clone();
        Memo::new(move |_| {
            let layout = state.layout.get()?;
            let mut config = configs.get(&config_name.get())?;
            let sizes = layout.sizes();
            config.tensor_parallel = sizes.tp as usize;
            config.context_parallel = sizes.cp as usize;
            config.parallel_order = state.order.get();
            let wanted = gpu_name.get();
            let gpu = wanted.as_deref().and_then(|name| cluster.gpu(name)).or(cluster.gpus.first()).cloned();
            let gpu = gpu.ok_or_else(|| {
                Error::Invalid(scalebook_shared::Problems(vec![scalebook_shared::Problem::new("gpu", "the cluster lists no GPUs")]))
            })?;
            estimate(&config, &layout, &cluster, &gpu, &EstimateOptions::default())
        })
    };
    let traffic = Signal::derive(move || result.with(|r| r.as_ref().map(Estimate::by_group).unwrap_or_default()));
    let config_id = unique_id("estimate-config");
    let gpu_id = unique_id("estimate-gpu");
    let current_gpu = move || gpu_name.get().or_else(|| gpus.first().cloned()).unwrap_or_default();
    let gpu_options = cluster.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>();
    view! {
        <div class="toolbar">
            <label for=config_id.clone()>"config"</label>
            <select id=config_id on:change=move |ev| config_name.set(event_target_value(&ev))>
                {names.into_iter().map(|n| {
                    let value = n.clone();
                    let selected = move || config_name.get() == value;
                    view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                }).collect_view()}
            </select>
            <label for=gpu_id.clone()>{format!("GPU ({})", cluster.description)}</label>
            <select id=gpu_id on:change=move |ev| gpu_name.set(Some(event_target_value(&ev)))>
                {gpu_options.into_iter().map(|n| {
                    let current_gpu = current_gpu.clone();
                    let value = n.clone();
                    let selected = move || current_gpu() == value;
                    view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                }).collect_view()}
            </select>
        </div>
        <div class="estimate-columns">
            <RankGrid state traffic />
            {move || match result.get() {
                Ok(estimate) => view! { <EstimateView estimate /> }.into_any(),
                Err(e) => view! {
                    <div class="estimate-problems" role="alert">
                        <p>"No estimate for this combination:"</p>
                        {e.problems().0.into_iter().map(|p| view! { <p class="error" data-field=p.field.clone()>{p.to_string()}</p> }).collect_view()}
                    </div>
                }.into_any(),
            }}
        </div>
    }
}
