//! Safe face of `csrc/recompute.cpp`: activation recomputation (checkpointing) of a part of
//! the model.

use std::ffi::{c_char, c_int, c_void};
use std::mem::ManuallyDrop;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use tch::Tensor;
use torch_sys::C_tensor;

use crate::Error;

type PartRun = unsafe extern "C" fn(*const c_void, *mut C_tensor, *mut *mut C_tensor, *mut c_char, usize) -> c_int;
type PartRelease = unsafe extern "C" fn(*const c_void);

unsafe extern "C" {
    fn sb_recompute(
        x: *mut C_tensor,
        part: *const c_void,
        run: PartRun,
        release: PartRelease,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

use super::call;

/// A part of the model whose forward pass can be run again in backward: a transformer block.
pub trait Recomputable: 'static {
    /// The part's training forward pass.
    fn run(&self, x: &Tensor) -> Result<Tensor, Error>;
}

/// A part shared with the autograd graphs that will run it again. The count is atomic because
/// a graph can be freed on the autograd engine's thread (on a GPU), though the part itself
/// is only ever read there, as [`super::SharedForward`] explains.
pub fn shared_part<P: Recomputable>(part: P) -> Arc<P> {
    Arc::new(part)
}

/// `part`'s output for `x`, keeping none of its activations: backward runs `part` again on
/// the saved input, with the same random state and autocast setting, and back-propagates
/// through that. The autograd graph holds its own reference to `part`, so a graph kept past
/// the model cannot reach a dropped part.
pub fn recompute<P: Recomputable>(part: &Arc<P>, x: &Tensor) -> Result<Tensor, Error> {
    let handle = Arc::into_raw(Arc::clone(part)).cast::<c_void>();
    let mut x = x.shallow_clone();
    let x_ptr = x.as_mut_ptr();
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: a live tensor, a handle from Arc::into_raw whose ownership passes to the shim
    // (which releases it through `release::<P>` exactly once, also on failure), functions
    // matching the shim's types, and out and error buffers valid during the call.
    call("recomputation", |err, len| unsafe { sb_recompute(x_ptr, handle, run::<P>, release::<P>, &mut out, err, len) })?;
    // SAFETY: on success the shim stored a heap-allocated at::Tensor whose ownership passes here.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// The shim's call of the part, in the forward pass and again in backward (possibly on the
/// autograd engine's thread: libtorch supports reading the same parameters from several
/// threads, as [`super::SharedForward`] explains).
unsafe extern "C" fn run<P: Recomputable>(
    handle: *const c_void,
    x: *mut C_tensor,
    out: *mut *mut C_tensor,
    err: *mut c_char,
    len: usize,
) -> c_int {
    // SAFETY: the handle came from Arc::into_raw of an Arc<P> that the shim still holds.
    let part = unsafe { &*handle.cast::<P>() };
    // SAFETY: a live at::Tensor the shim owns; this makes a second handle to it.
    let x = unsafe { Tensor::clone_from_ptr(x) };
    let message = match std::panic::catch_unwind(AssertUnwindSafe(|| part.run(&x))) {
        Ok(Ok(mut y)) => {
            let y_ptr = y.as_mut_ptr();
            let _owned_by_the_shim = ManuallyDrop::new(y);
            // SAFETY: `out` is the shim's slot, valid during the call; it takes the tensor.
            unsafe { *out = y_ptr };
            return 0;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => "the recomputed part panicked".to_owned(),
    };
    let bytes = message.as_bytes();
    let n = bytes.len().min(len.saturating_sub(1));
    // SAFETY: the shim's error buffer holds `len` bytes; at most len - 1 are written, then NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), err, n);
        *err.add(n) = 0;
    }
    1
}

/// The shim's release of its reference to the part.
unsafe extern "C" fn release<P: Recomputable>(handle: *const c_void) {
    // SAFETY: the handle came from Arc::into_raw of an Arc<P>; the shim releases it once.
    drop(unsafe { Arc::from_raw(handle.cast::<P>()) });
}
