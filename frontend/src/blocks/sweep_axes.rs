//! The axes of the sweep block's pictures (the loss curves, the agreement's differences, the
//! scaling board), drawn the same way in each.

use leptos::prelude::*;

use super::sweep_model::{CURVES_HEIGHT, CURVES_MARGIN, WIDTH};

/// The y axis of a sweep's picture: each tick's label and its grid line across the plot.
pub fn y_ticks(ticks: &[(f64, String)]) -> impl IntoView + use<> {
    ticks
        .iter()
        .map(|(y, t)| {
            view! {
                <text class="tick" x=CURVES_MARGIN - 6.0 y=*y text-anchor="end">{t.clone()}</text>
                <line class="grid" x1=CURVES_MARGIN x2=WIDTH - CURVES_MARGIN / 2.0 y1=*y y2=*y />
            }
        })
        .collect_view()
}

/// The x axis of a sweep's picture: each tick's label under the plot.
pub fn x_ticks(ticks: &[(f64, String)]) -> impl IntoView + use<> {
    ticks
        .iter()
        .map(|(x, t)| view! { <text class="tick" x=*x y=CURVES_HEIGHT - 6.0 text-anchor="middle">{t.clone()}</text> })
        .collect_view()
}
