//! One step's estimate as a learner reads it: does it fit, how fast, where the time and the
//! memory go, and what every collective moves; per GPU, or per rank on this machine's cores.

use leptos::prelude::*;
use scalebook_shared::charts::format_number;
use scalebook_shared::estimate::Estimate;

use scalebook_page::blocks::hardware_words::Hardware;
use scalebook_page::prediction::model_flops;
use scalebook_page::units::{bytes, seconds};

/// Colours of the memory parts, in `MemoryBreakdown::parts` order.
const PART_COLOURS: [&str; 8] = ["#0072B2", "#56B4E9", "#009E73", "#8FD3B6", "#E69F00", "#F3C979", "#999999", "#CC79A7"];

#[component]
pub fn EstimateView(estimate: Estimate, hardware: Hardware) -> impl IntoView {
    let memory = estimate.memory_gb;
    let limit = estimate.memory_limit_gb;
    let per = hardware.per_unit();
    let verdict = if estimate.fits {
        format!("Fits: {:.1} of {limit:.0} GB {per}", memory.total)
    } else {
        format!("Will not fit in {limit:.0} GB: needs {:.1} GB {per} (out of memory)", memory.total)
    };
    let scale = memory.total.max(limit);
    let bar = memory
        .parts()
        .into_iter()
        .zip(PART_COLOURS)
        .filter(|((_, gb), _)| *gb > 0.0)
        .map(|((name, gb), colour)| {
            let width = format!("width: {:.2}%; background: {colour}", gb / scale * 100.0);
            view! { <span class="part" style=width title=format!("{}: {gb:.2} GB", name.replace('_', " "))></span> }
        })
        .collect_view();
    let legend = memory
        .parts()
        .into_iter()
        .zip(PART_COLOURS)
        .filter(|((_, gb), _)| *gb > 0.0)
        .map(|((name, gb), colour)| {
            view! { <li><span class="swatch" style=format!("background: {colour}")></span>{format!("{} {gb:.2} GB", name.replace('_', " "))}</li> }
        })
        .collect_view();
    let t = estimate.time;
    let time_rows = [
        ("forward", t.forward_s),
        ("backward", t.backward_s),
        ("forward again in backward (activation recomputation)", t.recompute_s),
        ("optimizer", t.optimizer_s),
        ("tp/cp communication (waited for)", t.blocking_comm_s),
        ("dp all-reduce not hidden by the backward pass", t.exposed_overlapped_comm_s),
        ("data loading the step waits for", t.exposed_data_s),
    ];
    let collectives = estimate
        .collectives
        .iter()
        .map(|c| {
            view! {
                <tr>
                    <td><code>{c.group.to_string()}</code>{format!(" ({})", c.group_size)}</td>
                    <td>{c.operation.name()}</td>
                    <td>{c.phase.name()}</td>
                    <td>{c.what.clone()}</td>
                    <td>{format!("{} × {}", c.count, bytes(c.bytes))}</td>
                    <td>{hardware.link(c.link)}</td>
                    <td>{seconds(c.seconds)}{c.overlapped.then_some(" (overlapped)")}</td>
                </tr>
            }
        })
        .collect_view();
    let zero = estimate
        .zero_what_if
        .iter()
        .map(|z| view! { <tr><td>{z.stage}</td><td>{format!("{:.1} GB", z.total_gb)}</td><td>{if z.fits { "fits" } else { "does not fit" }}</td></tr> })
        .collect_view();
    let r = estimate.recompute_what_if;
    let recompute_row = view! {
        <tr>
            <td>{if r.recompute { "recomputed in backward" } else { "kept (no recomputation)" }}</td>
            <td>{format!("{:.1} GB", r.total_gb)}</td>
            <td>{if r.fits { "fits" } else { "does not fit" }}</td>
            <td>{format!("{} per step", seconds(r.step_time_s))}</td>
        </tr>
    };
    let recompute_now = if r.recompute { "kept (as configured)" } else { "recomputed in backward (as configured)" };
    // The model's share of the hardware's peak at that speed (MFU).
    let mfu = model_flops(&estimate, estimate.samples_per_sec)
        .share_of_peak
        .map_or_else(String::new, |s| format!(", {s:.0} % of its peak (MFU)"));
    view! {
        <div class="estimate">
            <p class=if estimate.fits { "verdict ok" } else { "verdict error" } data-fits=estimate.fits.to_string() role="status">
                <strong>{verdict}</strong>
            </p>
            <div class="memory-bar" role="img" aria-label=format!("memory {per}: {:.1} GB of {limit:.0} GB", memory.total)>
                {bar}
                <span class="limit" style=format!("left: {:.2}%", limit / scale * 100.0)></span>
            </div>
            <ul class="legend">{legend}</ul>
            <p>
                {format!("{} precision, local batch {}, {} tokens per rank. ", estimate.precision.name(), estimate.local_batch_size, estimate.tokens_per_rank)}
                <strong class="samples-per-sec" data-value=estimate.samples_per_sec.to_string()>{format!("{} samples/s", format_number(estimate.samples_per_sec))}</strong>
                {format!(" ({} per step, {} TFLOP/s {per}{}).", seconds(estimate.step_time_s), format_number(estimate.tflops_per_gpu), mfu)}
            </p>
            <details>
                <summary>"Where the step's time goes"</summary>
                <table><tbody>
                    {time_rows.into_iter().map(|(name, s)| view! { <tr><td>{name}</td><td>{seconds(s)}</td></tr> }).collect_view()}
                </tbody></table>
            </details>
            <details>
                <summary>{format!("Collectives ({})", estimate.collectives.len())}</summary>
                <table>
                    <thead><tr><th>"group"</th><th>"operation"</th><th>"phase"</th><th>"what"</th><th>"calls × buffer"</th><th>"link"</th><th>"time per step"</th></tr></thead>
                    <tbody>{collectives}</tbody>
                </table>
            </details>
            <details>
                <summary>"Memory by ZeRO stage (the config key zero_stage; the trainer runs each over dp)"</summary>
                <table>
                    <thead><tr><th>"stage"</th><th>{per.clone()}</th><th></th></tr></thead>
                    <tbody>{zero}</tbody>
                </table>
            </details>
            <details class="recompute-what-if">
                <summary>"Memory against time: activation recomputation"</summary>
                <table>
                    <thead><tr><th>"activations"</th><th>{per}</th><th></th><th>"step"</th></tr></thead>
                    <tbody>
                        <tr>
                            <td>{recompute_now}</td>
                            <td>{format!("{:.1} GB", memory.total)}</td>
                            <td>{if estimate.fits { "fits" } else { "does not fit" }}</td>
                            <td>{format!("{} per step", seconds(estimate.step_time_s))}</td>
                        </tr>
                        {recompute_row}
                    </tbody>
                </table>
            </details>
        </div>
    }
}
