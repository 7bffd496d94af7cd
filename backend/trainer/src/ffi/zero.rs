//! Safe face of `csrc/zero.cpp`: ZeRO's units, whose parameters live in one flat buffer that
//! every dp rank holds a shard of, gathered and released around their use at stage 3.

use std::ffi::c_char;
use std::rc::Rc;

use tch::Tensor;
use torch_sys::C_tensor;

use super::comm::SbGroup;
use super::{ProcessGroup, call};
use crate::Error;

unsafe extern "C" {
    fn sb_set_data(param: *mut C_tensor, source: *mut C_tensor, err: *mut c_char, len: usize) -> i32;
    fn sb_set_grad(param: *mut C_tensor, grad: *mut C_tensor, err: *mut c_char, len: usize) -> i32;
    fn sb_storage_nbytes(t: *const C_tensor) -> u64;
    fn sb_unit_gather(group: *mut SbGroup, full: *mut C_tensor, shard: *mut C_tensor, err: *mut c_char, len: usize) -> i32;
    fn sb_unit_release(full: *mut C_tensor, err: *mut c_char, len: usize) -> i32;
    fn sb_unit_gather_on_backward(
        group: *mut SbGroup,
        x: *mut C_tensor,
        full: *mut C_tensor,
        shard: *mut C_tensor,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        len: usize,
    ) -> i32;
}

/// Makes `param` a view of `source` (its place in a unit's buffer, of its shape) while it stays
/// the same parameter to autograd (`param.data = source` in PyTorch).
pub fn set_data(param: &Tensor, source: &Tensor) -> Result<(), Error> {
    let (mut param, mut source) = (param.shallow_clone(), source.shallow_clone());
    let (p, s) = (param.as_mut_ptr(), source.as_mut_ptr());
    // SAFETY: two live tensors for the duration of the call.
    call("placing a parameter in its ZeRO unit", |err, len| unsafe { sb_set_data(p, s, err, len) })
}

/// Sets `param`'s gradient to `grad` (which backward then accumulates into), or clears it.
pub fn set_grad(param: &Tensor, grad: Option<&Tensor>) -> Result<(), Error> {
    let mut param = param.shallow_clone();
    let mut grad = grad.map(Tensor::shallow_clone);
    let p = param.as_mut_ptr();
    let g = grad.as_mut().map_or(std::ptr::null_mut(), Tensor::as_mut_ptr);
    // SAFETY: a live parameter and a live gradient or null, for the duration of the call.
    call("setting a gradient", |err, len| unsafe { sb_set_grad(p, g, err, len) })
}

/// The bytes of memory `t`'s storage holds now: a released unit's buffer holds none.
pub fn storage_bytes(t: &Tensor) -> u64 {
    let mut t = t.shallow_clone();
    // SAFETY: a live tensor for the duration of the call.
    unsafe { sb_storage_nbytes(t.as_mut_ptr()) }
}

/// One unit's buffer (`full`, the group's size times the shard) and this rank's `shard` of it,
/// over the data-parallel `group`.
pub struct Unit {
    group: Rc<ProcessGroup>,
    pub full: Tensor,
    pub shard: Tensor,
}

impl Unit {
    pub fn new(group: Rc<ProcessGroup>, full: Tensor, shard: Tensor) -> Unit {
        Unit { group, full, shard }
    }

    /// Gathers the buffer from every rank's shard, unless it holds them already.
    pub fn gather(&self) -> Result<(), Error> {
        let (mut full, mut shard) = (self.full.shallow_clone(), self.shard.shallow_clone());
        let (f, s) = (full.as_mut_ptr(), shard.as_mut_ptr());
        // SAFETY: live group and tensors for the duration of the call.
        call(&format!("gathering a ZeRO unit over {}", self.group.name()), |err, len| unsafe {
            sb_unit_gather(self.group.raw(), f, s, err, len)
        })
    }

    /// Releases the buffer's memory: the unit's parameters must not be read until it is gathered.
    pub fn release(&self) -> Result<(), Error> {
        let mut full = self.full.shallow_clone();
        let f = full.as_mut_ptr();
        // SAFETY: a live tensor for the duration of the call.
        call("releasing a ZeRO unit", |err, len| unsafe { sb_unit_release(f, err, len) })
    }

    /// `x` (the output of the block whose parameters are this unit) unchanged, with a node
    /// that gathers the unit again before backward reaches the block.
    pub fn gather_on_backward(&self, x: &Tensor) -> Result<Tensor, Error> {
        let (mut x, mut full, mut shard) = (x.shallow_clone(), self.full.shallow_clone(), self.shard.shallow_clone());
        let (xp, f, s) = (x.as_mut_ptr(), full.as_mut_ptr(), shard.as_mut_ptr());
        let mut out: *mut C_tensor = std::ptr::null_mut();
        // SAFETY: live group (kept by the autograd node only as a pointer: the group outlives
        // every graph, as the model's parallel regions assume too) and live tensors, an out
        // slot and error buffer valid during the call.
        call("ZeRO's pre-backward gather", |err, len| unsafe {
            sb_unit_gather_on_backward(self.group.raw(), xp, f, s, &mut out, err, len)
        })?;
        // SAFETY: on success the shim stored a heap-allocated at::Tensor whose ownership passes here.
        Ok(unsafe { Tensor::from_ptr(out) })
    }
}
