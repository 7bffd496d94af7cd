//! The interactive blocks a chapter places in its text.

mod charts;
mod charts_state;
mod code;
mod config_editor;
mod data_block;
mod data_fetch;
mod data_latitude;
mod deferred;
mod derived_values;
mod estimate;
mod estimate_view;
mod figures;
mod layout_launch;
mod layout_search;
mod layout_search_measure;
mod layout_state;
mod maps_block;
mod maps_legend;
mod maps_rollout;
mod maps_state;
mod picture_view;
mod pipeline;
mod published;
mod quiz;
mod rank_grid;
mod run;
mod run_placement;
mod run_prediction;
mod run_slurm;
mod run_state;
mod run_status;
mod slurm_fields;
mod sweep;
mod sweep_axes;
mod sweep_board;
mod sweep_state;
mod sweep_verdicts;
mod timeline;
mod timeline_drawn;
mod timeline_excerpt;
mod timeline_ops;
mod timeline_recorded;
mod timeline_state;
mod timeline_summary;
mod timeline_view;
mod without_server;

pub use scalebook_page::blocks::{
    BlockSpec, ChartSpec, GridSpec, chart_drawing, config_model, grid_geometry, picture, published_chart, sweep_agreement, sweep_model,
    sweep_scaling, timeline_drawing,
};

use leptos::prelude::*;

pub use self::deferred::Pending;

/// The component a spec asks for: the light blocks every chapter has are drawn at once, the
/// blocks few chapters use when a chapter first shows one (see [`deferred`]).
#[component]
pub fn Block(spec: BlockSpec) -> impl IntoView {
    deferred::block(spec)
}
