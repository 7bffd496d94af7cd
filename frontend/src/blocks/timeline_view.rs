//! A timeline drawn in SVG: a heading per rank, its ranges on top in the legend's colours,
//! then one lane per thread with its ops nested in rows. The wheel zooms around the pointer,
//! a drag pans, the buttons do both, a double click zooms to the bar under the pointer, and
//! the line under the picture names what the pointer is over. Whatever the zoom, `shared`
//! merges what a pixel cannot show, so a redraw stays a few thousand shapes at most.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::trace::{LaneKind, Timeline};

use super::timeline_drawing::{AXIS_HEIGHT, BAR_HEIGHT, LABEL_WIDTH, LEGEND, LanePicture, WIDTH, fit, plot_width, ticks};
use super::timeline_state::{Shown, TimelineState};

/// How much one button press zooms or pans.
const ZOOM_STEP: f64 = 2.0;
const PAN_STEP: f64 = 0.25;
/// Lane labels sit under their rank's heading, a little indented.
const LABEL_INDENT: f64 = 14.0;

#[component]
pub fn TimelineView(timeline: Arc<Timeline>, shown: Shown) -> impl IntoView {
    let state = TimelineState::new(timeline, shown);
    let TimelineState { bounds, height, window, hover, drag, lanes, svg, .. } = state;
    let zoom = move |factor: f64, anchor: f64| state.zoom(factor, anchor);
    let pan = move |fraction: f64| state.pan(fraction);
    let headings = state.layout.with_value(|layout| {
        layout
            .headings
            .iter()
            .map(|(rank, y)| view! { <text class="rank-heading" x="4" y=*y>{format!("rank {rank}")}</text> })
            .collect_view()
    });

    view! {
        <div class="toolbar timeline-controls">
            <button type="button" class="zoom-in" aria-label="Zoom in" on:click=move |_| zoom(1.0 / ZOOM_STEP, 0.5)>"+"</button>
            <button type="button" class="zoom-out" aria-label="Zoom out" on:click=move |_| zoom(ZOOM_STEP, 0.5)>"−"</button>
            <button type="button" class="pan-left" aria-label="Earlier" on:click=move |_| pan(-PAN_STEP)>"←"</button>
            <button type="button" class="pan-right" aria-label="Later" on:click=move |_| pan(PAN_STEP)>"→"</button>
            <button type="button" class="whole" on:click=move |_| window.set(bounds)>"whole trace"</button>
            <span class="muted shown">{move || state.shown()}</span>
        </div>
        <ul class="legend timeline-legend">
            {LEGEND.iter().map(|(class, name)| view! {
                <li><svg width="12" height="12" aria-hidden="true"><rect class=*class width="12" height="12" /></svg>" "<code>{*name}</code></li>
            }).collect_view()}
        </ul>
        <svg node_ref=svg class="timeline-svg" xmlns="http://www.w3.org/2000/svg" viewBox=format!("0 0 {WIDTH} {height}") role="img"
            aria-label="Step timeline: one lane per rank and thread, ranges on top"
            font-family="sans-serif" font-size="10"
            on:pointermove=move |ev| state.on_move(ev)
            on:pointerdown=move |ev| state.on_down(ev)
            on:pointerup=move |_| drag.set_value(None)
            on:pointercancel=move |_| drag.set_value(None)
            on:pointerleave=move |_| hover.set(None)
            on:wheel=move |ev| state.on_wheel(ev)
            on:dblclick=move |ev| state.on_double_click(ev)>
            {move || ticks(window.get()).into_iter().map(|(x, label)| view! {
                <line class="tick" x1=x x2=x y1=AXIS_HEIGHT - 4.0 y2=height />
                <text class="tick" x=x y=AXIS_HEIGHT - 8.0 text-anchor="middle">{label}</text>
            }).collect_view()}
            {headings}
            {move || lanes.get().into_iter().map(lane_view).collect_view()}
        </svg>
        <p class="timeline-hover" aria-live="polite">
            {move || hover.get().unwrap_or_else(|| "Point at a bar to see the op, its duration and its lane; wheel or buttons to zoom, drag to pan, double-click a bar to zoom to it.".into())}
        </p>
    }
}

/// One lane: its label, its ranges as rectangles, its ops as paths, names on the wide bars.
fn lane_view(lane: LanePicture) -> impl IntoView {
    let kind = match lane.lane.kind {
        LaneKind::Ranges => "ranges",
        LaneKind::Thread => "thread",
    };
    let label_y = lane.lane.top + 10.0;
    let full_label = lane.lane.label.clone();
    let short_label = fit(&full_label, LABEL_WIDTH - LABEL_INDENT);
    let data_label = full_label.clone();
    view! {
        <g class="lane" data-rank=lane.lane.rank data-kind=kind data-label=data_label data-bars=lane.bars>
            <rect class="lane-band" x=LABEL_WIDTH y=lane.lane.top width=plot_width() height=lane.lane.height() />
            <text class="lane-label" x=LABEL_INDENT y=label_y><title>{full_label}</title>{short_label}</text>
            {lane.ranges.into_iter().map(|r| view! {
                <rect class=format!("range {}", r.class) data-name=r.name x=r.x y=r.y width=r.width height=BAR_HEIGHT />
            }).collect_view()}
            {lane.paths.into_iter().map(|(class, d)| view! { <path class=format!("ops {class}") d=d /> }).collect_view()}
            {lane.labels.into_iter().map(|l| view! { <text class="bar-label" x=l.x y=l.y>{l.text}</text> }).collect_view()}
        </g>
    }
}
