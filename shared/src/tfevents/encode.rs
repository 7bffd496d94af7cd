//! Writing events: each function returns one framed record, ready to append to an event file.
//! The trainer's writer and the shipped baseline file both come from here, so there is one
//! encoder and one framing in the project, checked by the reader beside it.

use super::record::frame;
use super::wire::{put_bytes, put_double, put_float, put_varint_field};

/// What every event file's first record says.
pub const FILE_VERSION: &str = "brain.Event:2";

/// `Summary.Image.colorspace` of an RGB picture.
const RGB: u64 = 3;

/// The record every event file starts with: the file's version at `wall_time`.
pub fn file_version_record(wall_time: f64) -> Vec<u8> {
    let mut event = event_header(wall_time, 0);
    put_bytes(&mut event, 3, FILE_VERSION.as_bytes());
    frame(&event)
}

/// One scalar, as PyTorch's `SummaryWriter.add_scalar` writes it: `Summary.Value.simple_value`.
pub fn scalar_record(wall_time: f64, step: u64, tag: &str, value: f32) -> Vec<u8> {
    let mut summary_value = Vec::new();
    put_bytes(&mut summary_value, 1, tag.as_bytes());
    put_float(&mut summary_value, 2, value);
    summary_record(wall_time, step, &summary_value)
}

/// One PNG of `height` × `width` RGB pixels, as `SummaryWriter.add_image` writes it:
/// `Summary.Value.image`, a `Summary.Image` of height (1), width (2), colorspace (3) and the
/// encoded image (4).
pub fn image_record(wall_time: f64, step: u64, tag: &str, png: &[u8], height: u32, width: u32) -> Vec<u8> {
    let mut image = Vec::new();
    put_varint_field(&mut image, 1, u64::from(height));
    put_varint_field(&mut image, 2, u64::from(width));
    put_varint_field(&mut image, 3, RGB);
    put_bytes(&mut image, 4, png);
    let mut summary_value = Vec::new();
    put_bytes(&mut summary_value, 1, tag.as_bytes());
    put_bytes(&mut summary_value, 4, &image);
    summary_record(wall_time, step, &summary_value)
}

/// An event holding a summary of one value.
fn summary_record(wall_time: f64, step: u64, summary_value: &[u8]) -> Vec<u8> {
    let mut summary = Vec::new();
    put_bytes(&mut summary, 1, summary_value);
    let mut event = event_header(wall_time, step);
    put_bytes(&mut event, 5, &summary);
    frame(&event)
}

/// `Event.wall_time` (field 1, double) and `Event.step` (field 2, int64).
fn event_header(wall_time: f64, step: u64) -> Vec<u8> {
    let mut event = Vec::new();
    put_double(&mut event, 1, wall_time);
    put_varint_field(&mut event, 2, step);
    event
}
