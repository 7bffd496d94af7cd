//! The colour scale beside a map: the palette as a gradient between the lowest and the highest
//! value drawn, with the units. The stops come from the shared palette, so the legend has the
//! very colours the server and the trainer paint with.

use leptos::prelude::*;
use scalebook_shared::charts::format_number;
use scalebook_shared::weather::Palette;

/// Colours in the gradient: twice the palette's anchors, so the browser's blend between them
/// stays on the palette's curve.
const STOPS: usize = 9;

#[component]
pub fn ColourLegend(palette: Palette, range: [f32; 2], units: String, label: String) -> impl IntoView {
    let gradient = format!("background: linear-gradient(to right, {})", palette.css_stops(STOPS).join(", "));
    let [low, high] = range.map(|v| format_number(f64::from(v)));
    let described = format!("{label}: colours from {low} to {high} {units}");
    view! {
        <div class="colour-legend" data-palette=palette.name()>
            <span class="legend-label">{label}</span>
            <span class="legend-min">{low}</span>
            <span class="legend-bar" style=gradient role="img" aria-label=described></span>
            <span class="legend-max">{high}</span>
            <span class="legend-units">{units}</span>
        </div>
    }
}
