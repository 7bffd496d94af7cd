//! The rank grid: nodes and their GPUs (or this machine's rank processes), coloured by the
//! groups of a chosen token. Pointing at (or selecting) a rank outlines each of its groups and
//! lists them with their coordinates, whether they stay inside one node (NVLink) or cross the
//! network, and the collective the tutorial runs over them. The same `shared` layout code as
//! `scalebook layout`, so the groups are the CLI's.

use leptos::prelude::*;
use scalebook_shared::estimate::GroupTraffic;
use scalebook_shared::layout::{Layout, Placement};

use super::GridSpec;
use super::grid_geometry::{Geometry, LABELLED, MAX_DRAWN, PALETTE, colour_paths, rank_outlines};
use super::layout_launch::{LayoutLaunch, Where};
use super::layout_state::{LayoutControls, LayoutState};
use crate::ids::unique_id;
use crate::library::{Library, Ready};
use scalebook_page::blocks::grid_groups::{TUTORIAL_TOKENS, first_groups, list};
use scalebook_page::blocks::hardware_words::Hardware;
use scalebook_page::units::{bytes, seconds};

/// The config a grid's layout runs with unless the learner picks another: the small model
/// made for tensor and context parallelism on CPU ranks (4 heads, 450 tokens).
const RUN_WITH: &str = "cpu_mp";

/// Groups listed per token in the table.
const GROUPS_LISTED: usize = 8;

/// Worlds whose every group is checked for crossing nodes; above, the first groups stand in.
const CHECK_ALL_GROUPS_UP_TO: u32 = 1 << 16;

/// Width of the drawing in SVG units (it scales to the page).
const WIDTH: f64 = 720.0;

#[component]
pub fn RankGridBlock(spec: GridSpec) -> impl IntoView {
    let state = LayoutState::new(&spec, Signal::stored(Hardware::Gpus));
    let library = expect_context::<Library>();
    let config = RwSignal::new(RUN_WITH.to_owned());
    let config_id = unique_id("grid-config");
    view! {
        <section class="block rank-grid-block" aria-label="Rank grid">
            <LayoutControls state />
            <RankGrid state traffic=Signal::stored(Vec::new()) />
            <div class="toolbar">
                <label for=config_id.clone()>"run it with"</label>
                <select id=config_id class="grid-config" on:change=move |ev| config.set(event_target_value(&ev))>
                    {move || library.configs.ready().map(|file| file.names().map(|n| {
                        let selected = config.get_untracked() == n;
                        view! { <option value=n.to_owned() selected=selected>{n.to_owned()}</option> }
                    }).collect_view())}
                </select>
            </div>
            <LayoutLaunch config=config.into() state place=Signal::stored(Where::Here) />
        </section>
    }
}

/// The drawing, the selected rank's groups, and the table of every token's groups.
#[component]
pub fn RankGrid(state: LayoutState, traffic: Signal<Vec<GroupTraffic>>) -> impl IntoView {
    move || {
        let (Ok(layout), Ok(placement)) = (state.layout.get(), state.placement.get()) else {
            return view! { <p class="muted">"Fix the layout above to see its ranks."</p> }.into_any();
        };
        let hardware = state.hardware.get();
        view! {
            <div class="rank-grid">
                <GridPicture state layout=layout.clone() placement hardware />
                <RankDetails state layout=layout.clone() placement traffic hardware />
                <GroupTable layout placement traffic hardware />
            </div>
        }
        .into_any()
    }
}

#[component]
fn GridPicture(state: LayoutState, layout: Layout, placement: Placement, hardware: Hardware) -> impl IntoView {
    let world = layout.world();
    let geometry = Geometry::new(world, placement.gpus_per_node(), WIDTH);
    let fills = {
        let layout = layout.clone();
        Memo::new(move |_| colour_paths(&layout, &geometry, state.colour.get()))
    };
    let outlines = {
        let layout = layout.clone();
        move || state.focus().map(|rank| rank_outlines(&layout, &geometry, rank)).unwrap_or_default()
    };
    let svg = NodeRef::<leptos::svg::Svg>::new();
    let rank_under = move |x: i32, y: i32| {
        let rect = svg.get()?.get_bounding_client_rect();
        let scale = geometry.width() / rect.width().max(1.0);
        geometry.rank_at((f64::from(x) - rect.left()) * scale, (f64::from(y) - rect.top()) * scale)
    };
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let from = state.selected.get_untracked().unwrap_or(0);
        let next = if state.selected.get_untracked().is_none() { Some(0) } else { geometry.step(from, &ev.key()) };
        if let Some(next) = next.filter(|_| ev.key().starts_with("Arrow") || ev.key() == "Home" || ev.key() == "End") {
            ev.prevent_default();
            state.selected.set(Some(next));
        } else if ev.key() == "Escape" {
            state.selected.set(None);
        }
    };
    let labels = (world <= LABELLED).then(|| {
        (0..world)
            .map(|rank| {
                let (x, y) = geometry.cell_origin(rank);
                let c = geometry.cell / 2.0;
                view! { <text x=x + c y=y + c + 4.0 text-anchor="middle" font-size="11" fill="#000">{rank}</text> }
            })
            .collect_view()
    });
    let description =
        format!("{}. Arrow keys choose a rank; its groups are listed below.", hardware.ranks_placed(world, placement.gpus_per_node()));
    view! {
        <figure class="grid-picture">
            <svg node_ref=svg class="rank-grid-svg" xmlns="http://www.w3.org/2000/svg"
                viewBox=format!("0 0 {:.1} {:.1}", geometry.width(), geometry.height())
                width=format!("{:.0}", geometry.width())
                role="img" tabindex="0" aria-label=description
                on:pointermove=move |ev| state.hovered.set(rank_under(ev.client_x(), ev.client_y()))
                on:pointerleave=move |_| state.hovered.set(None)
                on:click=move |ev| state.selected.set(rank_under(ev.client_x(), ev.client_y()))
                on:keydown=on_key>
                <path class="nodes" d=geometry.nodes_path() fill="none" stroke="currentColor" stroke-opacity="0.45" />
                <g class="cells">
                    {move || fills.get().into_iter().enumerate().map(|(i, d)| view! {
                        <path d=d fill=PALETTE[i] data-colour=i />
                    }).collect_view()}
                </g>
                <g class="labels" pointer-events="none">{labels}</g>
                <g class="outlines" fill="none" stroke="currentColor" pointer-events="none">
                    {move || outlines().into_iter().map(|(marks, dash, d, width)| view! {
                        <path d=d stroke-dasharray=dash stroke-width=width data-marks=marks />
                    }).collect_view()}
                </g>
            </svg>
            <figcaption class="muted">
                {format!("Coloured by {} groups; outlines of the chosen rank's groups: tp solid, cp dashed, dp dotted, pp dash-dot.", state.colour.get_untracked())}
                {(world > MAX_DRAWN).then(|| format!(" Showing the first {MAX_DRAWN} of {world} ranks."))}
            </figcaption>
        </figure>
    }
}

#[component]
fn RankDetails(
    state: LayoutState,
    layout: Layout,
    placement: Placement,
    traffic: Signal<Vec<GroupTraffic>>,
    hardware: Hardware,
) -> impl IntoView {
    move || {
        let Some(rank) = state.focus() else {
            return view! { <p class="muted rank-details">"Point at a rank, or focus the grid and use the arrow keys, to see its groups."</p> }.into_any();
        };
        let Some(coords) = layout.coords(rank) else { return ().into_any() };
        let rows = TUTORIAL_TOKENS
            .iter()
            .filter_map(|&token| {
                let group = layout.group_of(token, rank)?;
                let position = layout.group_rank(token, rank)?;
                let link = hardware.group_link(group.len(), placement.crosses_nodes(&group));
                let load = traffic.with(|t| t.iter().find(|g| g.group == token).map(traffic_text));
                Some(view! {
                    <tr data-token=token.to_string()>
                        <th scope="row"><code>{token.to_string()}</code></th>
                        <td class="mono group" data-group=serde_json::to_string(&group).unwrap_or_default()>{list(&group)}</td>
                        <td>{position}</td>
                        <td>{link}</td>
                        <td>{token.collective()}{load.map(|l| format!(" — {l}"))}</td>
                    </tr>
                })
            })
            .collect_view();
        view! {
            <div class="rank-details" aria-live="polite">
                <p>
                    <strong data-rank=rank>{format!("Rank {rank}")}</strong>
                    {format!(" — {}; coordinates tp {}, cp {}, dp {}, pp {}",
                        hardware.rank_place(rank, placement.gpus_per_node()), coords.tp, coords.cp, coords.dp, coords.pp)}
                </p>
                <table>
                    <thead><tr><th>"group"</th><th>"its ranks"</th><th>"rank in group"</th><th>"link"</th><th>"collective"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        }
        .into_any()
    }
}

#[component]
fn GroupTable(layout: Layout, placement: Placement, traffic: Signal<Vec<GroupTraffic>>, hardware: Hardware) -> impl IntoView {
    let rows = TUTORIAL_TOKENS
        .iter()
        .map(|&token| {
            let count = layout.world() / layout.group_size(token);
            let listed = first_groups(&layout, token, GROUPS_LISTED);
            let crosses = if layout.world() <= CHECK_ALL_GROUPS_UP_TO {
                placement.any_crosses_nodes(&layout.groups(token))
            } else {
                listed.iter().any(|g| placement.crosses_nodes(g))
            };
            let mut text = listed.iter().map(|g| list(g)).collect::<Vec<_>>().join(" ");
            if count as usize > listed.len() {
                text.push_str(&format!(" … {} more", count as usize - listed.len()));
            }
            let load = move || traffic.with(|t| t.iter().find(|g| g.group == token).map(traffic_text));
            view! {
                <tr data-token=token.to_string() data-count=count>
                    <th scope="row"><code>{token.to_string()}</code></th>
                    <td>{format!("{count} × {}", layout.group_size(token))}</td>
                    <td>{hardware.group_link(layout.group_size(token) as usize, crosses)}</td>
                    <td>{token.collective()}{move || load().map(|l| format!(" — {l}"))}</td>
                    <td class="mono groups" data-groups=serde_json::to_string(&listed).unwrap_or_default()>{text}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <details class="group-table" open>
            <summary>{format!("All groups (effective order {})", layout.effective_order())}</summary>
            <table>
                <thead><tr><th>"token"</th><th>"groups × size"</th><th>"links"</th><th>"collective"</th><th>"groups"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </details>
    }
}

fn traffic_text(t: &GroupTraffic) -> String {
    format!("{} per step, {} ({})", bytes(t.bytes_per_step), seconds(t.seconds_per_step), t.operations_text())
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::{Sizes, Token};
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    async fn the_block_lists_the_generators_groups_and_refuses_a_bad_size() {
        let spec = GridSpec { sizes: Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, order: "tp-cp-dp".into(), gpus_per_node: 4, colour: Token::DP };
        let block = crate::testing::mount(move || {
            crate::testing::provide_configs();
            provide_context(crate::runs::Runs::unconnected());
            view! { <RankGridBlock spec /> }
        });
        crate::testing::settle().await;
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        for token in TUTORIAL_TOKENS {
            let row = format!("tr[data-token='{token}']");
            let count: usize = block.attr(&row, "data-count").unwrap().parse().unwrap();
            assert_eq!(count, layout.groups(token).len(), "{token}");
            let shown: Vec<Vec<u32>> = serde_json::from_str(&block.attr(&format!("{row} .groups"), "data-groups").unwrap()).unwrap();
            assert_eq!(shown, layout.groups(token).to_vecs()[..shown.len()].to_vec(), "{token}");
        }
        // Colouring by dp draws four colours (four dp groups), one path each.
        assert_eq!(block.root.query_selector_all(".cells path[d^='M']").unwrap().length(), 4);
        // The layout runs with cpu_mp unless another config is picked.
        assert!(block.text("button.run-layout").contains("cpu_mp"), "{}", block.text(".layout-launch"));
        // Pipeline stages run: the schedule is offered beside them, and nothing refuses the layout.
        block.input("input[data-field=order]", "tp-cp-dp-pp");
        block.input("input[data-field=pp]", "2");
        crate::testing::settle().await;
        assert!(block.find("select[data-field=pipeline_schedule]").is_some(), "{}", block.text(".layout-controls"));
        assert!(!block.text(".layout-launch").contains("cannot run"), "{}", block.text(".layout-launch"));
        block.input("input[data-field=pp]", "1");
        block.input("input[data-field=tp]", "0");
        crate::testing::settle().await;
        assert!(block.text(".error[data-field=tp]").contains("at least 1"));
        assert!(block.find("svg.rank-grid-svg").is_none(), "no picture of an invalid layout");
    }
}
