//! Rank groups of a tp/cp/dp/pp layout, computed in the browser by `shared::layout` as the
//! learner types, with each rule a bad value breaks shown beside its field.

use leptos::prelude::*;
use scalebook_shared::layout::{Dim, Layout, Placement, Sizes, Token};
use scalebook_shared::{Error, Problems};

/// Groups listed per token before the table elides the rest; big worlds stay responsive.
const SHOWN_GROUPS: usize = 8;

#[component]
pub fn LayoutExplorer() -> impl IntoView {
    let sizes = RwSignal::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 });
    let order = RwSignal::new("tp-cp-dp".to_owned());
    let gpus_per_node = RwSignal::new(4u32);
    let layout = move || Layout::new(sizes.get(), &order.get());
    let problems = move || layout().err().map(|e: Error| e.problems()).unwrap_or_default();

    let size_field = move |dim: Dim| {
        let name = dim.name();
        view! {
            <label>
                {name}
                <input
                    type="number"
                    min="1"
                    id=format!("layout-{name}")
                    prop:value=move || sizes.get().get(dim)
                    aria-invalid=move || problems().for_field(name).next().is_some().to_string()
                    on:input=move |ev| {
                        let value = event_target_value(&ev).trim().parse().unwrap_or(0);
                        sizes.update(|s| set_size(s, dim, value));
                    }
                />
            </label>
        }
    };

    view! {
        <section class="block" id="layout">
            <h2>"Rank layout"</h2>
            <p>
                "Ranks are numbered along the order string with its leftmost name varying fastest, \
                 exactly as Megatron-LM's RankGenerator does."
            </p>
            <div>
                {[Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp].map(size_field)}
                <label>
                    "order"
                    <input
                        type="text"
                        id="layout-order"
                        prop:value=move || order.get()
                        on:input=move |ev| order.set(event_target_value(&ev))
                    />
                </label>
                <label>
                    "GPUs per node"
                    <input
                        type="number"
                        min="1"
                        id="layout-gpus"
                        prop:value=move || gpus_per_node.get()
                        on:input=move |ev| gpus_per_node.set(event_target_value(&ev).parse().unwrap_or(0))
                    />
                </label>
            </div>
            <ProblemList problems=Signal::derive(problems) />
            {move || {
                let placement = Placement::new(gpus_per_node.get());
                match (layout(), placement) {
                    (Ok(layout), Ok(placement)) => view! { <GroupTable layout placement /> }.into_any(),
                    (_, Err(e)) => view! { <ProblemList problems=Signal::stored(e.problems()) /> }.into_any(),
                    _ => ().into_any(),
                }
            }}
        </section>
    }
}

fn set_size(sizes: &mut Sizes, dim: Dim, value: u32) {
    match dim {
        Dim::Tp => sizes.tp = value,
        Dim::Cp => sizes.cp = value,
        Dim::Dp => sizes.dp = value,
        Dim::Pp => sizes.pp = value,
    }
}

#[component]
fn ProblemList(problems: Signal<Problems>) -> impl IntoView {
    view! {
        <ul class="problems">
            {move || {
                problems.get().0.into_iter().map(|p| view! { <li class="error" data-field=p.field.clone()>{p.to_string()}</li> }).collect_view()
            }}
        </ul>
    }
}

#[component]
fn GroupTable(layout: Layout, placement: Placement) -> impl IntoView {
    let rows = Token::ALL
        .iter()
        .map(|&token| {
            let groups = layout.groups(token);
            let crosses = placement.any_crosses_nodes(&groups);
            let mut shown: Vec<String> = groups.iter().take(SHOWN_GROUPS).map(|g| format!("{g:?}")).collect();
            if groups.len() > SHOWN_GROUPS {
                shown.push(format!("… {} more", groups.len() - SHOWN_GROUPS));
            }
            view! {
                <tr id=format!("groups-{token}")>
                    <th scope="row"><code>{token.to_string()}</code></th>
                    <td>{groups.len()}" × "{groups.group_size()}</td>
                    <td>{if crosses { "network" } else { "NVLink (one node)" }}</td>
                    <td class="mono groups">{shown.join(" ")}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p>
            "World " <strong id="layout-world">{layout.world()}</strong>
            " ranks on " {placement.nodes(layout.world()).len()} " nodes; effective order "
            <code id="layout-effective-order">{layout.effective_order()}</code>
        </p>
        <table>
            <thead>
                <tr><th>"token"</th><th>"groups × size"</th><th>"links"</th><th>"groups"</th></tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
