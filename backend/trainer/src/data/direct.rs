//! Reading time steps straight from the file, outside libhdf5.
//!
//! libhdf5 serialises every call behind one global lock, so loader threads reading through it
//! take turns, and each read goes through its selection and conversion machinery. The
//! tutorial's files need none of that: `fields` is float32, uncompressed, and either
//! contiguous or chunked one time step per chunk, so a time step is one run of bytes at an
//! offset the file's chunk index (or the contiguous layout) gives once, when the file is
//! opened. After that a crop is one `pread` per channel (or per row, when the crop is narrower
//! than the file), straight into the batch's memory, by any number of threads at once.
//! Anything else (compression, other chunk shapes, big-endian data, chunks never written)
//! returns `None` here and is read through libhdf5 as before.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use hdf5::dataset::Layout;
use hdf5::datatype::ByteOrder;

use crate::ffi::float_bytes_mut;

/// Where each time step of one file's `fields` starts, and the file to `pread` it from.
#[derive(Debug)]
pub(super) struct DirectSteps {
    file: File,
    /// Byte offset of time step t's (C, Hf, Wf) block.
    offsets: Vec<u64>,
    channels: usize,
    /// The file's (Hf, Wf).
    plane: [usize; 2],
}

impl DirectSteps {
    /// The direct reader of `fields` in `path`, or `None` when its storage is not one plain run
    /// of little-endian float32 bytes per time step.
    pub(super) fn probe(path: &Path, fields: &hdf5::Dataset) -> Option<DirectSteps> {
        let &[steps, channels, hf, wf] = fields.shape().as_slice() else { return None };
        if cfg!(target_endian = "big") {
            return None;
        }
        let dtype = fields.dtype().ok()?;
        if dtype.size() != 4 || dtype.byte_order() != ByteOrder::LittleEndian || !fields.filters().is_empty() {
            return None;
        }
        let step_bytes = (channels * hf * wf * 4) as u64;
        let offsets = match fields.layout() {
            Layout::Contiguous => {
                let base = fields.offset()?;
                (0..steps as u64).map(|t| base + t * step_bytes).collect()
            }
            Layout::Chunked if fields.chunk()? == [1, channels, hf, wf] => chunk_offsets(fields, steps, step_bytes)?,
            _ => return None,
        };
        let file = File::open(path).ok()?;
        Some(DirectSteps { file, offsets, channels, plane: [hf, wf] })
    }

    /// Reads the top-left (h, w) crop of time step `step` into `out` (C·h·w values).
    pub(super) fn read(&self, step: usize, [h, w]: [usize; 2], out: &mut [f32]) -> std::io::Result<()> {
        let [hf, wf] = self.plane;
        let start = self.offsets[step];
        let channel_bytes = (hf * wf * 4) as u64;
        if w == wf {
            // Each channel's crop is its first h rows: one run of bytes.
            for (c, values) in out.chunks_exact_mut(h * w).enumerate().take(self.channels) {
                self.file.read_exact_at(float_bytes_mut(values), start + c as u64 * channel_bytes)?;
            }
        } else {
            for (row, values) in out.chunks_exact_mut(w).enumerate() {
                let (c, y) = (row / h, row % h);
                self.file.read_exact_at(float_bytes_mut(values), start + c as u64 * channel_bytes + (y * wf * 4) as u64)?;
            }
        }
        Ok(())
    }
}

/// The file offset of every time step's chunk, from the chunk index; `None` if a chunk is
/// missing (never written: libhdf5 supplies its fill value) or not the expected size.
fn chunk_offsets(fields: &hdf5::Dataset, steps: usize, step_bytes: u64) -> Option<Vec<u64>> {
    if fields.num_chunks()? != steps {
        return None;
    }
    let mut offsets = vec![None; steps];
    for index in 0..steps {
        let chunk = fields.chunk_info(index)?;
        let step = usize::try_from(chunk.offset[0]).ok()?;
        if chunk.size != step_bytes || chunk.filter_mask != 0 || step >= steps {
            return None;
        }
        offsets[step] = Some(chunk.addr);
    }
    offsets.into_iter().collect()
}
