//! Batches copied to the GPU on a stream of their own (`csrc/cuda_copy.cpp`): started while
//! the step before them computes, waited for by the GPU's compute stream (an event), never by
//! the host. On the CPU, and in builds without CUDA, a batch is simply where it is asked to be.

use tch::{Device, Tensor};

use crate::Error;

/// A tensor on its way to a device (None once finished).
pub struct InFlight(Option<State>);

enum State {
    Ready(Tensor),
    #[cfg(feature = "cuda")]
    Copying(std::ptr::NonNull<cuda::SbCopy>),
}

impl InFlight {
    /// Starts moving `host` to `device`; a GPU copy runs on the copy stream.
    pub fn start(host: &Tensor, device: Device) -> Result<InFlight, Error> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(index) => cuda::start(host, index).map(|copy| InFlight(Some(State::Copying(copy)))),
            _ => Ok(InFlight(Some(State::Ready(host.to_device(device))))),
        }
    }

    /// The tensor on its device, for work queued from now on (which waits for the copy).
    pub fn finish(mut self) -> Result<Tensor, Error> {
        match self.0.take() {
            Some(State::Ready(tensor)) => Ok(tensor),
            #[cfg(feature = "cuda")]
            Some(State::Copying(copy)) => cuda::finish(copy),
            None => unreachable!("finish takes the tensor in flight by value, once"),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        if let Some(State::Copying(copy)) = self.0.take() {
            // SAFETY: made by sb_copy_start and never finished (finish takes it out first).
            unsafe { cuda::sb_copy_free(copy.as_ptr()) }
        }
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::ffi::{c_char, c_int};
    use std::ptr::NonNull;

    use tch::Tensor;
    use torch_sys::C_tensor;

    use super::super::{call, message};
    use crate::Error;

    #[repr(C)]
    pub struct SbCopy {
        _opaque: [u8; 0],
    }

    unsafe extern "C" {
        fn sb_copy_start(host: *const C_tensor, device: c_int, err: *mut c_char, len: usize) -> *mut SbCopy;
        fn sb_copy_finish(copy: *mut SbCopy, out: *mut *mut C_tensor, err: *mut c_char, len: usize) -> c_int;
        pub fn sb_copy_free(copy: *mut SbCopy);
    }

    pub fn start(host: &Tensor, device: usize) -> Result<NonNull<SbCopy>, Error> {
        let mut buf = [0 as c_char; 1024];
        let device = c_int::try_from(device).unwrap_or(c_int::MAX);
        // SAFETY: a live tensor and an error buffer valid for the call.
        let copy = unsafe { sb_copy_start(host.as_ptr(), device, buf.as_mut_ptr(), buf.len()) };
        NonNull::new(copy).ok_or_else(|| Error::Native { what: "copying a batch to the GPU".into(), message: message(&buf) })
    }

    pub fn finish(copy: NonNull<SbCopy>) -> Result<Tensor, Error> {
        let mut out: *mut C_tensor = std::ptr::null_mut();
        // SAFETY: `copy` came from sb_copy_start and is finished once (the shim frees it);
        // `out` outlives the call.
        call("waiting for a batch's copy", |err, len| unsafe { sb_copy_finish(copy.as_ptr(), &mut out, err, len) })?;
        // SAFETY: on success the shim stored a heap-allocated at::Tensor whose ownership passes
        // to the returned Tensor.
        Ok(unsafe { Tensor::from_ptr(out) })
    }
}
