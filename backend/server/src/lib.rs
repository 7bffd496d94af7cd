//! Scalebook's back-end: the HTTP app that serves the notebook and its API, the runs it
//! launches and watches, and the live stream of their metrics to every browser.

pub mod account;
pub mod api;
pub mod auth;
pub mod base_path;
pub mod class;
pub mod classroom;
pub mod clock;
pub mod code;
pub mod error;
pub mod executor;
pub mod export;
pub mod gate;
pub mod headers;
pub mod learners;
pub mod limits;
pub mod logdir;
pub mod machine;
pub mod plan;
pub mod predict;
pub mod profiles;
pub mod rate;
pub mod refusal;
pub mod routes;
pub mod runs;
pub mod state;
pub mod static_files;
pub mod store;
pub mod stream;
pub mod token;
pub mod weather;
pub mod wire;
pub mod ws;

pub use error::Error;
