//! The native trainer: a faithful port of the tutorial's ViT weather model training
//! (`train.py` / `train_mp.py`) on libtorch.

pub mod error;
pub mod model;

pub use error::Error;
