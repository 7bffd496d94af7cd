//! Where a run's ranks ran, once every rank has said, drawn under where its layout places
//! them: one box per node, a square per rank coloured by its tensor- (or context-, or data-)
//! parallel group, and a red edge on every rank that ran on another node than predicted. Read
//! again when the run's state changes (its ranks record themselves as they start), into a
//! signal: a resource read again under the block's `Suspense` would send the whole block back
//! to "Loading" as the run ends, its log scrolled back to its first lines (see `data_fetch`).

use leptos::prelude::*;
use scalebook_page::blocks::grid_geometry::PALETTE;
use scalebook_page::placement::{Cell, Picture, seen};
use scalebook_shared::protocol::{RunId, RunRecord};
use scalebook_shared::rundir::RankPlacement;

use super::data_fetch::fetch_json;
use crate::net::urls;

/// A rank's square and the gap around it, in SVG units.
const CELL: f64 = 26.0;
const GAP: f64 = 4.0;
/// Room for a row's label on the left, and for a node's name above its box.
const LABEL: f64 = 150.0;
const NAME: f64 = 14.0;
/// Ranks drawn per run; larger runs are described in words only.
const MAX_DRAWN: usize = 256;

#[component]
pub fn RunPlacement(id: RunId, record: Memo<Option<RunRecord>>) -> impl IntoView {
    let loaded = RwSignal::new(None::<Vec<RankPlacement>>);
    let url = urls::api(&format!("runs/{id}/placement"));
    Effect::new(move |_| {
        record.with(|r| r.as_ref().map(RunRecord::state));
        fetch_json(url.clone(), move |answer: Result<Vec<RankPlacement>, String>| {
            loaded.try_set(answer.ok());
        });
    });
    move || {
        let places = loaded.get()?;
        let layout = record.with(|r| r.as_ref().map(|r| r.layout.clone()))?;
        let seen = seen(&places, &layout).filter(|_| layout.world() > 1)?;
        let picture = (places.len() <= MAX_DRAWN).then(|| seen.picture(&layout));
        Some(view! {
            <div class="run-placement" data-nodes=seen.nodes.len() data-as-predicted=seen.as_predicted.to_string()>
                <p><strong>"Where the ranks ran: "</strong>{seen.summary()}</p>
                {picture.map(|p| view! { <PlacementPicture picture=p /> })}
            </div>
        })
    }
}

#[component]
fn PlacementPicture(picture: Picture) -> impl IntoView {
    let widest = picture.actual.iter().chain(&picture.predicted).map(|(_, cells)| cells.len()).max().unwrap_or(1) as f64;
    let node_width = widest * (CELL + GAP) + GAP;
    let nodes = picture.actual.len().max(picture.predicted.len()) as f64;
    let row_height = NAME + CELL + 2.0 * GAP;
    let width = LABEL + nodes * (node_width + 2.0 * GAP);
    let moved = picture.actual.iter().flat_map(|(_, cells)| cells).filter(|c| c.moved).count();
    let colour_by = picture.colour_by.map(|t| t.to_string()).unwrap_or_else(|| "no".to_owned());
    let description = format!(
        "The layout's placement above, where the ranks ran below; squares coloured by {colour_by} group; {moved} ranks ran on another node than predicted."
    );
    let row = |label: &'static str, class: &'static str, y: f64, row: &[(String, Vec<Cell>)]| {
        let boxes = row
            .iter()
            .enumerate()
            .map(|(i, (name, cells))| {
                let x0 = LABEL + i as f64 * (node_width + 2.0 * GAP);
                let squares = cells
                    .iter()
                    .enumerate()
                    .map(|(j, cell)| {
                        let x = x0 + GAP + j as f64 * (CELL + GAP);
                        let (stroke, stroke_width) = if cell.moved { ("#C00000", "3") } else { ("none", "0") };
                        view! {
                            <rect x=x y=y + NAME + GAP width=CELL height=CELL fill=PALETTE[cell.colour % PALETTE.len()]
                                stroke=stroke stroke-width=stroke_width data-rank=cell.rank data-moved=cell.moved.to_string() />
                            <text x=x + CELL / 2.0 y=y + NAME + GAP + CELL / 2.0 + 4.0 text-anchor="middle" font-size="11" fill="#000">{cell.rank}</text>
                        }
                    })
                    .collect_view();
                view! {
                    <text x=x0 y=y + NAME - 3.0 font-size="11" fill="currentColor">{name.clone()}</text>
                    <rect x=x0 y=y + NAME width=node_width height=CELL + 2.0 * GAP rx="4" fill="none" stroke="currentColor" stroke-opacity="0.45" />
                    {squares}
                }
            })
            .collect_view();
        view! {
            <g class=class>
                <text x="0" y=y + NAME + GAP + CELL / 2.0 + 4.0 font-size="12" fill="currentColor">{label}</text>
                {boxes}
            </g>
        }
    };
    view! {
        <figure class="placement-picture">
            <svg xmlns="http://www.w3.org/2000/svg" viewBox=format!("0 0 {width:.0} {:.0}", 2.0 * row_height + GAP)
                width=format!("{width:.0}") role="img" aria-label=description.clone()>
                {row("the layout places", "predicted", 0.0, &picture.predicted)}
                {row("where they ran", "actual", row_height + GAP, &picture.actual)}
            </svg>
            <figcaption class="muted">{description}</figcaption>
        </figure>
    }
}
