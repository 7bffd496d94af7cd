//! The numbers a config implies for a run: batch split, tokens, parameters, epochs and the
//! learning rate the tutorial's square-root rule would give.

use leptos::prelude::*;
use scalebook_shared::charts::format_number;
use scalebook_shared::config::{ERA5_TRAIN_SAMPLES, TrainConfig};

use scalebook_page::units::thousands;

#[component]
pub fn DerivedValues(config: TrainConfig, world: usize) -> impl IntoView {
    let d = match config.derived(world, None) {
        Ok(d) => d,
        Err(e) => return view! { <p class="error">{e.to_string()}</p> }.into_any(),
    };
    let samples_note = if config.limit_nsamples.is_some() {
        format!("{} (limit_nsamples)", thousands(d.train_samples as u64))
    } else {
        format!("{} (the tutorial's ERA5 training set)", thousands(ERA5_TRAIN_SAMPLES as u64))
    };
    let rows: Vec<(&str, String)> = vec![
        ("world", format!("{} ranks = tp {} × cp {} × dp {}", d.world, d.tp, d.cp, d.dp)),
        ("batch", format!("{} global, {} per dp rank", d.global_batch_size, d.local_batch_size)),
        ("tokens per sample", format!("{} × {} patches = {}", d.patch_grid[0], d.patch_grid[1], d.tokens_per_sample)),
        ("attention", format!("head_dim {}, {} heads per tp rank", d.head_dim, d.heads_per_tp_rank)),
        ("tokens per cp rank", d.cp_split.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
        ("parameters", thousands(d.params.total)),
        ("training samples", samples_note),
        ("iterations per epoch", d.iters_per_epoch.to_string()),
        ("epochs", format!("{} (num_iters {} // {})", d.num_epochs, config.num_iters, d.iters_per_epoch)),
        ("optimizer steps", d.steps.to_string()),
        (
            "learning rate",
            format!("{} (square-root rule for batch {}: {})", format_number(config.lr), d.global_batch_size, format_number(d.lr_sqrt_rule)),
        ),
        ("learning rate at the end", format_number(d.final_lr)),
    ];
    view! {
        <details class="derived" open>
            <summary>"Derived values"</summary>
            <dl>
                {rows.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd data-derived=k>{v}</dd> }).collect_view()}
            </dl>
        </details>
    }
    .into_any()
}
