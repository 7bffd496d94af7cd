//! The weather data as people look at it: the 20 ERA5 channels with their units, the
//! latitude of every row and its weight, colour maps, and the weather maps a run draws every
//! epoch (input, target, prediction and error of one validation sample), as PNG images.
//!
//! The trainer draws a run's maps and the server draws a dataset's samples with the same
//! code, so a map in the browser, in the run directory and in TensorBoard look alike.

mod channels;
mod colour;
mod grid;
mod image;
mod maps;
mod samples;

pub use channels::{CHANNELS, Channel, channel_index};
pub use colour::Palette;
pub use grid::{latitude, latitude_weights};
pub use image::{Raster, encode_png};
pub use maps::{
    ERROR_PANEL, Lead, LeadError, MAPPED_CHANNELS, MapEntry, MapIndex, PANELS, Rollout, is_map_file, map_file, map_file_parts, rollout_file,
};
pub use samples::sample_position;
