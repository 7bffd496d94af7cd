//! Point-to-point transfers from `csrc/p2p.cpp`: a pipeline stage sends its output to the next
//! stage and its input's gradient to the one before, over the pipeline's process group.
//!
//! A send returns at once ([`Sent`], to wait for before its tensor may change or the step
//! ends): a stage goes on with its next pass while its output travels, as every schedule
//! assumes. A receive waits, since the pass that needs it cannot start without it. Each
//! message carries a tag naming what it is (Gloo matches by it; NCCL matches in issue order).

use std::ffi::{c_char, c_int};
use std::ptr::NonNull;

use scalebook_shared::profile::ranges;
use tch::Tensor;
use torch_sys::C_tensor;

use super::comm::SbGroup;
use super::{ProcessGroup, Range, call};
use crate::Error;

#[repr(C)]
struct SbSent {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn sb_send(
        group: *mut SbGroup,
        t: *mut C_tensor,
        peer: c_int,
        tag: c_int,
        out: *mut *mut SbSent,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    fn sb_sent_wait(sent: *mut SbSent, err: *mut c_char, len: usize) -> c_int;
    fn sb_sent_free(sent: *mut SbSent);
    fn sb_recv(group: *mut SbGroup, t: *mut C_tensor, peer: c_int, tag: c_int, err: *mut c_char, len: usize) -> c_int;
}

/// A send under way; the shim keeps its tensor alive until it is freed.
pub struct Sent {
    ptr: NonNull<SbSent>,
    what: String,
}

impl std::fmt::Debug for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

impl Sent {
    /// Waits until the tensor has left this rank.
    pub fn wait(self) -> Result<(), Error> {
        let ptr = self.ptr.as_ptr();
        // SAFETY: a live send (freed only on drop, after this), an error buffer for the call.
        call(&self.what, |err, len| unsafe { sb_sent_wait(ptr, err, len) })
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        // SAFETY: created by sb_send, freed once here.
        unsafe { sb_sent_free(self.ptr.as_ptr()) }
    }
}

fn c(value: usize) -> c_int {
    c_int::try_from(value).unwrap_or(c_int::MAX)
}

impl ProcessGroup {
    /// Issues the send of `t` (contiguous, on this group's device) to group rank `peer` under
    /// `tag`, and returns without waiting for it.
    pub fn send(&self, t: &Tensor, peer: usize, tag: usize) -> Result<Sent, Error> {
        let what = format!("send to rank {peer} of {}", self.name());
        let mut t = t.shallow_clone();
        let p = t.as_mut_ptr();
        let mut out: *mut SbSent = std::ptr::null_mut();
        let _range = Range::enter(&format!("{}send", ranges::COLLECTIVE_PREFIX));
        // SAFETY: live group and tensor for the call (the shim keeps its own reference to the
        // tensor), an out slot and an error buffer.
        call(&what, |err, len| unsafe { sb_send(self.raw(), p, c(peer), c(tag), &mut out, err, len) })?;
        let ptr = NonNull::new(out).ok_or_else(|| Error::Internal { what: what.clone(), message: "the shim returned no send".into() })?;
        Ok(Sent { ptr, what })
    }

    /// Receives into `t` (contiguous, of the sent shape and type) from group rank `peer` what
    /// it sent under `tag`, waiting for it.
    pub fn recv(&self, t: &mut Tensor, peer: usize, tag: usize) -> Result<(), Error> {
        let what = format!("receive from rank {peer} of {}", self.name());
        let p = t.as_mut_ptr();
        let _range = Range::enter(&format!("{}recv", ranges::COLLECTIVE_PREFIX));
        // SAFETY: live group and tensor for the duration of the call, an error buffer.
        call(&what, |err, len| unsafe { sb_recv(self.raw(), p, c(peer), c(tag), err, len) })
    }
}
