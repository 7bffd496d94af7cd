//! A run's prediction beside what it measured, under the run it belongs to: the estimate the
//! server recorded at launch (`prediction.json`), and the run's own points as they come, with
//! their ratio and a plain word where they part by more than the estimate's stated error.
//! What the rows hold is `scalebook_page::prediction`'s.

use leptos::prelude::*;
use scalebook_page::prediction::{Row, STATED_ERROR, busy_machine, figure, rows};
use scalebook_shared::estimate::Prediction;
use scalebook_shared::protocol::{RunId, Series};
use scalebook_shared::rundir;

use super::data_fetch::fetch_json;
use crate::net::{fetch, urls};

/// Run `id`'s prediction, fetched once into a signal: `None` until it is here, and for a run
/// that has none (from before predictions, or one the server could not predict). A signal, not
/// a resource, so the run's block never goes back to "Loading" for it (see `data_fetch`).
pub fn load(id: &RunId) -> RwSignal<Option<Prediction>> {
    let loaded = RwSignal::new(None);
    fetch_json(url(id), move |answer: Result<Prediction, String>| {
        loaded.try_set(answer.ok());
    });
    loaded
}

/// Run `id`'s prediction from the server, if it has one.
pub async fn fetch(id: &RunId) -> Option<Prediction> {
    fetch::text(&url(id)).await.ok().and_then(|text| serde_json::from_str::<Prediction>(&text).ok())
}

/// Where run `id`'s prediction is read from.
fn url(id: &RunId) -> String {
    urls::api(&format!("runs/{id}/files/{}", rundir::PREDICTION))
}

#[component]
pub fn RunPrediction(id: RunId, series: ArcRwSignal<Vec<Series>>, loaded: RwSignal<Option<Prediction>>) -> impl IntoView {
    move || {
        let prediction = loaded.get()?;
        let table = series.with(|s| rows(&prediction, s));
        let mut flags: Vec<String> = table.iter().filter_map(|r| Some(format!("{}: {}", r.quantity, r.verdict()?))).collect();
        if table.first().and_then(Row::ratio).is_some_and(|r| r < 1.0 - STATED_ERROR) {
            flags.extend(busy_machine(&prediction));
        }
        Some(view! {
            <table class="prediction" data-run=id.to_string()>
                <caption>{format!("Predicted at launch for {}, beside what the run measured", prediction.basis)}</caption>
                <thead><tr><th>""</th><th>"predicted"</th><th>"measured"</th><th>"measured / predicted"</th></tr></thead>
                <tbody>{table.into_iter().map(row).collect_view()}</tbody>
            </table>
            {(!flags.is_empty()).then(|| view! { <p class="prediction-flag" role="status">{flags.join("; ")}</p> })}
        })
    }
}

fn row(r: Row) -> impl IntoView {
    let measured = r.measured.map_or_else(|| "…".to_owned(), |m| format!("{} {}", figure(m), r.unit));
    let ratio = r.ratio().map_or_else(String::new, |x| format!("{x:.2}"));
    let (off, shown) = (r.verdict().is_some(), ratio.clone());
    view! {
        <tr data-quantity=r.quantity data-predicted=r.predicted.to_string() data-ratio=ratio class:off=off>
            <th scope="row">{r.quantity}</th>
            <td>{format!("{} {}", figure(r.predicted), r.unit)}</td>
            <td>{measured}</td>
            <td>{shown}</td>
        </tr>
    }
}
