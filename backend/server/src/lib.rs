//! Scalebook's back-end: the HTTP app that serves the notebook and its API.

pub mod app;
pub mod error;

pub use error::Error;
