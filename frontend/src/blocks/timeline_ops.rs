//! The ops of a profile as a table, PyTorch's `key_averages()` view: the ops that took the
//! most time over every rank, with their calls, total and self time, mean per call and share
//! of the time spent in ops. A column's heading sorts by it.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::profile::trace::{OpOrder, OpsTable, format_micros};

/// How many ops the table lists.
pub const TOP_OPS: usize = 15;

/// The sortable columns: heading, order, what the heading explains.
const COLUMNS: [(&str, OpOrder, &str); 4] = [
    ("calls", OpOrder::Count, "how many times it ran, on every rank together"),
    ("total", OpOrder::Total, "its time including the ops it called"),
    ("self", OpOrder::SelfTime, "its time less the ops it called"),
    ("mean", OpOrder::Mean, "total time per call"),
];

#[component]
pub fn OpsTableView(ops: Arc<OpsTable>) -> impl IntoView {
    let order = RwSignal::new(OpOrder::Total);
    let busy = ops.busy();
    let rows = move || {
        ops.sorted(order.get())
            .into_iter()
            .take(TOP_OPS)
            .map(|op| {
                let share = if busy > 0.0 { format!("{:.1} %", 100.0 * op.self_time / busy) } else { "–".into() };
                view! {
                    <tr data-op=op.name.clone()>
                        <td><code>{op.name.clone()}</code></td>
                        <td class="muted">{op.category.clone()}</td>
                        <td class="number">{op.count}</td>
                        <td class="number">{format_micros(op.total)}</td>
                        <td class="number">{format_micros(op.self_time)}</td>
                        <td class="number">{format_micros(op.mean())}</td>
                        <td class="number">{share}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let headings = COLUMNS
        .iter()
        .map(|&(heading, by, title)| {
            view! {
                <th scope="col" class="number" aria-sort=move || if order.get() == by { "descending" } else { "none" }>
                    <button type="button" class="sort" data-order=heading title=title on:click=move |_| order.set(by)>{heading}</button>
                </th>
            }
        })
        .collect_view();
    view! {
        <table class="ops">
            <caption>{format!("The {TOP_OPS} ops with the most time, every rank together (click a heading to sort by it)")}</caption>
            <thead>
                <tr>
                    <th scope="col">"op"</th>
                    <th scope="col">"kind"</th>
                    {headings}
                    <th scope="col" class="number" title="its self time, as a share of all the time spent in ops">"share"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
