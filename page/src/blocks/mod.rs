//! The blocks a chapter places in its text: what a chapter asks for ([`spec`]), the models the
//! components edit and draw, and the geometry of their pictures.

pub mod chart_drawing;
pub mod charts_model;
pub mod config_model;
pub mod figures;
pub mod grid_geometry;
pub mod grid_groups;
pub mod hardware_words;
pub mod latitude_plot;
pub mod layout_search_drawing;
pub mod layout_search_measure;
pub mod layout_search_model;
pub mod maps_model;
pub mod picture;
pub mod profile_summary;
pub mod published_chart;
pub mod rollout_model;
pub mod run_model;
pub mod spec;
pub mod sweep_agreement;
pub mod sweep_model;
pub mod sweep_scaling;
pub mod timeline_drawing;

pub use spec::{BlockSpec, ChartSpec, GridSpec};
