//! The pipeline block: stages and micro-batches set by the learner, GPipe's schedule drawn above
//! 1F1B's and interleaved 1F1B's on one time axis, and what they cost: the bubble (the same for
//! the first two, smaller interleaved) and how many micro-batches' activations the first stage
//! holds at once (all of them, against the stages).

use leptos::prelude::*;
use scalebook_page::blocks::figures::pipeline::{VIRTUAL_STAGES, explorer};
use scalebook_page::blocks::spec::{MAX_MICRO_BATCHES, MAX_STAGES};
use scalebook_shared::pipeline::{Schedule, bubble_text, interleaved_bubble_text, peak_held, simulate};

use super::picture_view::PictureFigure;
use crate::ids::unique_id;

#[component]
pub fn PipelineBlock(stages: u32, micro_batches: u32) -> impl IntoView {
    let stages = RwSignal::new(stages);
    let micro_batches = RwSignal::new(micro_batches);
    let (stages_id, micro_id) = (unique_id("pipeline-stages"), unique_id("pipeline-micro"));
    let summary = move || {
        let (p, m) = (stages.get() as usize, micro_batches.get() as usize);
        let held = |schedule| peak_held(&simulate(schedule, p, m, 1.0), 0);
        let interleaved = match Schedule::Interleaved(VIRTUAL_STAGES).runs(p, m) {
            true => format!(" Interleaved over {VIRTUAL_STAGES} chunks a GPU: {}.", interleaved_bubble_text(p, m, VIRTUAL_STAGES)),
            false => format!(" Interleaving needs m divisible by p ({m} is not by {p})."),
        };
        format!(
            "{}. GPU 0 holds the activations of {} micro-batches at once under GPipe, {} under 1F1B.{interleaved}",
            bubble_text(p, m),
            held(Schedule::GPipe),
            held(Schedule::OneFOneB)
        )
    };
    let number = |signal: RwSignal<u32>, lowest: u32, highest: u32| {
        move |ev: leptos::ev::Event| {
            if let Ok(n) = event_target_value(&ev).trim().parse::<u32>() {
                signal.set(n.clamp(lowest, highest));
            }
        }
    };
    view! {
        <section class="block pipeline-block" aria-label="Pipeline schedules">
            <div class="toolbar">
                <label for=stages_id.clone()>"stages (p)"</label>
                <input id=stages_id class="stages" type="number" min="2" max=MAX_STAGES prop:value=move || stages.get()
                    on:input=number(stages, 2, MAX_STAGES) />
                <label for=micro_id.clone()>"micro-batches (m)"</label>
                <input id=micro_id class="micro-batches" type="number" min="1" max=MAX_MICRO_BATCHES prop:value=move || micro_batches.get()
                    on:input=number(micro_batches, 1, MAX_MICRO_BATCHES) />
            </div>
            <p class="pipeline-summary" data-stages=move || stages.get() data-micro-batches=move || micro_batches.get()>{summary}</p>
            {move || {
                let picture = explorer(stages.get() as usize, micro_batches.get() as usize);
                view! { <PictureFigure picture kind="figure" name="pipeline-schedules".to_owned() source=None caption=String::new() /> }
            }}
        </section>
    }
}
