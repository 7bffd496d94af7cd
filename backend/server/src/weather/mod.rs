//! The weather behind the data and maps blocks: one channel of one dataset sample drawn on
//! request ([`sample`], read from the HDF5 files by [`dataset`]), and the maps a run's trainer
//! draws every epoch ([`maps`]). Colours, channels and latitude weights come from `shared`, so
//! these pictures match the trainer's.

mod dataset;
pub mod maps;
pub mod sample;
