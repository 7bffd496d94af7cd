//! The rank grid: nodes and their GPUs, coloured by the groups of a chosen token. Pointing at
//! (or selecting) a rank outlines each of its groups and lists them with their coordinates,
//! whether they stay inside one node (NVLink) or cross the network, and the collective the
//! tutorial runs over them. The same `shared` layout code as `scalebook layout`, so the groups
//! are the CLI's.

use leptos::prelude::*;
use scalebook_shared::estimate::GroupTraffic;
use scalebook_shared::layout::{Dim, Layout, Placement, Token};

use super::GridSpec;
use super::grid_geometry::{Geometry, LABELLED, MAX_DRAWN};
use super::layout_state::{LayoutControls, LayoutState};
use scalebook_page::units::{bytes, seconds};

/// Fills for groups, cycling: Okabe and Ito's colour-blind-safe set (plus grey), all light
/// enough for black rank numbers.
const PALETTE: [&str; 8] = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#CC79A7", "#D55E00", "#6FA8DC", "#BBBBBB"];

/// How each of a rank's own groups is outlined: dimension, dash pattern, how far outside the
/// square (inner outlines for later dimensions, so all four stay visible at once).
const OUTLINES: [(Dim, &str, f64); 4] =
    [(Dim::Tp, "none", 3.0), (Dim::Cp, "4 2", 1.5), (Dim::Dp, "1.5 1.5", 0.0), (Dim::Pp, "6 2 1 2", -1.5)];

/// The tokens the tutorial builds process groups for, in its order.
const TUTORIAL_TOKENS: [Token; 6] = [Token::DP, Token::TP, Token::CP, Token::PP, Token::TP_CP, Token::DP_CP];

/// Groups listed per token in the table.
const GROUPS_LISTED: usize = 8;

/// Worlds whose every group is checked for crossing nodes; above, the first groups stand in.
const CHECK_ALL_GROUPS_UP_TO: u32 = 1 << 16;

/// Width of the drawing in SVG units (it scales to the page).
const WIDTH: f64 = 720.0;

#[component]
pub fn RankGridBlock(spec: GridSpec) -> impl IntoView {
    let state = LayoutState::new(&spec);
    view! {
        <section class="block rank-grid-block" aria-label="Rank grid">
            <LayoutControls state />
            <RankGrid state traffic=Signal::stored(Vec::new()) />
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
        view! {
            <div class="rank-grid">
                <GridPicture state layout=layout.clone() placement />
                <RankDetails state layout=layout.clone() placement traffic />
                <GroupTable layout placement traffic />
            </div>
        }
        .into_any()
    }
}

#[component]
fn GridPicture(state: LayoutState, layout: Layout, placement: Placement) -> impl IntoView {
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
    let description = format!(
        "{world} ranks on {} nodes of {} GPUs. Arrow keys choose a rank; its groups are listed below.",
        world.div_ceil(placement.gpus_per_node()),
        placement.gpus_per_node()
    );
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

/// One path per palette colour: the squares of the ranks whose group of `token` gets it.
fn colour_paths(layout: &Layout, geometry: &Geometry, token: Token) -> Vec<String> {
    let mut by_colour: Vec<Vec<u32>> = vec![Vec::new(); PALETTE.len()];
    for rank in 0..geometry.drawn {
        let group = layout.group_index_of(token, rank).unwrap_or(0);
        by_colour[group % PALETTE.len()].push(rank);
    }
    by_colour.into_iter().map(|ranks| geometry.squares_path(ranks, 0.0)).collect()
}

/// One outline around some squares: what it marks (a dimension's name, or `rank`), its dash
/// pattern, its path and its stroke width.
type Outline = (&'static str, &'static str, String, f64);

/// The outlines of `rank`'s group along each dimension of size above 1, and of the rank.
fn rank_outlines(layout: &Layout, geometry: &Geometry, rank: u32) -> Vec<Outline> {
    let mut out: Vec<Outline> = OUTLINES
        .iter()
        .filter(|(dim, ..)| layout.sizes().get(*dim) > 1)
        .filter_map(|&(dim, dash, grow)| {
            let group = layout.group_of(Token::single(dim), rank)?;
            Some((dim.name(), dash, geometry.squares_path(group, grow.min(geometry.cell / 4.0)), 1.5))
        })
        .collect();
    out.push(("rank", "none", geometry.squares_path([rank], geometry.cell / 8.0), 3.0));
    out
}

#[component]
fn RankDetails(state: LayoutState, layout: Layout, placement: Placement, traffic: Signal<Vec<GroupTraffic>>) -> impl IntoView {
    move || {
        let Some(rank) = state.focus() else {
            return view! { <p class="muted rank-details">"Point at a rank, or focus the grid and use the arrow keys, to see its groups."</p> }.into_any();
        };
        let Some(coords) = layout.coords(rank) else { return ().into_any() };
        let node = placement.node_of(rank);
        let rows = TUTORIAL_TOKENS
            .iter()
            .filter_map(|&token| {
                let group = layout.group_of(token, rank)?;
                let position = layout.group_rank(token, rank)?;
                let link = link_name(group.len(), placement.crosses_nodes(&group));
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
                    {format!(" — node {node}, GPU {} of it; coordinates tp {}, cp {}, dp {}, pp {}",
                        rank % placement.gpus_per_node(), coords.tp, coords.cp, coords.dp, coords.pp)}
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
fn GroupTable(layout: Layout, placement: Placement, traffic: Signal<Vec<GroupTraffic>>) -> impl IntoView {
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
                    <td>{link_name(layout.group_size(token) as usize, crosses)}</td>
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

/// The first `count` groups of `token` in the generator's order, found by scanning ranks
/// (no list of every group is built, so huge worlds stay cheap).
fn first_groups(layout: &Layout, token: Token, count: usize) -> Vec<Vec<u32>> {
    let total = (layout.world() / layout.group_size(token)) as usize;
    let wanted = count.min(total);
    let mut found: Vec<Option<Vec<u32>>> = vec![None; wanted];
    let mut missing = wanted;
    for rank in 0..layout.world() {
        if missing == 0 {
            break;
        }
        let Some(index) = layout.group_index_of(token, rank).filter(|i| *i < wanted) else { continue };
        if found[index].is_none() {
            found[index] = layout.group_of(token, rank);
            missing -= 1;
        }
    }
    found.into_iter().flatten().collect()
}

fn link_name(group_size: usize, crosses: bool) -> &'static str {
    match (group_size, crosses) {
        (0..=1, _) => "none (one rank)",
        (_, true) => "network (across nodes)",
        (_, false) => "NVLink (one node)",
    }
}

fn traffic_text(t: &GroupTraffic) -> String {
    format!("{} per step, {} ({})", bytes(t.bytes_per_step), seconds(t.seconds_per_step), t.operations.join(", "))
}

/// A group as `[0, 4, 8, 12]`, long ones elided in the middle.
fn list(group: &[u32]) -> String {
    const SHOWN: usize = 16;
    if group.len() <= SHOWN {
        return format!("{group:?}");
    }
    let head: Vec<String> = group[..8].iter().map(u32::to_string).collect();
    let tail: Vec<String> = group[group.len() - 4..].iter().map(u32::to_string).collect();
    format!("[{}, … {}]", head.join(", "), tail.join(", "))
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn the_first_groups_are_the_generators_first_groups() {
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        for token in TUTORIAL_TOKENS {
            let all = layout.groups(token).to_vecs();
            let first = first_groups(&layout, token, 3);
            assert_eq!(first, all[..3.min(all.len())].to_vec(), "{token}");
        }
    }

    #[wasm_bindgen_test]
    fn colours_follow_the_groups_of_the_chosen_token() {
        // Reference §6.2: tp-cp-dp with tp 2, cp 2, dp 4; the dp groups are [0,4,8,12], ...
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        let geometry = Geometry::new(16, 4, WIDTH);
        let paths = colour_paths(&layout, &geometry, Token::DP);
        assert_eq!(paths[0], geometry.squares_path([0, 4, 8, 12], 0.0));
        assert_eq!(paths[3], geometry.squares_path([3, 7, 11, 15], 0.0));
        assert!(paths[4..].iter().all(String::is_empty));
    }

    #[wasm_bindgen_test]
    fn a_ranks_outlines_cover_its_group_along_each_dimension() {
        let layout = Layout::new(Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, "tp-cp-dp").unwrap();
        let geometry = Geometry::new(16, 4, WIDTH);
        let outlines = rank_outlines(&layout, &geometry, 5);
        let marks: Vec<&str> = outlines.iter().map(|(m, ..)| *m).collect();
        assert_eq!(marks, ["tp", "cp", "dp", "rank"], "pp has size 1");
        // Rank 5's dp group is [1, 5, 9, 13]: four squares.
        assert_eq!(outlines[2].2.matches('M').count(), 4);
    }

    #[wasm_bindgen_test]
    async fn the_block_lists_the_generators_groups_and_refuses_a_bad_size() {
        let spec = GridSpec { sizes: Sizes { tp: 2, cp: 2, dp: 4, pp: 1 }, order: "tp-cp-dp".into(), gpus_per_node: 4, colour: Token::DP };
        let block = crate::testing::mount(move || view! { <RankGridBlock spec /> });
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
        block.input("input[data-field=tp]", "0");
        crate::testing::settle().await;
        assert!(block.text(".error[data-field=tp]").contains("at least 1"));
        assert!(block.find("svg.rank-grid-svg").is_none(), "no picture of an invalid layout");
    }

    #[wasm_bindgen_test]
    fn long_groups_are_elided() {
        assert_eq!(list(&[0, 4, 8]), "[0, 4, 8]");
        let long: Vec<u32> = (0..64).collect();
        assert_eq!(list(&long), "[0, 1, 2, 3, 4, 5, 6, 7, … 60, 61, 62, 63]");
    }
}
