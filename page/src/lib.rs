//! What the notebook page computes, kept apart from how it is shown: the page (`frontend/`,
//! Leptos components compiled to wasm32) draws these models and geometry, and this crate is
//! built natively too, so all of it is tested by `cargo test` with no browser.
//!
//! - [`chapters`]: the chapter list and a chapter's Markdown read into prose and blocks.
//! - [`markdown`]: Markdown to HTML, with the sources' citations made links.
//! - [`blocks`]: each block's grammar ([`blocks::spec`]) and models (configs, runs, sweeps),
//!   and the geometry of what they draw (charts, rank grids, timelines, figures).
//! - [`classroom`]: following a presenter, the roster and the class panel, as state machines.
//! - [`error`]: why a chapter's block cannot be read.
//! - [`progress`]: how far a run has come and how long it has left.
//! - [`requests`]: the page's requests matched to their answers.
//! - [`runs`]: a run's stream of points and log lines, and whose a run is.
//! - [`units`]: numbers and times as the page writes them.

pub mod blocks;
pub mod chapters;
pub mod classroom;
pub mod error;
pub mod markdown;
pub mod placement;
pub mod prediction;
pub mod progress;
pub mod requests;
pub mod runs;
pub mod units;
