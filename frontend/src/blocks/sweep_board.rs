//! The scaling board of a `scaling` sweep: this machine's efficiency at each size against the
//! ideal line, the sources' published efficiencies as reference points of their own edition,
//! and the table of throughput per rank against the ideal (`scalebook_page`'s `sweep_scaling`
//! decides).

use leptos::prelude::*;

use super::sweep_axes::{x_ticks, y_ticks};
use super::sweep_model::{CURVES_HEIGHT, CURVES_MARGIN, WIDTH, ranks};
use super::sweep_scaling::{board, rows};
use super::sweep_state::SweepState;
use crate::library::Ready;

#[component]
pub fn ScalingBoard(state: SweepState) -> impl IntoView {
    let SweepState { library, chosen, variants, values, predictions, .. } = state;
    let sizes = Memo::new(move |_| {
        let file = library.configs.ready();
        variants.with_value(|v| v.iter().map(|v| ranks(file.as_deref(), &chosen.get(), v)).collect::<Vec<u32>>())
    });
    let table = Memo::new(move |_| rows(&sizes.get().into_iter().zip(values.get()).collect::<Vec<_>>()));
    let predicted = Memo::new(move |_| {
        let predictions = predictions.get().unwrap_or_default();
        let throughputs =
            (0..sizes.with(Vec::len)).map(|i| predictions.get(i).and_then(|p| p.as_ref().map(|p| p.estimate.samples_per_sec)));
        rows(&sizes.get().into_iter().zip(throughputs).collect::<Vec<_>>())
    });
    let drawn = Memo::new(move |_| table.with(|rows| predicted.with(|predicted| board(rows, predicted))));
    let labels = variants.with_value(|v| v.iter().map(|v| v.label.clone()).collect::<Vec<_>>());
    view! {
        <figure class="sweep-chart scaling-board">
            <svg viewBox=format!("0 0 {WIDTH} {CURVES_HEIGHT}") role="img" aria-label="scaling efficiency by ranks: this machine and the sources">
                {move || drawn.with(|b| y_ticks(&b.y_ticks))}
                {move || drawn.with(|b| x_ticks(&b.x_ticks))}
                {move || drawn.with(|b| view! {
                    <line class="ideal" x1=CURVES_MARGIN x2=WIDTH - CURVES_MARGIN / 2.0 y1=b.ideal_y y2=b.ideal_y />
                    <text class="ideal-label" x=CURVES_MARGIN + 4.0 y=b.ideal_y - 4.0>"ideal"</text>
                })}
                {move || drawn.with(|b| b.references.iter().enumerate().map(|(i, r)| view! {
                    <g class="reference" data-reference=i>
                        <circle cx=r.x cy=r.y r="6" />
                        <text x=r.x - 10.0 y=r.y + 4.0 text-anchor="end">{r.label.clone()}</text>
                    </g>
                }).collect_view())}
                {move || drawn.with(|b| b.predicted.iter().enumerate().map(|(i, m)| m.clone().map(|m| view! {
                    <rect class=format!("predicted series-{}", i % 8) data-variant=i x=m.x - 5.0 y=m.y - 5.0 width="10" height="10" />
                })).collect_view())}
                {move || drawn.with(|b| b.here.iter().enumerate().map(|(i, m)| m.clone().map(|m| view! {
                    <g class=format!("here series-{}", i % 8) data-variant=i>
                        <circle cx=m.x cy=m.y r="5" />
                        <text x=m.x + 8.0 y=m.y - 8.0>{m.label}</text>
                    </g>
                })).collect_view())}
            </svg>
            <figcaption class="muted">"Efficiency by ranks (log scale): throughput per rank over the first variant's. Filled dots: this machine, as each run finishes; open squares: what each run was predicted at launch; open circles: the sources' own runs, on their GPUs."</figcaption>
        </figure>
        <table class="scaling-table">
            <thead><tr><th>""</th><th>"ranks"</th><th>"samples/s"</th><th>"per rank"</th><th>"ideal per rank"</th><th>"efficiency"</th><th>"predicted"</th></tr></thead>
            <tbody>
                {move || table.with(|rows| predicted.with(|predicted| rows.iter().zip(&labels).enumerate().map(|(i, (row, label))| {
                    let foreseen = predicted.get(i).cloned().flatten().map_or_else(String::new, |p| format!("{:.0} %", p.efficiency * 100.0));
                    let cells = row.as_ref().map_or_else(
                        || ["…".to_owned(), "…".to_owned(), "…".to_owned(), "not run yet".to_owned()],
                        |r| [format!("{:.1}", r.samples_per_s), format!("{:.1}", r.per_rank), format!("{:.1}", r.ideal_per_rank), format!("{:.0} %", r.efficiency * 100.0)],
                    );
                    let efficiency = row.as_ref().map(|r| r.efficiency.to_string()).unwrap_or_default();
                    // Known from the config before anything runs.
                    let ranks = sizes.with(|s| s.get(i).map(ToString::to_string)).unwrap_or_default();
                    view! {
                        <tr data-variant=i data-efficiency=efficiency>
                            <th scope="row">{label.clone()}</th>
                            <td>{ranks}</td>
                            {cells.into_iter().map(|c| view! { <td>{c}</td> }).collect_view()}
                            <td class="predicted">{foreseen}</td>
                        </tr>
                    }
                }).collect_view()))}
            </tbody>
        </table>
    }
}
