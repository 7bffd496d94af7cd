//! A layout being explored: sizes, order and node size as the learner types them, what its
//! ranks run on, the token whose groups colour the grid, and the rank under the pointer or
//! selected. Shared by the controls, the grid and the estimate beside it.

use leptos::prelude::*;
use scalebook_page::blocks::hardware_words::Hardware;
use scalebook_shared::config::{LayoutRun, PipelineSchedule};
use scalebook_shared::layout::{Dim, Layout, Placement, Sizes, Token};
use scalebook_shared::{Error, Problems};

use super::GridSpec;
use super::config_editor::ProblemsFor;
use crate::ids::unique_id;

#[derive(Debug, Clone, Copy)]
pub struct LayoutState {
    pub sizes: RwSignal<Sizes>,
    pub order: RwSignal<String>,
    /// ZeRO's stage over dp for "Run this layout" (0: DDP).
    pub zero: RwSignal<u32>,
    /// Micro-batches per step: the pipeline's when pp > 1, gradient accumulation's otherwise.
    pub micro_batches: RwSignal<u32>,
    /// The pipeline's schedule, when pp > 1.
    pub schedule: RwSignal<PipelineSchedule>,
    /// Recompute each block's activations in backward (`activation_checkpointing`).
    pub recompute: RwSignal<bool>,
    pub gpus_per_node: RwSignal<u32>,
    /// A cluster's GPUs, `gpus_per_node` to a node; or this machine's cores, every rank on it.
    pub hardware: Signal<Hardware>,
    pub colour: RwSignal<Token>,
    pub selected: RwSignal<Option<u32>>,
    pub hovered: RwSignal<Option<u32>>,
    /// The layout, or every problem with what was typed.
    pub layout: Memo<Result<Layout, Error>>,
    pub placement: Memo<Result<Placement, Error>>,
}

impl LayoutState {
    pub fn new(spec: &GridSpec, hardware: Signal<Hardware>) -> LayoutState {
        let sizes = RwSignal::new(spec.sizes);
        let order = RwSignal::new(spec.order.clone());
        let gpus_per_node = RwSignal::new(spec.gpus_per_node);
        let layout = Memo::new(move |_| Layout::new(sizes.get(), &order.get()));
        // This machine is one node, whatever the node size typed for a cluster.
        let per_node = move || match hardware.get() {
            Hardware::Gpus => gpus_per_node.get(),
            Hardware::CpuCores => layout.with(|l| l.as_ref().map_or(1, Layout::world)),
        };
        LayoutState {
            sizes,
            order,
            zero: RwSignal::new(0),
            micro_batches: RwSignal::new(1),
            schedule: RwSignal::new(PipelineSchedule::OneFOneB),
            recompute: RwSignal::new(false),
            gpus_per_node,
            hardware,
            colour: RwSignal::new(spec.colour),
            selected: RwSignal::new(None),
            hovered: RwSignal::new(None),
            layout,
            placement: Memo::new(move |_| Placement::new(per_node())),
        }
    }

    /// The rank the details are about: the one under the pointer, else the selected one.
    pub fn focus(&self) -> Option<u32> {
        self.hovered.get().or(self.selected.get())
    }

    /// `layout` run with the choices made beside it (ZeRO, micro-batches, schedule).
    pub fn run(&self, layout: &Layout) -> LayoutRun {
        LayoutRun {
            zero: self.zero.get(),
            micro_batches: self.micro_batches.get(),
            schedule: self.schedule.get(),
            recompute: self.recompute.get(),
            ..LayoutRun::new(layout.sizes(), self.order.get())
        }
    }

    pub fn problems(&self) -> Problems {
        let mut problems = Problems::default();
        for result in [self.layout.get().err(), self.placement.get().err()].into_iter().flatten() {
            problems.0.extend(result.problems().0);
        }
        problems
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

/// The inputs of a layout, each with its problems beside it.
#[component]
pub fn LayoutControls(state: LayoutState) -> impl IntoView {
    let problems = Signal::derive(move || state.problems());
    let size_field = move |dim: Dim| {
        let name = dim.name();
        let id = unique_id(name);
        view! {
            <div class="control">
                <label for=id.clone()>{name}</label>
                <input id=id type="number" min="1" data-field=name class="size"
                    prop:value=move || state.sizes.get().get(dim)
                    aria-invalid=move || problems.with(|p| p.for_field(name).next().is_some()).to_string()
                    on:input=move |ev| {
                        let value = event_target_value(&ev).trim().parse().unwrap_or(0);
                        state.sizes.update(|s| set_size(s, dim, value));
                    } />
                <ProblemsFor problems field=name />
            </div>
        }
    };
    let order_id = unique_id("order");
    let zero_id = unique_id("zero");
    let micro_id = unique_id("micro-batches");
    let schedule_id = unique_id("schedule");
    let recompute_id = unique_id("recompute");
    let piped = move || state.sizes.get().pp > 1;
    let gpus_id = unique_id("gpus");
    let colour_id = unique_id("colour");
    view! {
        <div class="layout-controls">
            {[Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp].map(size_field)}
            <div class="control">
                <label for=order_id.clone()>"order (fastest first)"</label>
                <input id=order_id type="text" data-field="order" spellcheck="false"
                    prop:value=move || state.order.get()
                    on:input=move |ev| state.order.set(event_target_value(&ev)) />
                <ProblemsFor problems field="order" />
            </div>
            <div class="control">
                <label for=zero_id.clone()>"ZeRO stage"</label>
                <select id=zero_id data-field="zero_stage"
                    title="0: DDP; 1 shards Adam's moments over dp, 2 also the gradients, 3 also the weights"
                    on:change=move |ev| state.zero.set(event_target_value(&ev).parse().unwrap_or(0))>
                    {[0u32, 1, 2, 3].map(|z| {
                        let selected = move || state.zero.get() == z;
                        view! { <option value=z.to_string() selected=selected>{z.to_string()}</option> }
                    })}
                </select>
            </div>
            <div class="control">
                <label for=micro_id.clone()>"micro-batches"</label>
                <input id=micro_id type="number" min="1" data-field="num_micro_batches" class="size"
                    title="micro-batches per step: the pipeline's with pp > 1, gradient accumulation's with pp 1"
                    prop:value=move || state.micro_batches.get()
                    on:input=move |ev| state.micro_batches.set(event_target_value(&ev).trim().parse().unwrap_or(0)) />
            </div>
            <div class="control">
                <label for=recompute_id.clone()>"recompute"</label>
                <input id=recompute_id type="checkbox" data-field="activation_checkpointing"
                    title="recompute each block's activations in backward: less memory, one more forward"
                    prop:checked=move || state.recompute.get()
                    on:change=move |ev| state.recompute.set(event_target_checked(&ev)) />
            </div>
            <Show when=piped>
                <div class="control">
                    <label for=schedule_id.clone()>"schedule"</label>
                    <select id=schedule_id.clone() data-field="pipeline_schedule"
                        on:change=move |ev| {
                            let name = event_target_value(&ev);
                            if let Some(s) = PipelineSchedule::ALL.into_iter().find(|s| s.name() == name) {
                                state.schedule.set(s);
                            }
                        }>
                        {PipelineSchedule::ALL.map(|s| {
                            let selected = move || state.schedule.get() == s;
                            view! { <option value=s.name() selected=selected>{s.name()}</option> }
                        })}
                    </select>
                </div>
            </Show>
            // This machine's cores have no nodes to size.
            <Show when=move || state.hardware.get() == Hardware::Gpus>
                <div class="control">
                    <label for=gpus_id.clone()>"GPUs per node"</label>
                    <input id=gpus_id.clone() type="number" min="1" data-field="gpus_per_node"
                        prop:value=move || state.gpus_per_node.get()
                        on:input=move |ev| state.gpus_per_node.set(event_target_value(&ev).trim().parse().unwrap_or(0)) />
                    <ProblemsFor problems field="gpus_per_node" />
                </div>
            </Show>
            <div class="control">
                <label for=colour_id.clone()>"colour by"</label>
                <select id=colour_id data-field="colour"
                    on:change=move |ev| {
                        if let Ok(token) = event_target_value(&ev).parse::<Token>() {
                            state.colour.set(token);
                        }
                    }>
                    {Token::ALL.map(|t| {
                        let selected = move || state.colour.get() == t;
                        view! { <option value=t.to_string() selected=selected>{t.to_string()}</option> }
                    })}
                </select>
            </div>
            <ProblemsFor problems field="world" />
        </div>
    }
}
