//! A run's profile in numbers, as the server summarised it (no trace downloaded): each rank's
//! mean step as a bar cut into the trainer's ranges, how much of its communication overlapped
//! computation, the ops that took longest, and the straggler table (at each collective call,
//! the rank every other rank waited for).

use leptos::prelude::*;
use scalebook_page::blocks::profile_summary::{last_arrivals, longest_waits, step_bars};
use scalebook_shared::profile::trace::{ProfileSummary, format_micros};

/// Rows of the longest waits shown.
const WAITS_SHOWN: usize = 8;
/// The bars' width in SVG units.
const BAR_WIDTH: f64 = 400.0;

#[component]
pub fn SummaryView(summary: ProfileSummary) -> impl IntoView {
    let bars = step_bars(&summary)
        .into_iter()
        .map(|bar| {
            let rank = summary.ranks.iter().find(|r| r.rank == bar.rank);
            let overlap = rank.map(|r| overlap_words(r.communication_us, r.overlapped_us)).unwrap_or_default();
            let segments = bar
                .segments
                .iter()
                .map(|s| {
                    let title = format!("{}: {} ({:.0} %)", s.name, format_micros(s.us), 100.0 * s.width);
                    view! {
                        <rect class=format!("range {}", s.class) x={s.from * BAR_WIDTH} y="0" width={s.width * BAR_WIDTH} height="14">
                            <title>{title}</title>
                        </rect>
                    }
                })
                .collect_view();
            let parts = bar.segments.iter().map(|s| format!("{} {}", s.name, format_micros(s.us))).collect::<Vec<_>>().join(", ");
            view! {
                <tr data-rank=bar.rank>
                    <th scope="row">{format!("rank {}", bar.rank)}</th>
                    <td class="number">{format_micros(bar.mean_us)}</td>
                    <td>
                        <svg class="step-bar" viewBox=format!("0 0 {BAR_WIDTH} 14") role="img" aria-label=parts>{segments}</svg>
                    </td>
                    <td>{overlap}</td>
                </tr>
            }
        })
        .collect_view();
    let steps = summary.ranks.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    let ops = summary
        .ranks
        .iter()
        .map(|rank| {
            let rows = rank
                .top_ops
                .iter()
                .map(|op| {
                    view! {
                        <tr>
                            <td><code>{op.name.clone()}</code></td>
                            <td class="number">{op.count}</td>
                            <td class="number">{format_micros(op.total_us)}</td>
                        </tr>
                    }
                })
                .collect_view();
            view! {
                <details class="summary-ops">
                    <summary>{format!("rank {}: the ops that took longest ({} events)", rank.rank, rank.events)}</summary>
                    <table class="top-ops">
                        <thead><tr><th scope="col">"op"</th><th scope="col" class="number">"calls"</th><th scope="col" class="number">"total"</th></tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                </details>
            }
        })
        .collect_view();
    let bubbles = (!summary.bubbles.is_empty()).then(|| {
        view! {
            <div class="pipeline-bubble">
                <p>"The pipeline's bubble, measured from each rank's passes (the forward and backward ranges of every micro-batch):"</p>
                <ul>{summary.bubbles.iter().map(|b| view! { <li>{b.to_string()}</li> }).collect_view()}</ul>
            </div>
        }
    });
    let unread = (!summary.unread.is_empty())
        .then(|| view! { <p class="error" role="alert">{format!("Some traces could not be read: {}", summary.unread.join("; "))}</p> });
    view! {
        <div class="profile-summary">
            <table class="step-split">
                <caption>{format!("Where a step's time went: each rank's mean over its {steps} profiled step(s), cut by the trainer's ranges (hover for each)")}</caption>
                <thead>
                    <tr>
                        <th scope="col">"rank"</th>
                        <th scope="col" class="number">"step"</th>
                        <th scope="col">"data wait, forward, backward, all-reduce, optimizer, other"</th>
                        <th scope="col">"communication overlapped by computation"</th>
                    </tr>
                </thead>
                <tbody>{bars}</tbody>
            </table>
            {bubbles}
            {stragglers(&summary)}
            {ops}
            {unread}
        </div>
    }
}

/// "3.1 ms of 4.0 ms (78 %)", or that there was none.
fn overlap_words(communication_us: f64, overlapped_us: f64) -> String {
    if communication_us <= 0.0 {
        return "no communication".into();
    }
    let share = 100.0 * overlapped_us / communication_us;
    format!("{} of {} ({share:.0} %)", format_micros(overlapped_us), format_micros(communication_us))
}

/// Who arrived last at the collectives, and the longest waits.
fn stragglers(summary: &ProfileSummary) -> impl IntoView + use<> {
    if summary.stragglers.is_empty() {
        return view! { <p class="muted">"No collective call on more than one rank: nobody waited for anybody."</p> }.into_any();
    }
    let counts = last_arrivals(summary).into_iter().map(|(rank, n)| format!("rank {rank}: {n}")).collect::<Vec<_>>().join(", ");
    let rows = longest_waits(summary, WAITS_SHOWN)
        .into_iter()
        .map(|s| {
            view! {
                <tr>
                    <td><code>{s.collective.clone()}</code></td>
                    <td class="number">{s.call}</td>
                    <td class="number">{s.step.map(|n| n.to_string()).unwrap_or_else(|| "–".into())}</td>
                    <td class="number">{s.last_rank}</td>
                    <td class="number">{format_micros(s.wait_us)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="stragglers">
            <caption>{format!("Stragglers: the rank that arrived last at each of {} collective calls ({counts}); the longest waits", summary.stragglers.len())}</caption>
            <thead>
                <tr>
                    <th scope="col">"collective"</th>
                    <th scope="col" class="number">"call"</th>
                    <th scope="col" class="number">"step"</th>
                    <th scope="col" class="number">"last rank"</th>
                    <th scope="col" class="number" title="after the first rank to arrive">"wait"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
