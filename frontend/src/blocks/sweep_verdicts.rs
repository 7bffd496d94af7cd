//! The agreement sweep's verdicts: for every variant, how far its validation loss is from the
//! first variant's at each epoch, drawn on a log scale under the band, and in words whether
//! they agree and what may part them (`scalebook_page`'s `sweep_agreement` decides).

use leptos::prelude::*;
use scalebook_shared::config::TrainConfig;
use scalebook_shared::metrics::tags;

use super::sweep_agreement::{BAND, Setup, Verdict, difference_picture, differences, reasons, verdict};
use super::sweep_axes::{waiting, y_ticks};
use super::sweep_model::{CURVES_HEIGHT, CURVES_MARGIN, LossAxis, WIDTH, loss_curve};
use super::sweep_state::SweepState;
use crate::library::Ready;
use scalebook_page::blocks::run_model::effective;

#[component]
pub fn Agreement(state: SweepState) -> impl IntoView {
    let SweepState { runs, library, chosen, ids, variants, .. } = state;
    let judged = Memo::new(move |_| {
        let curves: Vec<Option<Vec<(f64, f64)>>> = ids
            .get()
            .iter()
            .map(|id| id.as_ref().and_then(|id| runs.stream(id)?.series.with(|s| loss_curve(s, tags::LOSS_VALID, LossAxis::Step))))
            .collect();
        let file = library.configs.ready();
        let configs: Vec<Option<TrainConfig>> =
            variants.with_value(|variants| variants.iter().map(|v| effective(file.as_deref()?, &chosen.get(), &v.overrides)).collect());
        let (labels, dps) =
            variants.with_value(|v| (v.iter().map(|v| v.label.clone()).collect::<Vec<_>>(), v.iter().map(|v| v.dp).collect::<Vec<_>>()));
        let reference = curves.first().cloned().flatten();
        let per_variant: Vec<Option<Vec<(f64, f64)>>> = curves
            .iter()
            .enumerate()
            .map(|(i, c)| if i == 0 { None } else { Some(differences(reference.as_deref()?, c.as_deref()?)) })
            .collect();
        let verdicts: Vec<Verdict> = per_variant
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, d)| {
                let why = match (&configs[0], &configs[i]) {
                    (Some(a), Some(b)) => reasons(&Setup { config: a, dp: dps[0] }, &Setup { config: b, dp: dps[i] }),
                    _ => Vec::new(),
                };
                verdict(&labels[0], d.as_deref().unwrap_or_default(), &why)
            })
            .collect();
        let x_max = curves.iter().flatten().flatten().map(|p| p.0).fold(0.0, f64::max);
        (labels, verdicts, difference_picture(&per_variant, x_max))
    });
    view! {
        <figure class="sweep-chart agreement">
            <svg viewBox=format!("0 0 {WIDTH} {CURVES_HEIGHT}") role="img" aria-label="relative difference from the first variant's validation loss, log scale">
                {move || judged.with(|(_, _, p)| y_ticks(&p.y_ticks))}
                {move || judged.with(|(_, _, p)| view! {
                    <line class="band" x1=CURVES_MARGIN x2=WIDTH - CURVES_MARGIN / 2.0 y1=p.band_y y2=p.band_y />
                    <text class="band-label" x=WIDTH - CURVES_MARGIN / 2.0 y=p.band_y - 4.0 text-anchor="end">{format!("band {BAND:.0e}")}</text>
                })}
                {move || judged.with(|(_, _, p)| p.paths.iter().enumerate().map(|(i, d)| d.clone().map(|d| view! {
                    <path class=format!("curve series-{}", i % 8) data-variant=i d=d fill="none" />
                })).collect_view())}
                {move || waiting(
                    judged.with(|(_, _, p)| p.paths.iter().all(Option::is_none)),
                    "Run all: how far each variant's loss is from the first's, epoch by epoch, against the band.",
                )}
            </svg>
            <figcaption class="muted">"How far each variant's validation loss is from the first's at each epoch (relative, log scale): under the band, they learn the same."</figcaption>
        </figure>
        <ul class="verdicts">
            {move || judged.with(|(labels, verdicts, _)| verdicts.iter().enumerate().map(|(i, v)| {
                let agrees = v.agrees.map(|a| a.to_string()).unwrap_or_default();
                let worst = v.worst.map(|w| w.0.to_string()).unwrap_or_default();
                view! {
                    <li class=format!("verdict series-{}", (i + 1) % 8) data-variant=i + 1 data-agrees=agrees data-worst=worst>
                        <strong>{labels[i + 1].clone()}</strong>": "{v.text.clone()}
                    </li>
                }
            }).collect_view())}
        </ul>
    }
}
