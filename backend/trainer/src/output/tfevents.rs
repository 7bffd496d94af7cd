//! TensorBoard event files, written directly: a TFRecord stream of `Event` protocol buffers
//! holding scalar summaries, which `tensorboard` and its readers open like PyTorch's
//! `SummaryWriter` output. Only the handful of protobuf fields scalars and images need are
//! encoded.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Error;

pub struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventWriter {
    /// Creates `events.out.tfevents.<secs>.<host>.<pid>.0` in `dir` (the name TensorBoard
    /// looks for) and writes the file-version record every event file starts with.
    pub fn create(dir: &Path) -> Result<EventWriter, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
        let name = format!("events.out.tfevents.{}.{}.{}.0", now.as_secs(), host.trim(), std::process::id());
        let path = dir.join(name);
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut writer = EventWriter { path, out: BufWriter::new(file) };
        let mut event = event_header(now.as_secs_f64(), 0);
        put_bytes(&mut event, 3, b"brain.Event:2");
        writer.record(&event)?;
        writer.flush()?;
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one scalar. Call [`EventWriter::flush`] to make it visible to readers.
    pub fn scalar(&mut self, tag: &str, step: u64, value: f32) -> Result<(), Error> {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let mut summary_value = Vec::new();
        put_bytes(&mut summary_value, 1, tag.as_bytes());
        put_key(&mut summary_value, 2, WIRE_FIXED32);
        summary_value.extend_from_slice(&value.to_le_bytes());
        let mut summary = Vec::new();
        put_bytes(&mut summary, 1, &summary_value);
        let mut event = event_header(wall, step);
        put_bytes(&mut event, 5, &summary);
        self.record(&event)
    }

    /// Appends one image (a PNG of `height` × `width` RGB pixels), as `SummaryWriter.add_image`
    /// and `add_figure` do: `Summary.Value.image` (field 4), a `Summary.Image` of height (1),
    /// width (2), colorspace (3: RGB) and the encoded image (4).
    pub fn image(&mut self, tag: &str, step: u64, png: &[u8], height: u32, width: u32) -> Result<(), Error> {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let mut image = Vec::new();
        for (field, value) in [(1, u64::from(height)), (2, u64::from(width)), (3, 3)] {
            put_key(&mut image, field, WIRE_VARINT);
            put_varint(&mut image, value);
        }
        put_bytes(&mut image, 4, png);
        let mut summary_value = Vec::new();
        put_bytes(&mut summary_value, 1, tag.as_bytes());
        put_bytes(&mut summary_value, 4, &image);
        let mut summary = Vec::new();
        put_bytes(&mut summary, 1, &summary_value);
        let mut event = event_header(wall, step);
        put_bytes(&mut event, 5, &summary);
        self.record(&event)
    }

    pub fn flush(&mut self) -> Result<(), Error> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }

    /// TFRecord framing: length, CRC of the length, payload, CRC of the payload.
    fn record(&mut self, payload: &[u8]) -> Result<(), Error> {
        let len = (payload.len() as u64).to_le_bytes();
        let mut frame = Vec::with_capacity(payload.len() + 16);
        frame.extend_from_slice(&len);
        frame.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        frame.extend_from_slice(payload);
        frame.extend_from_slice(&masked_crc32c(payload).to_le_bytes());
        self.out.write_all(&frame).map_err(|e| Error::io(&self.path, e))
    }
}

const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LEN: u64 = 2;
const WIRE_FIXED32: u64 = 5;

/// `Event.wall_time` (field 1, double) and `Event.step` (field 2, int64).
fn event_header(wall: f64, step: u64) -> Vec<u8> {
    let mut event = Vec::new();
    put_key(&mut event, 1, WIRE_FIXED64);
    event.extend_from_slice(&wall.to_le_bytes());
    put_key(&mut event, 2, WIRE_VARINT);
    put_varint(&mut event, step);
    event
}

fn put_key(buf: &mut Vec<u8>, field: u64, wire: u64) {
    put_varint(buf, field << 3 | wire);
}

fn put_bytes(buf: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(buf, field, WIRE_LEN);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// CRC-32C (Castagnoli), masked as TFRecord requires so that CRCs of data containing CRCs
/// stay well distributed.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data).rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_values() {
        // RFC 3720 test vectors and the usual "123456789" check value.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c::crc32c(&[0xffu8; 32]), 0x62a8_ab43);
    }

    #[test]
    fn varints_encode_like_protobuf() {
        let mut b = Vec::new();
        put_varint(&mut b, 300);
        assert_eq!(b, vec![0xac, 0x02]);
    }
}
