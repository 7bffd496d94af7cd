//! Scalebook's single source of truth for everything the browser, the server and the trainer
//! must agree on. No I/O lives here, so the same code compiles to wasm32 for the browser and
//! natively for the back-end.

pub mod chapter;
pub mod charts;
pub mod cluster;
pub mod config;
pub mod edition;
pub mod error;
pub mod estimate;
pub mod launch;
pub mod layout;
pub mod machine;
pub mod metrics;
pub mod numbers;
pub mod pipeline;
pub mod profile;
pub mod program;
pub mod protocol;
pub mod published;
pub mod rundir;
pub mod search;
pub mod sweep;
pub mod tfevents;
pub mod weather;

pub use error::{Error, Problem, Problems, excerpt};
