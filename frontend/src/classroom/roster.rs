//! The roster on the instructor's page: every follower server of the class, with the runs its
//! learner shares, in one table sorted by whichever header was clicked (see [`roster_model`]).
//! Ticking a run's "chart" charts it beside the instructor's runs: the server copies it from
//! the learner's server as it trains.

use leptos::prelude::*;
use scalebook_shared::protocol::ClientMessage;

use super::roster_model::{self, Column, Row, Sort};
use crate::clock::local_clock;
use crate::runs::Runs;

#[component]
pub fn Roster(runs: Runs) -> impl IntoView {
    let sort = RwSignal::new(Sort::default());
    let rows = Memo::new(move |_| runs.roster.with(|followers| roster_model::rows(followers, sort.get())));
    let header = move |column: Column| {
        view! {
            <th aria-sort=move || sort.get().aria(column)>
                <button type="button" class="sort" data-column=column.title() on:click=move |_| sort.update(|s| *s = s.clicked(column))>
                    {column.title()}
                    <span class="arrow" aria-hidden="true">{move || match sort.get().aria(column) {
                        "ascending" => " ▲",
                        "descending" => " ▼",
                        _ => "",
                    }}</span>
                </button>
            </th>
        }
    };
    view! {
        <p class="roster-counts" role="status">
            {move || runs.roster.with(|followers| roster_model::counts(followers))}
            {move || roster_model::withheld_words(runs.roster_withheld.get())}
        </p>
        <Show when=move || runs.roster.with(|followers| !followers.is_empty())>
            <div class="roster-scroll">
                <table class="roster">
                    <thead><tr>{Column::ALL.map(header)}<th></th><th></th></tr></thead>
                    <tbody>{move || rows.get().into_iter().map(|row| view! { <RosterRow row runs /> }).collect_view()}</tbody>
                </table>
            </div>
        </Show>
    }
}

#[component]
fn RosterRow(row: Row, runs: Runs) -> impl IntoView {
    let (follower, name) = (row.follower, row.name.clone());
    // Nobody breaks away from a presentation that has not started.
    let standing = {
        let row = row.clone();
        Memo::new(move |_| row.standing(runs.presentation.with(Option::is_some)))
    };
    let run = row.run.clone();
    let chart = row.copy().zip(run.as_ref().map(|r| r.id.clone())).map(|(copy, upstream)| {
        let charted = {
            let copy = copy.clone();
            move || runs.charted.with(|c| c.contains(&copy))
        };
        let toggle = move |on: bool| {
            if on {
                // Sent before the chart subscribes, so the copy exists when it does.
                runs.send(&ClientMessage::ChartSharedRun { follower, run: upstream.clone() });
            }
            runs.set_charted(&copy, on);
        };
        view! {
            <label title="Chart this run beside yours">
                <input type="checkbox" class="chart-shared" prop:checked=charted on:change=move |ev| toggle(event_target_checked(&ev)) />
                " chart"
            </label>
        }
    });
    view! {
        <tr data-follower=row.follower data-run=run.as_ref().map(|r| r.id.to_string())>
            <td class="name" data-identity=row.identity.key()>
                {row.name.clone()}
                {row.identity_words().map(|who| view! { " " <span class="identity muted">{format!("({who})")}</span> })}
            </td>
            <td class="following" data-standing=move || standing.get().label()>{move || standing.get().label()}</td>
            <td class="since">{local_clock(row.since)}</td>
            <td class="mono">{run.as_ref().map(|r| r.config.clone())}</td>
            <td class="mono">{run.as_ref().map(|r| r.layout_text())}</td>
            <td>{run.as_ref().map(|r| r.state.label())}</td>
            <td class="number">{row.loss()}</td>
            <td class="number">{row.speed()}</td>
            <td class="chart">{chart}</td>
            <td>{row.first.then(|| view! {
                <button type="button" class="remove" title=format!("Disconnect {name} ({}); they cannot join again, under any name, until the next class link", row.identity)
                    on:click=move |_| { runs.send(&ClientMessage::RemoveFollower { follower }); }>
                    "Remove"
                </button>
            })}</td>
        </tr>
    }
}
