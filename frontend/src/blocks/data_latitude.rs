//! The latitude weights of a grid's rows as a small plot standing beside the map, row for row:
//! latitude down the side (north at the top, like the map), the weight across, and the line of
//! weight 1 (an average row). It shows at a glance why polar rows count for little in the
//! latitude-weighted metric.

use leptos::prelude::*;
use scalebook_page::blocks::latitude_plot::{HEIGHT, LEFT, RIGHT, WIDTH, area_points, latitude_y};

/// The latitudes labelled on the side.
const TICKS: [(f64, &str); 5] = [(90.0, "90°N"), (45.0, "45°N"), (0.0, "0°"), (-45.0, "45°S"), (-90.0, "90°S")];

#[component]
pub fn LatitudeWeights(weights: Vec<f32>) -> impl IntoView {
    let rows = weights.len();
    let top = weights.iter().copied().fold(1.0f32, f32::max);
    let x = move |w: f64| LEFT + w / f64::from(top) * (WIDTH - LEFT - RIGHT);
    let equator = weights.get(rows / 2).copied().unwrap_or(0.0);
    let summary = format!("Latitude weights of {rows} rows: {equator:.2} at the equator, about 0 at the poles; 1 is an average row");
    let label = summary.clone();
    view! {
        <svg class="latitude-weights" viewBox=format!("0 0 {WIDTH} {HEIGHT}") data-rows=rows role="img" aria-label=label>
            <title>{summary}</title>
            <polygon class="weights" points=area_points(&weights, x) />
            <line class="average" x1=x(1.0) x2=x(1.0) y1="0" y2=HEIGHT />
            <text class="tick" x=x(1.0) y=HEIGHT - 4.0 text-anchor="middle">"1"</text>
            {TICKS.map(|(lat, label)| {
                let y = latitude_y(lat, rows).clamp(8.0, HEIGHT - 3.0);
                view! { <text class="tick" x=LEFT - 4.0 y=y + 3.0 text-anchor="end">{label}</text> }
            })}
            <text class="axis" x=LEFT + 2.0 y="10">"weight"</text>
        </svg>
    }
}
