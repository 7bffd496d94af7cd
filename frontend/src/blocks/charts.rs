//! The charts block: one line chart per metric tag, over every charted run and (optionally)
//! the tutorial's baseline, updating live as points arrive. Shared controls: the x axis (step,
//! relative or wall time) and TensorBoard's smoothing slider (both page-wide, see
//! `classroom::ChartControls`), a log scale, legend toggles; per chart a hover read-out and
//! CSV / SVG export. TensorBoard event files dropped on the block are read in the browser and
//! overlaid, on this page only (nothing reaches the server).

use std::collections::HashSet;

use leptos::prelude::*;
use scalebook_shared::charts::{CsvSeries, MAX_SMOOTHING, XAxis, format_clock, format_duration, format_number, to_csv};

use super::ChartSpec;
use super::chart_drawing::{BOTTOM, Drawing, HEIGHT, LEFT, RIGHT, Settings, Source, TOP, WIDTH, plot_width};
use super::charts_state::ChartsState;
use crate::classroom::ChartControls;
use crate::download;
use crate::ids::unique_id;

#[component]
pub fn ChartsBlock(spec: ChartSpec) -> impl IntoView {
    let state = ChartsState::new(spec);
    let ChartsState { log, baseline, hidden, tags, refused, dragging, sources, visible, settings, .. } = state;
    let shown = move || state.shown();
    let change = move |edit: &dyn Fn(&mut ChartControls)| state.change(edit);
    let available = move || state.available();
    let on_drop = move |ev: web_sys::DragEvent| state.drop_files(ev);

    let axis_id = unique_id("axis");
    let smooth_id = unique_id("smoothing");
    let add_id = unique_id("add-tag");
    view! {
        <section class="block charts" aria-label="Charts"
            style:outline=move || if dragging.get() { "2px dashed currentColor" } else { "none" }
            on:dragover=move |ev| {
                // Accepting the drag is what makes the block a drop target.
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop>
            <div class="toolbar">
                <label for=axis_id.clone()>"x axis"</label>
                <select id=axis_id class="axis" on:change=move |ev| if let Some(a) = XAxis::from_name(&event_target_value(&ev)) { change(&|c| c.axis = a) }>
                    {XAxis::ALL.map(|a| view! { <option value=a.name() selected=move || shown().axis == a>{a.label()}</option> })}
                </select>
                <label for=smooth_id.clone()>"smoothing"</label>
                <input id=smooth_id class="smoothing" type="range" min="0" max=MAX_SMOOTHING step="0.001"
                    prop:value=move || shown().smoothing.to_string()
                    on:input=move |ev| {
                        let smoothing = event_target_value(&ev).parse().unwrap_or(0.0);
                        change(&|c| c.smoothing = smoothing);
                    } />
                <output>{move || format!("{:.3}", shown().smoothing)}</output>
                <label><input type="checkbox" class="log" prop:checked=move || log.get() on:change=move |ev| log.set(event_target_checked(&ev)) />" log scale"</label>
                <label><input type="checkbox" class="baseline" prop:checked=move || baseline.get() on:change=move |ev| baseline.set(event_target_checked(&ev)) />" tutorial baseline"</label>
                <label for=add_id.clone()>"add a chart"</label>
                <select id=add_id on:change=move |ev| {
                    let tag = event_target_value(&ev);
                    if !tag.is_empty() { tags.update(|t| t.push(tag)); }
                }>
                    <option value="" selected=true>"tag…"</option>
                    {move || available().into_iter().map(|t| view! { <option value=t.clone()>{t.clone()}</option> }).collect_view()}
                </select>
            </div>
            <Legend sources hidden />
            {move || refused.with(|all| (!all.is_empty()).then(|| view! { <p class="error" role="alert">{all.join(" ")}</p> }))}
            {move || sources.with(Vec::is_empty).then(|| view! {
                <p class="muted">"No runs of this chapter charted yet: launch one here, tick “chart” in a run list (a run charted so shows in every chapter), or drop a TensorBoard event file here."</p>
            })}
            <div class="chart-grid">
                <For each=move || tags.get() key=|t| t.clone() let:tag>
                    <LineChart tag=tag.clone() sources=visible settings on_remove=Callback::new(move |_| tags.update(|t| t.retain(|x| *x != tag))) />
                </For>
            </div>
        </section>
    }
}

/// One toggle per run (and the baseline, and each dropped file): click to hide or show it on
/// every chart.
#[component]
fn Legend(sources: Memo<Vec<Source>>, hidden: RwSignal<HashSet<String>>) -> impl IntoView {
    move || {
        let items = sources
            .get()
            .into_iter()
            .map(|s| {
                let key = s.key.clone();
                let shown = {
                    let key = key.clone();
                    move || hidden.with(|h| !h.contains(&key))
                };
                view! {
                    <button type="button" class="legend-item" data-key=s.key.clone() aria-pressed=move || shown().to_string()
                        on:click=move |_| hidden.update(|h| if !h.remove(&key) { h.insert(key.clone()); })>
                        <span class="swatch" style=format!("background: {}", s.colour)></span>
                        {s.label}
                    </button>
                }
            })
            .collect_view();
        view! { <div class="legend" role="group" aria-label="Runs shown">{items}</div> }
    }
}

#[component]
fn LineChart(tag: String, sources: Memo<Vec<Source>>, settings: Memo<Settings>, on_remove: Callback<()>) -> impl IntoView {
    let drawing = {
        let tag = tag.clone();
        Memo::new(move |_| sources.with(|s| Drawing::build(&tag, s, settings.get())))
    };
    let pointer = RwSignal::new(None::<f64>);
    let svg = NodeRef::<leptos::svg::Svg>::new();
    let to_svg_x = move |client_x: i32| {
        let rect = svg.get()?.get_bounding_client_rect();
        Some((f64::from(client_x) - rect.left()) * WIDTH / rect.width().max(1.0))
    };
    let export_csv = {
        let tag = tag.clone();
        move |_| {
            let csv = sources.with(|all| {
                let series: Vec<CsvSeries<'_>> = all
                    .iter()
                    .filter_map(|s| {
                        let series = s.series.iter().find(|x| x.tag == tag)?;
                        Some(CsvSeries { run: &s.key, tag: &tag, buckets: &series.buckets, start_wall: s.start_wall })
                    })
                    .collect();
                to_csv(&series)
            });
            let _ = download::save(&format!("scalebook-{}.csv", download::file_stem(&tag)), "text/csv", &csv);
        }
    };
    let export_svg = {
        let tag = tag.clone();
        move |_| {
            if let Some(svg) = svg.get() {
                let _ = download::save(&format!("scalebook-{}.svg", download::file_stem(&tag)), "image/svg+xml", &svg.outer_html());
            }
        }
    };
    let axis_label = move || settings.get().axis.label();
    let title = tag.clone();
    view! {
        <figure class="line-chart" data-tag=tag.clone()>
            <figcaption>
                <strong>{tag.clone()}</strong>
                <span class="spacer"></span>
                <button type="button" on:click=export_csv>"CSV"</button>
                <button type="button" on:click=export_svg>"SVG"</button>
                <button type="button" aria-label=format!("Remove the chart of {tag}") on:click=move |_| on_remove.run(())>"×"</button>
            </figcaption>
            <svg node_ref=svg xmlns="http://www.w3.org/2000/svg" viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img"
                aria-label=move || format!("{title} against {}", axis_label())
                font-family="sans-serif" font-size="11"
                on:pointermove=move |ev| pointer.set(to_svg_x(ev.client_x()))
                on:pointerleave=move |_| pointer.set(None)>
                <rect x=LEFT y=TOP width=plot_width() height=HEIGHT - TOP - BOTTOM fill="none" stroke="currentColor" stroke-opacity="0.3" />
                {move || drawing.with(|d| axes(d, axis_label()))}
                {move || drawing.get().lines.into_iter().map(|line| view! {
                    <g class="series" data-key=line.key.clone() data-points=line.points>
                        <path d=line.spread stroke=line.colour stroke-opacity="0.35" fill="none" />
                        <path d=line.raw stroke=line.colour stroke-opacity="0.3" fill="none" stroke-width="1" />
                        <path class="smoothed" d=line.smoothed stroke=line.colour fill="none" stroke-width="2"
                            stroke-dasharray=if line.dashed { "6 3" } else { "none" } />
                        <path class="non-finite" d=line.non_finite fill=line.colour>
                            <title>"NaN or infinite values here"</title>
                        </path>
                    </g>
                }).collect_view()}
                {move || pointer.get().filter(|px| (LEFT..=WIDTH - RIGHT).contains(px)).map(|px| view! {
                    <line x1=px x2=px y1=TOP y2=HEIGHT - BOTTOM stroke="currentColor" stroke-opacity="0.5" stroke-dasharray="2 2" />
                })}
            </svg>
            <ReadOut drawing pointer settings />
        </figure>
    }
}

/// Tick marks, labels and the axis title.
fn axes(drawing: &Drawing, axis_label: &str) -> impl IntoView + use<> {
    let bottom = HEIGHT - BOTTOM;
    let x_ticks = drawing
        .x_ticks
        .iter()
        .map(|(px, label)| {
            view! {
                <line x1=*px x2=*px y1=bottom y2=bottom + 4.0 stroke="currentColor" />
                <text x=*px y=bottom + 15.0 text-anchor="middle" fill="currentColor">{label.clone()}</text>
            }
        })
        .collect_view();
    let y_ticks = drawing
        .y_ticks
        .iter()
        .map(|(py, label)| {
            view! {
                <line x1=LEFT - 4.0 x2=LEFT y1=*py y2=*py stroke="currentColor" />
                <line x1=LEFT x2=WIDTH - RIGHT y1=*py y2=*py stroke="currentColor" stroke-opacity="0.08" />
                <text x=LEFT - 6.0 y=*py + 4.0 text-anchor="end" fill="currentColor">{label.clone()}</text>
            }
        })
        .collect_view();
    let empty = drawing.lines.is_empty().then(|| {
        view! { <text x=WIDTH / 2.0 y=HEIGHT / 2.0 text-anchor="middle" fill="currentColor" opacity="0.7">"no points for this tag yet"</text> }
    });
    view! {
        <g class="axes">{x_ticks}{y_ticks}
            <text x=LEFT + plot_width() / 2.0 y=HEIGHT - 4.0 text-anchor="middle" fill="currentColor">{axis_label.to_owned()}</text>
            {empty}
        </g>
    }
}

/// The values under the pointer, one line per curve.
#[component]
fn ReadOut(drawing: Memo<Drawing>, pointer: RwSignal<Option<f64>>, settings: Memo<Settings>) -> impl IntoView {
    move || {
        let px = pointer.get()?;
        let settings = settings.get();
        let rows = drawing.with(|d| {
            d.nearest(px)
                .into_iter()
                .map(|(line, s)| {
                    let at = match settings.axis {
                        XAxis::Step => format!("step {}", s.step),
                        XAxis::Relative => format!("step {}, {}", s.step, format_duration(s.x)),
                        XAxis::Wall => format!("step {}, {}", s.step, format_clock(s.x, settings.utc_offset_minutes)),
                    };
                    let spread = (s.max > s.min).then(|| format!(" (range {} – {})", format_number(s.min), format_number(s.max)));
                    view! {
                        <li>
                            <span class="swatch" style=format!("background: {}", line.colour)></span>
                            {format!("{}: {at}: smoothed {}, value {}", line.label, format_number(s.smoothed), format_number(s.value))}
                            {spread}
                        </li>
                    }
                })
                .collect_view()
        });
        Some(view! { <ul class="read-out" aria-live="polite">{rows}</ul> })
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::library::Library;
    use crate::runs::Runs;
    use crate::testing::{Mounted, mount, settle};

    const BASELINE: &[u8] = include_bytes!("../../shipped/baseline-base-1gpu.tfevents");
    const BASELINE_NAME: &str = "events.out.tfevents.1698839594.baseline.0";

    fn charts(tags: &[&str]) -> Mounted {
        let spec = ChartSpec {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            baseline: false,
            axis: XAxis::Step,
            log: false,
            smoothing: 0.0,
        };
        mount(move || {
            provide_context(Library {
                configs: LocalResource::new(std::future::pending),
                clusters: LocalResource::new(std::future::pending),
                baseline: LocalResource::new(std::future::pending),
            });
            provide_context(Runs::unconnected());
            view! { <ChartsBlock spec /> }
        })
    }

    /// Drops files on the block as a user dragging them from a file manager does.
    fn drop_files(block: &Mounted, files: &[(&str, &[u8])]) {
        let transfer = web_sys::DataTransfer::new().unwrap();
        for (name, bytes) in files {
            let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(*bytes));
            let file = web_sys::File::new_with_u8_array_sequence(&parts, name).unwrap();
            transfer.items().add_with_file(&file).unwrap();
        }
        let init = web_sys::DragEventInit::new();
        init.set_bubbles(true);
        init.set_cancelable(true);
        init.set_data_transfer(Some(&transfer));
        let event = web_sys::DragEvent::new_with_event_init_dict("drop", &init).unwrap();
        block.find("section.charts").unwrap().dispatch_event(&event).unwrap();
    }

    /// Waits until `ready` holds (a file is read asynchronously), failing after a few seconds.
    async fn until(what: &str, ready: impl Fn() -> bool) {
        for _ in 0..200 {
            if ready() {
                return;
            }
            settle().await;
        }
        panic!("{what} never happened");
    }

    #[wasm_bindgen_test]
    async fn a_dropped_event_file_is_overlaid_and_any_other_file_explained() {
        let block = charts(&["Loss/valid"]);
        settle().await;
        drop_files(&block, &[(BASELINE_NAME, BASELINE), ("notes.txt", b"step,value\n1,0.5\n")]);
        let legend = format!(".legend-item[data-key='file:{BASELINE_NAME}']");
        until("the overlay and the message", || block.find(&legend).is_some() && !block.text(".error").is_empty()).await;
        assert_eq!(block.text(&legend).trim(), BASELINE_NAME);
        let curve = format!("figure[data-tag='Loss/valid'] g.series[data-key='file:{BASELINE_NAME}']");
        assert_eq!(block.attr(&curve, "data-points").as_deref(), Some("11"));
        let error = block.text(".error");
        assert!(error.contains("notes.txt: byte 0:") && error.contains("not a TensorBoard event file"), "{error}");

        // A block showing none of the file's tags gets charts for them.
        let other = charts(&["Step/Loss/train"]);
        settle().await;
        drop_files(&other, &[(BASELINE_NAME, BASELINE)]);
        until("charts of the file's tags", || other.find("figure[data-tag='Loss/train']").is_some()).await;
        assert!(other.find(".error").is_none());
    }
}
