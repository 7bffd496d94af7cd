//! The interactive blocks a chapter places in its text.

mod chart_drawing;
mod charts;
mod code;
mod config_editor;
mod config_model;
mod data_block;
mod data_fetch;
mod data_latitude;
mod deferred;
mod derived_values;
mod estimate;
mod estimate_view;
mod figures;
mod grid_geometry;
mod layout_state;
mod maps_block;
mod maps_legend;
mod picture;
mod picture_view;
mod published;
mod published_chart;
mod quiz;
mod rank_grid;
mod run;
mod run_status;
mod slurm_fields;
mod spec;
mod sweep;
mod sweep_model;
mod timeline;
mod timeline_drawing;
mod timeline_ops;
mod timeline_view;

pub use spec::{BlockSpec, ChartSpec, GridSpec};

use leptos::prelude::*;

use self::code::CodeBlock;
use self::published::PublishedBlock;
use self::quiz::Quiz;

/// The component a spec asks for. The blocks few chapters use are loaded when a chapter first
/// shows one (see [`deferred`]); the light ones every chapter has are drawn at once.
#[component]
pub fn Block(spec: BlockSpec) -> impl IntoView {
    match spec {
        BlockSpec::Quiz { question, answer } => view! { <Quiz question answer /> }.into_any(),
        BlockSpec::Code { path, item, caption } => view! { <CodeBlock path item caption /> }.into_any(),
        BlockSpec::Published { table, caption } => view! { <PublishedBlock table caption /> }.into_any(),
        spec => deferred::block(spec).into_any(),
    }
}
