//! The native trainer: a faithful port of the tutorial's ViT weather model training
//! (`train.py` / `train_mp.py`) on libtorch.

pub mod data;
pub mod dist;
pub mod error;
pub mod ffi;
pub mod model;
pub mod output;
pub mod parallel;
pub mod train;

pub use error::Error;
