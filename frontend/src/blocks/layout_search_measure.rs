//! "Run the top three", under the layout search: the search of a CPU config on this machine's
//! cores (as the server measured them), its three fastest rank layouts as a sweep run here one
//! after another, each bar beside what was predicted at its launch, and once all three are
//! measured, whether the measurement keeps the predicted ranking (`scalebook_page`'s
//! `layout_search_measure` decides).

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_page::blocks::layout_search_measure::{DEFAULT_CONFIG, RANKS, Winner, verdict, winners};
use scalebook_page::blocks::layout_search_model::Refusal;
use scalebook_shared::config::ConfigFile;
use scalebook_shared::numbers::thousands;
use scalebook_shared::search::Answer;

use super::estimate::this_machine;
use super::sweep::{SweepBlock, sweep_state};
use super::sweep_model::Measure;
use crate::ids::unique_id;
use crate::net::fetched::fetched;

/// What the sweep shows: each variant's samples/s beside its prediction.
const MEASURE: Measure = Measure::Throughput;

#[component]
pub fn MeasureWinners(configs: Arc<ConfigFile>) -> impl IntoView {
    let names: Vec<String> = configs.cpu_names().map(str::to_owned).collect();
    let first = names.iter().find(|n| *n == DEFAULT_CONFIG).or(names.first()).cloned().unwrap_or_default();
    let config = RwSignal::new(first);
    let ranks = RwSignal::new(RANKS[0]);
    // This machine is measured by the server the first time it is asked (a few seconds of
    // its cores), so only when the learner asks.
    let asked = RwSignal::new(false);
    let machine = fetched(move || asked.get(), |wanted| async move { if wanted { Some(this_machine().await) } else { None } });
    let found = Memo::new(move |_| {
        let measured = machine.get().flatten()?;
        Some(
            measured
                .map_err(|e| Refusal { headline: "This machine's measurement is not here:".into(), reasons: vec![e] })
                .and_then(|machine| config.with(|c| winners(c, &configs, &machine, ranks.get()))),
        )
    });
    let (config_id, ranks_id) = (unique_id("measure-config"), unique_id("measure-ranks"));
    view! {
        <div class="search-measure">
            <h4>"Measure the winners"</h4>
            <p class="muted">
                "The same search for a small config on this machine's cores, whose three fastest rank layouts then run here one \
                 after another as a sweep: each bar is what a run measured, its tick what was predicted at its launch."
            </p>
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="measure-config" on:change=move |ev| config.set(event_target_value(&ev))>
                    {names.into_iter().map(|n| {
                        let value = n.clone();
                        view! { <option value=value.clone() selected=move || config.get() == value>{n}</option> }
                    }).collect_view()}
                </select>
                <label for=ranks_id.clone()>"ranks"</label>
                <select id=ranks_id class="measure-ranks" on:change=move |ev| ranks.set(event_target_value(&ev).parse().unwrap_or(RANKS[0]))>
                    {RANKS.map(|n| view! { <option value=n selected=move || ranks.get() == n>{n}</option> })}
                </select>
                <button type="button" class="search-machine" disabled=move || asked.get() on:click=move |_| asked.set(true)>
                    "Find the top three on this machine"
                </button>
            </div>
            {move || match found.get() {
                None => asked.get().then(|| view! { <p class="muted">"Measuring this machine (a few seconds, once)…"</p> }.into_any()),
                Some(Err(refusal)) => Some(view! {
                    <div class="search-refusal" role="alert">
                        <p class="error">{refusal.headline}</p>
                        <ul>{refusal.reasons.into_iter().map(|r| view! { <li>{r}</li> }).collect_view()}</ul>
                    </div>
                }.into_any()),
                Some(Ok((answer, winners))) => Some(view! { <TopThree answer winners config=config.get_untracked() /> }.into_any()),
            }}
        </div>
    }
}

#[component]
fn TopThree(answer: Answer, winners: Vec<Winner>, config: String) -> impl IntoView {
    let variants: Vec<_> = winners.iter().map(|w| w.variant.clone()).collect();
    let state = sweep_state(config.clone(), MEASURE, variants.clone());
    let listed = winners
        .iter()
        .map(|w| {
            let settings = std::iter::once(format!("dp={}", w.variant.dp)).chain(w.variant.overrides.iter().cloned()).collect::<Vec<_>>().join(" ");
            view! {
                <li class="search-winner" data-rank=w.rank>
                    <strong>{w.variant.label.clone()}</strong>
                    {format!(": rank {} of the search, {:.1} samples/s predicted, {:.2} GiB per rank. ", w.rank, w.ranked.samples_per_sec, w.ranked.memory_gb)}
                    <code>{settings}</code>
                </li>
            }
        })
        .collect_view();
    let judged = move || {
        let figures = state.figures(MEASURE);
        let predicted: Vec<Option<f64>> = figures.iter().map(|f| f.predicted).collect();
        let measured: Vec<Option<f64>> = figures.iter().map(|f| f.measured).collect();
        match verdict(&winners, &predicted, &measured) {
            Some(v) => view! { <p class="search-verdict" data-agrees=v.agrees.to_string()>{v.text}</p> }.into_any(),
            None => view! { <p class="search-verdict muted">"Once all three have run, their measured ranking is set beside the predicted one."</p> }
                .into_any(),
        }
    };
    view! {
        <p class="search-machine-headline" data-valid=answer.ranked.len()>
            {format!(
                "{config} on {} ranks of this machine's cores: {} layouts searched, {} run. The three fastest rank layouts:",
                answer.gpus,
                thousands(answer.searched),
                thousands(answer.ranked.len() as u64)
            )}
        </p>
        <ol class="search-winners">{listed}</ol>
        <SweepBlock config measure=MEASURE variants inside=true />
        {judged}
    }
}
