//! Points in a GPU stream's time (`csrc/cuda_clock.cpp`): events recorded where a phase
//! starts and ends, read once the GPU has passed them, so that timing a phase never makes
//! the host wait. Without the `cuda` feature there is no such point ([`GpuMark::record`]
//! says so), and callers time on the host.

use crate::Error;

/// An event recorded in a GPU's current stream.
pub struct GpuMark(Event);

#[cfg(feature = "cuda")]
type Event = std::ptr::NonNull<cuda::SbMark>;
/// None can be made without CUDA.
#[cfg(not(feature = "cuda"))]
type Event = std::convert::Infallible;

impl GpuMark {
    /// A mark at this point of GPU `device`'s current stream.
    pub fn record(device: usize) -> Result<GpuMark, Error> {
        #[cfg(feature = "cuda")]
        return cuda::record(device).map(GpuMark);
        #[cfg(not(feature = "cuda"))]
        Err(Error::Native { what: format!("timing GPU {device}"), message: "this trainer was built without CUDA".into() })
    }

    /// Seconds of GPU time from this mark to `later`, waiting until the GPU has reached it.
    pub fn seconds_to(&self, later: &GpuMark) -> Result<f64, Error> {
        #[cfg(feature = "cuda")]
        return cuda::elapsed_ms(self.0, later.0).map(|ms| ms / 1000.0);
        #[cfg(not(feature = "cuda"))]
        match later.0 {}
    }
}

#[cfg(feature = "cuda")]
impl Drop for GpuMark {
    fn drop(&mut self) {
        // SAFETY: made by sb_mark_record, freed once, here.
        unsafe { cuda::sb_mark_free(self.0.as_ptr()) }
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::ffi::{c_char, c_int};
    use std::ptr::NonNull;

    use super::super::{call, message};
    use crate::Error;

    #[repr(C)]
    pub struct SbMark {
        _opaque: [u8; 0],
    }

    unsafe extern "C" {
        fn sb_mark_record(device: c_int, err: *mut c_char, len: usize) -> *mut SbMark;
        fn sb_mark_elapsed(earlier: *const SbMark, later: *const SbMark, ms: *mut f64, err: *mut c_char, len: usize) -> c_int;
        pub fn sb_mark_free(mark: *mut SbMark);
    }

    pub fn record(device: usize) -> Result<NonNull<SbMark>, Error> {
        let mut buf = [0 as c_char; 1024];
        let device = c_int::try_from(device).unwrap_or(c_int::MAX);
        // SAFETY: an error buffer valid for the call.
        let mark = unsafe { sb_mark_record(device, buf.as_mut_ptr(), buf.len()) };
        NonNull::new(mark).ok_or_else(|| Error::Native { what: "marking the GPU's stream".into(), message: message(&buf) })
    }

    pub fn elapsed_ms(earlier: NonNull<SbMark>, later: NonNull<SbMark>) -> Result<f64, Error> {
        let mut ms = 0.0;
        // SAFETY: two live marks and an output that outlives the call.
        call("reading the GPU's time", |err, len| unsafe { sb_mark_elapsed(earlier.as_ptr(), later.as_ptr(), &mut ms, err, len) })?;
        Ok(ms)
    }
}
