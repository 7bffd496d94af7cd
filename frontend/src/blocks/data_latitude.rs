//! The latitude weights of a grid's rows as a small plot standing beside the map, row for row:
//! latitude down the side (north at the top, like the map), the weight across, and the line of
//! weight 1 (an average row). It shows at a glance why polar rows count for little in the
//! latitude-weighted metric.

use leptos::prelude::*;

/// The plot's size in its own units; the page gives it the map's height, so rows line up.
const HEIGHT: f64 = 240.0;
const WIDTH: f64 = 120.0;
/// Room for the latitude labels on the left.
const LEFT: f64 = 36.0;
const RIGHT: f64 = 6.0;
/// The latitudes labelled on the side.
const TICKS: [(f64, &str); 5] = [(90.0, "90°N"), (45.0, "45°N"), (0.0, "0°"), (-45.0, "45°S"), (-90.0, "90°S")];

/// The vertical position of the middle of row `j` of `rows`: rows fill the height evenly, as
/// the map's pixels do.
fn row_y(j: f64, rows: usize) -> f64 {
    (j + 0.5) * HEIGHT / rows.max(1) as f64
}

/// Where latitude `lat` lies in a grid of `rows` rows from +90 to −90 (the rows of
/// `scalebook_shared::weather::latitude`).
fn latitude_y(lat: f64, rows: usize) -> f64 {
    let j = if rows > 1 { (90.0 - lat) * (rows - 1) as f64 / 180.0 } else { 0.0 };
    row_y(j, rows)
}

/// The outline of the weights: from the zero line down every row's weight and back.
fn area_points(weights: &[f32], x: impl Fn(f64) -> f64) -> String {
    let rows = weights.len();
    let mut points = vec![format!("{:.1},{:.1}", x(0.0), row_y(0.0, rows))];
    points.extend(weights.iter().enumerate().map(|(j, w)| format!("{:.1},{:.1}", x(f64::from(*w).max(0.0)), row_y(j as f64, rows))));
    points.push(format!("{:.1},{:.1}", x(0.0), row_y(rows.saturating_sub(1) as f64, rows)));
    points.join(" ")
}

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

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn rows_fill_the_height_and_latitudes_fall_on_their_rows() {
        assert_eq!(row_y(0.0, 4), 30.0);
        assert_eq!(row_y(3.0, 4), 210.0);
        // 5 rows: 90, 45, 0, −45, −90.
        assert_eq!(latitude_y(90.0, 5), row_y(0.0, 5));
        assert_eq!(latitude_y(0.0, 5), row_y(2.0, 5));
        assert_eq!(latitude_y(-90.0, 5), row_y(4.0, 5));
        let points = area_points(&[0.0, 2.0], |w| w * 10.0);
        assert_eq!(points, "0.0,60.0 0.0,60.0 20.0,180.0 0.0,180.0");
    }
}
