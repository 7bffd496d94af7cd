//! The sweep block: the same config run several ways on this machine, one run after another so
//! they do not share the cores, then drawn side by side (throughput, scaling efficiency,
//! validation-loss curves, or whether they learn the same). The DDP-knobs, scaling, bottleneck and large-batch lessons of the
//! chapters are sweeps. The block remembers its runs across reloads.

use leptos::prelude::*;
use scalebook_shared::protocol::RunId;
use scalebook_shared::sweep::Variant;

use super::run_status::ViewerNote;
use super::sweep_axes::{waiting, x_ticks, y_ticks};
use super::sweep_board::ScalingBoard;
use super::sweep_model::{
    self, BAR_HEIGHT, CURVES_HEIGHT, Figures, LABEL_WIDTH, LossAxis, Measure, Progress, WIDTH, bars, bars_height, curves, labels,
    loss_curve,
};
use super::sweep_state::SweepState;
use super::sweep_verdicts::Agreement;
use crate::ids::unique_id;
use crate::kept::Kept;
use crate::library::Ready;
use crate::routing::slug_from_hash;
use crate::runs::Runs;

/// The state of the sweep of `config`'s `variants` in this chapter, kept for the page's life:
/// the block's, and what another block that reads the sweep's figures finds (the layout
/// search's verdict on its top three).
pub fn sweep_state(config: String, measure: Measure, variants: Vec<Variant>) -> SweepState {
    let hash = window().location().hash().unwrap_or_default();
    let memory = sweep_model::memory_key(&hash, &config, measure, &variants);
    expect_context::<Kept>().get_or_make(&memory, || SweepState::new(memory.clone(), slug_from_hash(&hash), config, variants, measure))
}

/// `inside` another block (the layout search's top three), it is not a `.block` of its own:
/// the classroom numbers a chapter's blocks, and a sweep that only some pages open must not
/// shift the count.
#[component]
pub fn SweepBlock(config: String, measure: Measure, variants: Vec<Variant>, #[prop(optional)] inside: bool) -> impl IntoView {
    let state = sweep_state(config, measure, variants);
    let SweepState { runs, library, chosen, ids, progress, variants, .. } = state;
    let busy = move || state.busy();
    let blocked = move || state.blocked();
    let start = move |_| state.start();
    let status = move || state.status();

    let config_id = unique_id("sweep-config");
    view! {
        <section class=if inside { "sweep-block" } else { "block sweep-block" } aria-label="Sweep" data-measure=format!("{measure:?}").to_lowercase()>
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="sweep-config" disabled=busy on:change=move |ev| chosen.set(event_target_value(&ev))>
                    // The configs a sweep runs here in minutes; the chapters' sweeps are valid on
                    // each (shared's coverage test).
                    {move || library.configs.ready().map(|file| file.cpu_names().map(|n| {
                        let selected = chosen.get_untracked() == n;
                        view! { <option value=n.to_owned() selected=selected>{n.to_owned()}</option> }
                    }).collect_view())}
                </select>
                // The instructor, and a learner whom the instructor lets launch (one variant
                // at a time counts one of their runs).
                <Show when=move || runs.may_launch() || runs.learner_runs().is_some() fallback=|| view! { <ViewerNote /> }>
                    <button type="button" class="run-sweep" on:click=start disabled=blocked>"Run all"</button>
                </Show>
                <span class="muted sweep-status" data-progress=move || progress.with(Progress::name)>{status}</span>
            </div>
            <ol class="variants">
                {variants.with_value(|v| v.iter().enumerate().map(|(i, variant)| {
                    let settings = std::iter::once(format!("dp={}", variant.dp)).chain(variant.overrides.iter().cloned()).collect::<Vec<_>>().join(" ");
                    let state = move || ids.with(|ids| ids.get(i).cloned().flatten()).and_then(|id| runs.record(&id)).map(|r| format!("{:?}", r.state()).to_lowercase());
                    view! {
                        <li data-variant=i data-state=move || state().unwrap_or_default()>
                            <span class="label">{variant.label.clone()}</span>" "<code>{settings}</code>" "
                            <span class="muted">{move || state().unwrap_or_else(|| "not run".into())}</span>
                        </li>
                    }
                }).collect_view())}
            </ol>
            <p class="muted sweep-seed" data-seed=state.seed()>
                {format!("Every variant starts from seed {}: the same initial weights and data order, so they differ only by their changes.", state.seed())}
            </p>
            {move || match measure {
                Measure::Loss | Measure::StepLoss | Measure::Rmse => view! { <LossCurves ids labels=variants.with_value(|v| labels(v)) measure /> }.into_any(),
                Measure::Scaling => view! { <ScalingBoard state /> }.into_any(),
                Measure::Agreement => view! {
                    <LossCurves ids labels=variants.with_value(|v| labels(v)) measure />
                    <Agreement state />
                }
                .into_any(),
                _ => view! { <Bars labels=variants.with_value(|v| labels(v)) figures=state.figures(measure) measure /> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn Bars(labels: Vec<String>, figures: Vec<Figures>, measure: Measure) -> impl IntoView {
    let height = bars_height(labels.len());
    let axis = match measure {
        Measure::Efficiency => "samples/s per rank, relative to the first variant; the tick is what was predicted at launch",
        Measure::Memory => {
            "the most memory a rank held (a CPU rank's resident set, a GPU's allocator peak), in GiB; the tick is the estimate's total at launch"
        }
        Measure::State => {
            "the training state the fullest rank holds (parameters, gradients, optimizer state), in MiB, as the trainer counts it; \
             the tick is the estimate's at launch"
        }
        _ => "training samples/s (median over the epochs after the first); the tick is what was predicted at launch",
    };
    view! {
        <figure class="sweep-chart">
            <svg viewBox=format!("0 0 {WIDTH} {height}") role="img" aria-label=axis>
                {bars(&labels, &figures, measure).into_iter().zip(figures).enumerate().map(|(i, (bar, f))| view! {
                    <g class="bar" data-variant=i data-value=f.measured.map(|v| v.to_string()).unwrap_or_default()
                        data-predicted=f.predicted.map(|v| v.to_string()).unwrap_or_default()>
                        <text x=LABEL_WIDTH - 8.0 y=bar.y + BAR_HEIGHT * 0.65 text-anchor="end">{bar.label}</text>
                        <rect x=LABEL_WIDTH y=bar.y width=bar.width height=BAR_HEIGHT class=format!("series-{}", i % 8) />
                        {bar.predicted_x.map(|x| view! {
                            <line class="predicted" x1=LABEL_WIDTH + x x2=LABEL_WIDTH + x y1=bar.y - 3.0 y2=bar.y + BAR_HEIGHT + 3.0 />
                        })}
                        <text x=LABEL_WIDTH + bar.width.max(bar.predicted_x.unwrap_or(0.0)) + 6.0 y=bar.y + BAR_HEIGHT * 0.65 class="value">{bar.text}</text>
                    </g>
                }).collect_view()}
            </svg>
            <figcaption class="muted">{axis}</figcaption>
        </figure>
    }
}

#[component]
fn LossCurves(ids: RwSignal<Vec<Option<RunId>>>, labels: Vec<String>, measure: Measure) -> impl IntoView {
    let runs = expect_context::<Runs>();
    let (tag, words) = measure.loss_tag().unwrap_or_default();
    let axis = RwSignal::new(LossAxis::Step);
    let drawn = Memo::new(move |_| {
        let along = axis.get();
        let per_run: Vec<_> =
            ids.get().iter().map(|id| id.as_ref().and_then(|id| runs.stream(id)?.series.with(|s| loss_curve(s, tag, along)))).collect();
        curves(&per_run)
    });
    let axis_id = unique_id("sweep-axis");
    view! {
        <figure class="sweep-chart">
            <svg viewBox=format!("0 0 {WIDTH} {CURVES_HEIGHT}") role="img" aria-label=words>
                {move || drawn.with(|c| y_ticks(&c.y_ticks))}
                {move || drawn.with(|c| x_ticks(&c.x_ticks))}
                {move || drawn.with(|c| c.paths.iter().enumerate().map(|(i, d)| d.clone().map(|d| view! {
                    <path class=format!("curve series-{}", i % 8) data-variant=i d=d fill="none" />
                })).collect_view())}
                {move || waiting(drawn.with(|c| c.paths.iter().all(Option::is_none)), match measure {
                    Measure::StepLoss => "Run all: each variant's training loss, step by step, is drawn here as it trains.",
                    Measure::Rmse => "Run all: each variant's validation RMSE of u10m, epoch by epoch, is drawn here as it trains.",
                    _ => "Run all: each variant's validation loss, epoch by epoch, is drawn here as it trains.",
                })}
            </svg>
            <figcaption class="legend">
                {labels.into_iter().enumerate().map(|(i, l)| view! { <span class=format!("key series-{}", i % 8)>{l}</span> }).collect_view()}
                <span class="muted">{move || format!(" {words} {}", axis.get().words())}</span>
                <label for=axis_id.clone()>" x axis "</label>
                <select id=axis_id class="sweep-axis" on:change=move |ev| {
                    axis.set(if event_target_value(&ev) == LossAxis::Time.name() { LossAxis::Time } else { LossAxis::Step });
                }>
                    {[LossAxis::Step, LossAxis::Time].map(|a| view! { <option value=a.name() selected=move || axis.get() == a>{a.words()}</option> })}
                </select>
            </figcaption>
        </figure>
    }
}
