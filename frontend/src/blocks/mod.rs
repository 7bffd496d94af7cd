//! The interactive blocks a chapter places in its text.

mod chart_drawing;
mod charts;
mod code;
mod config_editor;
mod config_model;
mod data_block;
mod data_fetch;
mod data_latitude;
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

use self::charts::ChartsBlock;
use self::code::CodeBlock;
use self::config_editor::ConfigEditor;
use self::data_block::DataBlock;
use self::estimate::EstimateBlock;
use self::figures::FigureBlock;
use self::maps_block::MapsBlock;
use self::published::PublishedBlock;
use self::quiz::Quiz;
use self::rank_grid::RankGridBlock;
use self::run::RunBlock;
use self::sweep::SweepBlock;
use self::timeline::TimelineBlock;

/// The component a spec asks for.
#[component]
pub fn Block(spec: BlockSpec) -> impl IntoView {
    match spec {
        BlockSpec::Config { config, dp } => view! { <ConfigEditor config dp /> }.into_any(),
        BlockSpec::Quiz { question, answer } => view! { <Quiz question answer /> }.into_any(),
        BlockSpec::RankGrid(spec) => view! { <RankGridBlock spec /> }.into_any(),
        BlockSpec::Estimate { config, grid, cluster, gpu } => view! { <EstimateBlock config grid cluster gpu /> }.into_any(),
        BlockSpec::Run { config, dp } => view! { <RunBlock config dp /> }.into_any(),
        BlockSpec::Chart(spec) => view! { <ChartsBlock spec /> }.into_any(),
        BlockSpec::Code { path, item, caption } => view! { <CodeBlock path item caption /> }.into_any(),
        BlockSpec::Figure { figure, config, caption } => view! { <FigureBlock figure config caption /> }.into_any(),
        BlockSpec::Published { table, caption } => view! { <PublishedBlock table caption /> }.into_any(),
        BlockSpec::Sweep { config, measure, variants } => view! { <SweepBlock config measure variants /> }.into_any(),
        BlockSpec::Data { config, set, index, channel } => view! { <DataBlock config set index channel /> }.into_any(),
        BlockSpec::Maps { run } => view! { <MapsBlock run /> }.into_any(),
        BlockSpec::Timeline { run } => view! { <TimelineBlock run /> }.into_any(),
    }
}
