//! The layout search block: "which layout should I run?" for a config on a GPU count of a
//! cluster's GPUs. Every layout is searched here in the browser (`shared::search`, the code of
//! `scalebook search`) each time a control moves, and drawn as a scatter of memory per GPU
//! against samples/s, coloured by what limits each step, with the Pareto front; the best few
//! are explained part by part beside the tutorial's own choice, and what was left out is
//! counted by rule. Pointing at a layout reads it out; a click opens it below in the rank grid
//! and the estimate (the estimate block's own components, on a layout state of their own).
//! Input no layout can use is said in words in place of the plot.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_page::blocks::layout_search_drawing::{Scatter, WIDTH, scatter};
use scalebook_page::blocks::layout_search_model::{
    self as model, EXPLAINED, GPU_COUNTS, Limit, Query, Refusal, best, exclusions, fields, gpu_clusters, headline, tutorial,
};
use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;
use scalebook_shared::layout::{DEFAULT_ORDER, Sizes, Token};
use scalebook_shared::numbers::thousands;
use scalebook_shared::search::{Answer, Ranked};

use super::GridSpec;
use super::estimate::{EstimateFor, hardware_of};
use super::layout_search_measure::MeasureWinners;
use super::layout_state::{LayoutControls, LayoutState};
use super::picture_view::item;
use crate::ids::unique_id;
use crate::library::{Library, when_loaded};

/// One search and how long it took in this browser's WebAssembly.
#[derive(Debug, Clone, PartialEq)]
struct Searched {
    result: Result<Answer, Refusal>,
    ms: f64,
}

#[component]
pub fn LayoutSearchBlock(config: String, cluster: Option<String>, gpu: Option<String>, gpus: u32) -> impl IntoView {
    let library = expect_context::<Library>();
    let inputs = move || async move { Ok((library.configs.await?, library.clusters.await?)) };
    view! {
        <section class="block layout-search-block" aria-label="Which layout: every layout of a config on a GPU count">
            {when_loaded("configs and clusters", inputs, move |(configs, clusters): (Arc<ConfigFile>, Arc<Clusters>)| {
                let query = Query { config: config.clone(), cluster: cluster.clone().unwrap_or_default(), gpu: gpu.clone(), gpus };
                view! { <Search configs clusters query /> }
            })}
        </section>
    }
}

fn now_ms() -> f64 {
    window().performance().map_or(0.0, |p| p.now())
}

#[component]
fn Search(configs: Arc<ConfigFile>, clusters: Arc<Clusters>, mut query: Query) -> impl IntoView {
    let cluster_names = gpu_clusters(&clusters);
    if query.cluster.is_empty() {
        query.cluster = cluster_names.first().cloned().unwrap_or_default();
    }
    let query = RwSignal::new(query);
    let searched = {
        let (configs, clusters) = (configs.clone(), clusters.clone());
        Memo::new(move |_| {
            let started = now_ms();
            let result = query.with(|q| model::run(q, &configs, &clusters));
            Searched { result, ms: now_ms() - started }
        })
    };
    let drawn = Memo::new(move |_| searched.with(|s| s.result.as_ref().ok().map(scatter)));
    let hovered = RwSignal::new(None::<usize>);
    // A new answer has other layouts at its indices.
    Effect::new(move |_| {
        searched.track();
        hovered.set(None);
    });

    // The layout opened below, in the estimate block's own components.
    let opened = RwSignal::new(None::<Ranked>);
    let estimate_gpu = RwSignal::new(None::<String>);
    let estimate_config = RwSignal::new(query.with_untracked(|q| q.config.clone()));
    let grid = GridSpec { sizes: Sizes::default(), order: DEFAULT_ORDER.to_owned(), gpus_per_node: 4, colour: Token::TP };
    let state = LayoutState::new(&grid, hardware_of(estimate_gpu));
    let open = {
        let clusters = clusters.clone();
        move |index: usize| {
            let Some(r) = searched.with_untracked(|s| s.result.as_ref().ok().and_then(|a| a.ranked.get(index).copied())) else { return };
            let q = query.get_untracked();
            state.sizes.set(r.candidate.sizes);
            state.order.set(r.candidate.order.to_string());
            state.zero.set(u32::from(r.candidate.zero));
            state.micro_batches.set(r.candidate.micro_batches);
            state.recompute.set(r.candidate.recompute);
            if let Ok(cluster) = clusters.get(&q.cluster) {
                state.gpus_per_node.set(u32::try_from(cluster.gpus_per_node).unwrap_or(u32::MAX));
            }
            state.selected.set(None);
            estimate_config.set(q.config.clone());
            estimate_gpu.set(searched.with_untracked(|s| s.result.as_ref().ok().map(|a| a.gpu.clone())));
            opened.set(Some(r));
        }
    };

    // The estimate below is made once a layout is opened, and again only for another cluster:
    // opening the next layout changes its state, so a run launched from it stays in view.
    let open_on = Memo::new(move |_| opened.with(Option::is_some).then(|| query.with(|q| q.cluster.clone())));
    let measure_configs = configs.clone();
    view! {
        <Controls query configs=configs.clone() clusters=clusters.clone() cluster_names />
        {move || searched.with(|s| match &s.result {
            Ok(answer) => view! {
                <p class="search-headline" data-searched=answer.searched data-valid=answer.ranked.len() data-gpus=answer.gpus
                    data-ms=format!("{:.3}", s.ms)>
                    {query.with(|q| headline(q, answer))}
                    <span class="muted">{format!(" Searched in {:.1} ms, here in your browser.", s.ms)}</span>
                </p>
            }.into_any(),
            Err(refusal) => view! {
                <div class="search-refusal" role="alert" data-gpus=query.with(|q| q.gpus)>
                    <p class="error">{refusal.headline.clone()}</p>
                    <ul>{refusal.reasons.iter().map(|r| view! { <li>{r.clone()}</li> }).collect_view()}</ul>
                </div>
            }.into_any(),
        })}
        <Plot searched drawn hovered opened open=open.clone() />
        {move || opened.get().map(|r| view! {
            <p class="search-opened" data-tp=r.candidate.sizes.tp data-cp=r.candidate.sizes.cp data-dp=r.candidate.sizes.dp
                data-order=r.candidate.order.to_string()>
                {format!("Opened below: {}. ", r.candidate)}
                <span class="muted">
                    "The rank grid shows its groups; the estimate is one step of it with its ZeRO stage, micro-batches and \
                     recomputation, as the search priced it; \"Run this layout\" runs exactly that."
                </span>
            </p>
        })}
        {move || open_on.get().map(|cluster_name| {
            clusters.get(&cluster_name).ok().cloned().map(|cluster| view! {
                <div class="search-estimate">
                    <LayoutControls state />
                    <EstimateFor configs=configs.clone() cluster cluster_name state config_name=estimate_config gpu_name=estimate_gpu />
                </div>
            })
        })}
        {move || searched.with(|s| s.result.as_ref().ok().map(|answer| view! { <Explained answer=answer.clone() open=open.clone() /> }))}
        <MeasureWinners configs=measure_configs />
    }
}

/// The config, the cluster, its GPU and the GPU count.
#[component]
fn Controls(query: RwSignal<Query>, configs: Arc<ConfigFile>, clusters: Arc<Clusters>, cluster_names: Vec<String>) -> impl IntoView {
    let (config_id, cluster_id, gpu_id, count_id) =
        (unique_id("search-config"), unique_id("search-cluster"), unique_id("search-gpu"), unique_id("search-gpus"));
    let config_names: Vec<String> = configs.names().map(str::to_owned).collect();
    let gpu_names = move || {
        let cluster = query.with(|q| q.cluster.clone());
        clusters.get(&cluster).map(|c| c.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>()).unwrap_or_default()
    };
    let position = move || GPU_COUNTS.iter().position(|&n| n == query.with(|q| q.gpus)).unwrap_or(0);
    let option = |name: String, current: Signal<String>| {
        let value = name.clone();
        view! { <option value=value.clone() selected=move || current.get() == value>{name}</option> }
    };
    let top = GPU_COUNTS.len() - 1;
    let current_config = Signal::derive(move || query.with(|q| q.config.clone()));
    let current_cluster = Signal::derive(move || query.with(|q| q.cluster.clone()));
    view! {
        <div class="toolbar search-controls">
            <label for=config_id.clone()>"config"</label>
            <select id=config_id class="search-config" on:change=move |ev| query.update(|q| q.config = event_target_value(&ev))>
                {config_names.into_iter().map(|n| option(n, current_config)).collect_view()}
            </select>
            <label for=cluster_id.clone()>"cluster"</label>
            <select id=cluster_id class="search-cluster"
                on:change=move |ev| query.update(|q| { q.cluster = event_target_value(&ev); q.gpu = None; })>
                {cluster_names.into_iter().map(|n| option(n, current_cluster)).collect_view()}
            </select>
            <label for=gpu_id.clone()>"GPU"</label>
            <select id=gpu_id class="search-gpu" on:change=move |ev| query.update(|q| q.gpu = Some(event_target_value(&ev)))>
                {move || {
                    let names = gpu_names();
                    let wanted = query.with(|q| q.gpu.clone());
                    // A GPU the cluster lacks (a chapter's typo) stays chosen, so the block says why.
                    let missing = wanted.clone().filter(|w| !names.contains(w));
                    let current = wanted.or_else(|| names.first().cloned()).unwrap_or_default();
                    missing.into_iter().chain(names).map(|n| {
                        let selected = n == current;
                        view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                    }).collect_view()
                }}
            </select>
            <label for=count_id.clone()>"GPUs"</label>
            <input id=count_id.clone() class="search-gpus" type="range" min="0" max=top step="1"
                prop:value=move || position().to_string()
                aria-valuetext=move || format!("{} GPUs", query.with(|q| q.gpus))
                on:input=move |ev| {
                    if let Some(&n) = event_target_value(&ev).parse::<usize>().ok().and_then(|i| GPU_COUNTS.get(i)) {
                        query.update(|q| q.gpus = n);
                    }
                } />
            <output for=count_id class="search-gpu-count">{move || query.with(|q| q.gpus)}</output>
        </div>
    }
}

/// The scatter, the layout under the pointer read out beside it, and clicks that open one.
#[component]
fn Plot(
    searched: Memo<Searched>,
    drawn: Memo<Option<Scatter>>,
    hovered: RwSignal<Option<usize>>,
    opened: RwSignal<Option<Ranked>>,
    open: impl Fn(usize) + Clone + Send + Sync + 'static,
) -> impl IntoView {
    let svg = NodeRef::<leptos::svg::Svg>::new();
    let under = move |x: i32, y: i32| {
        let rect = svg.get()?.get_bounding_client_rect();
        let scale = WIDTH / rect.width().max(1.0);
        let (x, y) = ((f64::from(x) - rect.left()) * scale, (f64::from(y) - rect.top()) * scale);
        drawn.with(|d| d.as_ref().and_then(|s| s.mark_at(x, y)).map(|m| m.index))
    };
    let layout = move |index: usize| searched.with(|s| s.result.as_ref().ok().and_then(|a| a.ranked.get(index).copied()));
    // The rings of the layout under the pointer and of the one opened, when this answer has it.
    let marked = move || {
        let ring = |r: Ranked, class: &'static str| {
            let (x, y) = drawn.with(|d| d.as_ref().map(|s| s.position(&r)))?;
            Some(view! { <circle class=class cx=format!("{x:.1}") cy=format!("{y:.1}") r="9" /> })
        };
        let here = |r: &Ranked| searched.with(|s| s.result.as_ref().is_ok_and(|a| a.ranked.iter().any(|x| x.candidate == r.candidate)));
        let hover = hovered.get().and_then(layout).and_then(|r| ring(r, "search-hovered"));
        let open = opened.get().filter(here).and_then(|r| ring(r, "search-open"));
        view! { {hover}{open} }
    };
    let readout = move || {
        let Some(index) = hovered.get() else {
            return view! {
                <p class="search-readout muted">"Point at a layout to read it; click it to open it in the rank grid and the estimate below."</p>
            }
            .into_any();
        };
        let Some(r) = layout(index) else { return ().into_any() };
        let rows =
            fields(&r).into_iter().map(|(name, value)| view! { <tr><th>{name}</th><td data-field=name>{value}</td></tr> }).collect_view();
        view! {
            <div class="search-readout" data-index=index data-tp=r.candidate.sizes.tp data-cp=r.candidate.sizes.cp
                data-dp=r.candidate.sizes.dp data-order=r.candidate.order.to_string()>
                <p>{format!("#{} of {}", index + 1, searched.with(|s| s.result.as_ref().map_or(0, |a| a.ranked.len())))}</p>
                <table><tbody>{rows}</tbody></table>
            </div>
        }
        .into_any()
    };
    view! {
        {move || drawn.get().map(|scatter| {
            let open = open.clone();
            let Scatter { picture, .. } = scatter;
            let items = picture.items.into_iter().map(item).collect_view();
            view! {
                <div class="search-plot">
                    <figure class="picture search-scatter">
                        <svg node_ref=svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label=picture.label class="search-svg"
                            viewBox=format!("0 0 {:.0} {:.0}", picture.width, picture.height) width=format!("{:.0}", picture.width)
                            on:pointermove=move |ev| hovered.set(under(ev.client_x(), ev.client_y()))
                            on:pointerleave=move |_| hovered.set(None)
                            on:click=move |ev| {
                                if let Some(index) = under(ev.client_x(), ev.client_y()) {
                                    open(index);
                                }
                            }>
                            {items}
                            {marked}
                        </svg>
                    </figure>
                    {readout}
                </div>
            }
        })}
    }
}

/// The best few and why, the tutorial's choice, and what was left out.
#[component]
fn Explained(answer: Answer, open: impl Fn(usize) + Clone + Send + Sync + 'static) -> impl IntoView {
    let rows = best(&answer, EXPLAINED)
        .into_iter()
        .map(|b| {
            let open = open.clone();
            let index = b.rank - 1;
            let parts = b
                .parts
                .iter()
                .map(|(part, seconds, share)| view! { <li>{format!("{part}: {:.1} ms ({:.0} %)", seconds * 1e3, share * 100.0)}</li> })
                .collect_view();
            view! {
                <li class="search-best-layout" data-rank=b.rank data-limit=b.limit.key()>
                    <strong>{format!("#{} ", b.rank)}</strong>{b.layout.clone()}
                    " "
                    <button type="button" class="open-layout" on:click=move |_| open(index)>"Open"</button>
                    <br /><span class="muted">{format!("Limited by {}; the step:", b.limit.name())}</span>
                    <ul class="search-parts">{parts}</ul>
                </li>
            }
        })
        .collect_view();
    let standing = tutorial(&answer);
    let tutorial_rows = standing
        .into_iter()
        .map(|t| {
            let open = open.clone();
            view! {
                <li class="search-tutorial-layout" data-rank=t.index.map(|i| i + 1)>
                    <code>{t.command.clone()}</code>" "<span class="muted">{format!("(checklist {})", t.checklist)}</span>
                    <br />{t.verdict.clone()}
                    {t.behind.clone().map(|b| view! { <br /><span>{format!("Behind the best: {b}.")}</span> })}
                    {t.index.map(|i| view! { " " <button type="button" class="open-layout" on:click=move |_| open(i)>"Open"</button> })}
                </li>
            }
        })
        .collect_view();
    let has_tutorial = !answer.tutorial.is_empty();
    let left_out = exclusions(&answer)
        .into_iter()
        .map(|e| {
            view! {
                <tr data-field=e.field>
                    <td class="count">{e.count}</td>
                    <td><code>{e.field}</code>": "{e.sentence}<br /><span class="muted">{format!("e.g. {}", e.example)}</span></td>
                </tr>
            }
        })
        .collect_view();
    let legend = Limit::ALL.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ");
    view! {
        <div class="search-explained">
            <h4>"The fastest, and why"</h4>
            <ol class="search-best">{rows}</ol>
            <h4>"The tutorial's choice"</h4>
            {match has_tutorial {
                true => view! { <ul class="search-tutorial-list">{tutorial_rows}</ul> }.into_any(),
                false => view! { <p class="muted">"The tutorial made no choice for this config on this many GPUs."</p> }.into_any(),
            }}
            <details class="search-left-out">
                <summary>{format!("Left out, by rule ({} layouts)", thousands(answer.searched - answer.ranked.len() as u64))}</summary>
                <table><tbody>{left_out}</tbody></table>
                <p class="muted">{format!("Each layout counts under the first rule it breaks. The colours: {legend}.")}</p>
            </details>
        </div>
    }
}
