//! The axes of the sweep block's pictures (the loss curves, the agreement's differences, the
//! scaling board), drawn the same way in each, and what a picture says before anything is in it.

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

/// The words across a picture with nothing in it yet: what it will show once the sweep runs.
pub fn waiting(shown: bool, text: &'static str) -> impl IntoView + use<> {
    shown.then(|| view! { <text class="waiting" x=WIDTH / 2.0 y=CURVES_HEIGHT / 2.0 text-anchor="middle">{text}</text> })
}
