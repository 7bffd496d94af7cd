//! Distributed training over c10d: where this rank sits ([`RankEnv`]), the process groups of
//! its layout ([`Comm`]), data-parallel gradient averaging ([`GradReducer`]), and the local
//! launcher ([`launch`]).

mod comm;
mod env;
mod grads;
pub mod launch;

pub use comm::Comm;
pub use env::{DEFAULT_MASTER_PORT, RankEnv, first_host};
pub use grads::{BucketCaps, GradReducer};
