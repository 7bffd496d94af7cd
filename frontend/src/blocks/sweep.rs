//! The sweep block: the same config run several ways on this machine, one run after another so
//! they do not share the cores, then drawn side by side (throughput, scaling efficiency, or
//! validation-loss curves). The DDP-knobs, scaling, bottleneck and large-batch lessons of the
//! chapters are sweeps. The block remembers its runs across reloads.

use leptos::prelude::*;
use scalebook_shared::protocol::{ExecutorSpec, LaunchRequest, RunId, RunState};
use scalebook_shared::sweep::Variant;

use super::run_status::{ViewerNote, remember, remembered};
use super::sweep_model::{
    BAR_HEIGHT, CURVES_HEIGHT, CURVES_MARGIN, LABEL_WIDTH, Measure, WIDTH, bars, bars_height, curves, efficiencies, loss_curve, throughput,
};
use crate::ids::unique_id;
use crate::library::{Library, Ready};
use crate::net::ws::ConnectionState;
use crate::runs::{Answer, Runs};

/// Where the sweep stands.
#[derive(Debug, Clone, PartialEq)]
enum Progress {
    Idle,
    /// Waiting for the server to accept variant `index`'s launch.
    Launching {
        index: usize,
        ticket: u64,
    },
    /// Variant `index` is running.
    Running(usize),
    Stopped(String),
}

impl Progress {
    /// The state's name, for the page's `data-progress` (what a test or a style can match).
    fn name(&self) -> &'static str {
        match self {
            Progress::Idle => "idle",
            Progress::Launching { .. } => "launching",
            Progress::Running(_) => "running",
            Progress::Stopped(_) => "stopped",
        }
    }
}

#[component]
pub fn SweepBlock(config: String, measure: Measure, variants: Vec<Variant>) -> impl IntoView {
    let runs = expect_context::<Runs>();
    let library = expect_context::<Library>();
    let chosen = RwSignal::new(config.clone());
    let memory = format!("scalebook-sweep:{}:{config}:{}", window().location().hash().unwrap_or_default(), labels(&variants).join("/"));
    let key = move |i: usize| format!("{memory}:{i}");
    let ids = RwSignal::new((0..variants.len()).map(|i| remembered(&key(i))).collect::<Vec<_>>());
    for id in ids.get_untracked().iter().flatten() {
        runs.watch(id);
    }
    let progress = RwSignal::new(Progress::Idle);
    let variants = StoredValue::new(variants);

    let launch = move |index: usize| {
        let Some(variant) = variants.with_value(|v| v.get(index).cloned()) else {
            progress.set(Progress::Idle);
            return;
        };
        let request = LaunchRequest {
            config: chosen.get_untracked(),
            overrides: variant.overrides,
            dp: variant.dp,
            executor: ExecutorSpec::Local,
            seed: None,
        };
        match runs.launch(request) {
            Ok(ticket) => progress.set(Progress::Launching { index, ticket }),
            Err(message) => progress.set(Progress::Stopped(message)),
        }
    };
    // The launch answered: watch the run, or stop and say why the server refused it.
    Effect::new(move |_| {
        let Progress::Launching { index, ticket } = progress.get() else { return };
        let Some(answer) = runs.answer(ticket) else { return };
        match answer {
            Answer::Launched(id) => {
                runs.watch(&id);
                remember(&key(index), &id);
                ids.update(|ids| ids[index] = Some(id));
                progress.set(Progress::Running(index));
            }
            Answer::Refused(report) => {
                let label = variants.with_value(|v| v[index].label.clone());
                let problems: Vec<String> = report.problems.0.iter().map(ToString::to_string).collect();
                progress.set(Progress::Stopped(format!("“{label}” was refused: {} {}", report.message, problems.join("; "))));
            }
            Answer::Script(_) => {}
        }
    });
    // A run ended: the next variant starts, or the sweep stops at a run that did not complete.
    Effect::new(move |_| {
        let Progress::Running(index) = progress.get() else { return };
        let Some(state) = ids.with(|ids| ids[index].clone()).and_then(|id| runs.record(&id)).map(|r| r.state()) else { return };
        match state {
            RunState::Completed => launch(index + 1),
            s if s.is_final() => {
                let label = variants.with_value(|v| v[index].label.clone());
                progress.set(Progress::Stopped(format!("“{label}” ended {s:?}; see its log in the run list")));
            }
            _ => {}
        }
    });

    let values = Memo::new(move |_| {
        let ids = ids.get();
        let streams = ids.iter().map(|id| id.as_ref().and_then(|id| runs.stream(id)));
        streams.map(|s| s.and_then(|s| s.series.with(|series| throughput(series)))).collect::<Vec<_>>()
    });
    let busy = move || matches!(progress.get(), Progress::Launching { .. } | Progress::Running(_));
    let blocked = move || busy() || runs.connection.get() != ConnectionState::Open;
    let start = move |_| {
        ids.update(|ids| ids.iter_mut().for_each(|id| *id = None));
        launch(0);
    };
    let status = move || match progress.get() {
        Progress::Idle if values.with(|v| v.iter().all(Option::is_some)) => "All variants ran.".to_owned(),
        Progress::Idle => "Runs each variant here, one after another.".to_owned(),
        Progress::Launching { index, .. } | Progress::Running(index) => {
            format!("Running {} of {}: {}", index + 1, variants.with_value(Vec::len), variants.with_value(|v| v[index].label.clone()))
        }
        Progress::Stopped(why) => why,
    };

    let config_id = unique_id("sweep-config");
    view! {
        <section class="block sweep-block" aria-label="Sweep" data-measure=format!("{measure:?}").to_lowercase()>
            <div class="toolbar">
                <label for=config_id.clone()>"config"</label>
                <select id=config_id class="sweep-config" disabled=busy on:change=move |ev| chosen.set(event_target_value(&ev))>
                    {move || library.configs.ready().map(|file| file.names().map(|n| {
                        let selected = chosen.get_untracked() == n;
                        view! { <option value=n.to_owned() selected=selected>{n.to_owned()}</option> }
                    }).collect_view())}
                </select>
                <Show when=move || runs.may_launch() fallback=|| view! { <ViewerNote /> }>
                    <button type="button" class="run-sweep" on:click=start disabled=blocked>"Run all"</button>
                </Show>
                <span class="muted sweep-status" data-progress=move || progress.with(Progress::name)>{status}</span>
            </div>
            <ol class="variants">
                {variants.with_value(|v| v.iter().enumerate().map(|(i, variant)| {
                    let settings = std::iter::once(format!("dp={}", variant.dp)).chain(variant.overrides.iter().cloned()).collect::<Vec<_>>().join(" ");
                    let state = move || ids.with(|ids| ids[i].clone()).and_then(|id| runs.record(&id)).map(|r| format!("{:?}", r.state()).to_lowercase());
                    view! {
                        <li data-variant=i data-state=move || state().unwrap_or_default()>
                            <span class="label">{variant.label.clone()}</span>" "<code>{settings}</code>" "
                            <span class="muted">{move || state().unwrap_or_else(|| "not run".into())}</span>
                        </li>
                    }
                }).collect_view())}
            </ol>
            {move || match measure {
                Measure::Loss => view! { <LossCurves ids labels=variants.with_value(|v| labels(v)) /> }.into_any(),
                _ => {
                    let dps = variants.with_value(|v| v.iter().map(|v| v.dp).collect::<Vec<_>>());
                    let shown = match measure {
                        Measure::Efficiency => efficiencies(&dps.into_iter().zip(values.get()).collect::<Vec<_>>()),
                        _ => values.get(),
                    };
                    view! { <Bars labels=variants.with_value(|v| labels(v)) values=shown measure /> }.into_any()
                }
            }}
        </section>
    }
}

fn labels(variants: &[Variant]) -> Vec<String> {
    variants.iter().map(|v| v.label.clone()).collect()
}

#[component]
fn Bars(labels: Vec<String>, values: Vec<Option<f64>>, measure: Measure) -> impl IntoView {
    let height = bars_height(labels.len());
    let axis = match measure {
        Measure::Efficiency => "samples/s per rank, relative to the first variant",
        _ => "training samples/s (median over the epochs after the first)",
    };
    view! {
        <figure class="sweep-chart">
            <svg viewBox=format!("0 0 {WIDTH} {height}") role="img" aria-label=axis>
                {bars(&labels, &values, measure).into_iter().zip(values).enumerate().map(|(i, (bar, value))| view! {
                    <g class="bar" data-variant=i data-value=value.map(|v| v.to_string()).unwrap_or_default()>
                        <text x=LABEL_WIDTH - 8.0 y=bar.y + BAR_HEIGHT * 0.65 text-anchor="end">{bar.label}</text>
                        <rect x=LABEL_WIDTH y=bar.y width=bar.width height=BAR_HEIGHT class=format!("series-{}", i % 8) />
                        <text x=LABEL_WIDTH + bar.width + 6.0 y=bar.y + BAR_HEIGHT * 0.65 class="value">{bar.text}</text>
                    </g>
                }).collect_view()}
            </svg>
            <figcaption class="muted">{axis}</figcaption>
        </figure>
    }
}

#[component]
fn LossCurves(ids: RwSignal<Vec<Option<RunId>>>, labels: Vec<String>) -> impl IntoView {
    let runs = expect_context::<Runs>();
    let drawn = Memo::new(move |_| {
        let per_run: Vec<_> =
            ids.get().iter().map(|id| id.as_ref().and_then(|id| runs.stream(id)?.series.with(|s| loss_curve(s)))).collect();
        curves(&per_run)
    });
    view! {
        <figure class="sweep-chart">
            <svg viewBox=format!("0 0 {WIDTH} {CURVES_HEIGHT}") role="img" aria-label="validation loss by step">
                {move || drawn.with(|c| c.y_ticks.iter().map(|(y, t)| view! {
                    <text class="tick" x=CURVES_MARGIN - 6.0 y=*y text-anchor="end">{t.clone()}</text>
                    <line class="grid" x1=CURVES_MARGIN x2=WIDTH - CURVES_MARGIN / 2.0 y1=*y y2=*y />
                }).collect_view())}
                {move || drawn.with(|c| c.x_ticks.iter().map(|(x, t)| view! {
                    <text class="tick" x=*x y=CURVES_HEIGHT - 6.0 text-anchor="middle">{t.clone()}</text>
                }).collect_view())}
                {move || drawn.with(|c| c.paths.iter().enumerate().map(|(i, d)| d.clone().map(|d| view! {
                    <path class=format!("curve series-{}", i % 8) data-variant=i d=d fill="none" />
                })).collect_view())}
            </svg>
            <figcaption class="legend">
                {labels.into_iter().enumerate().map(|(i, l)| view! { <span class=format!("key series-{}", i % 8)>{l}</span> }).collect_view()}
                <span class="muted">" validation loss (Loss/valid) by step"</span>
            </figcaption>
        </figure>
    }
}
