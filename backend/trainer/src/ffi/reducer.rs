//! Safe face of `csrc/reducer.cpp`: DDP's gradient all-reduce, overlapped with backward.

use std::ffi::{c_char, c_int};
use std::ptr::NonNull;
use std::rc::Rc;

use tch::Tensor;
use torch_sys::C_tensor;

use super::comm::SbGroup;
use super::{ProcessGroup, call, message, pointers};
use crate::Error;

#[repr(C)]
struct SbReducer {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn sb_reducer_new(
        group: *mut SbGroup,
        params: *const *mut C_tensor,
        bucket_of: *const usize,
        n: usize,
        buckets: usize,
        err: *mut c_char,
        err_len: usize,
    ) -> *mut SbReducer;
    fn sb_reducer_free(reducer: *mut SbReducer);
    fn sb_reducer_arm(reducer: *mut SbReducer, firings: usize);
    fn sb_reducer_scatter(
        reducer: *mut SbReducer,
        shards: *const *mut C_tensor,
        release: *const *mut C_tensor,
        n: usize,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    fn sb_reducer_finish(reducer: *mut SbReducer, average: c_int, early: *mut usize, err: *mut c_char, err_len: usize) -> i32;
}

/// Hooks on the parameters' gradient accumulators that issue each bucket's all-reduce as soon
/// as backward has produced all of its gradients, in bucket order.
pub struct OverlappedReducer {
    ptr: NonNull<SbReducer>,
    /// The reducer issues collectives on the group: it keeps it alive.
    _group: Rc<ProcessGroup>,
}

impl OverlappedReducer {
    /// A reducer of `params` over `group`; `buckets` lists parameter indices per bucket, in the
    /// order their all-reduces are issued (the order backward fills them).
    pub fn new(group: Rc<ProcessGroup>, params: &[Tensor], buckets: &[Vec<usize>]) -> Result<OverlappedReducer, Error> {
        let mut bucket_of = vec![usize::MAX; params.len()];
        for (b, members) in buckets.iter().enumerate() {
            for &i in members {
                bucket_of[i] = b;
            }
        }
        let mut params: Vec<Tensor> = params.iter().map(Tensor::shallow_clone).collect();
        let ptrs = pointers(&mut params);
        let mut buf = [0 as c_char; 1024];
        // SAFETY: a live group (kept by the returned reducer), `n` live tensors and `n` bucket
        // indices (the shim checks their range), an error buffer of its length.
        let ptr = unsafe {
            sb_reducer_new(group.raw(), ptrs.as_ptr(), bucket_of.as_ptr(), ptrs.len(), buckets.len(), buf.as_mut_ptr(), buf.len())
        };
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| Error::Native { what: format!("gradient reducer over {}", group.name()), message: message(&buf) })?;
        Ok(OverlappedReducer { ptr, _group: group })
    }

    /// Makes every bucket a ZeRO unit: bucket b's gradients are reduce-scattered into
    /// `shards[b]` (this rank's chunk of the average, added to what it holds) and the
    /// parameters' own gradients let go; with `release`, also that unit's gathered parameters
    /// once its gradients are issued (stage 3).
    pub fn scatter(&self, shards: &[Tensor], release: Option<&[Tensor]>) -> Result<(), Error> {
        let mut shards: Vec<Tensor> = shards.iter().map(Tensor::shallow_clone).collect();
        let shard_ptrs = pointers(&mut shards);
        let mut release: Option<Vec<Tensor>> = release.map(|r| r.iter().map(Tensor::shallow_clone).collect());
        let release_ptrs = release.as_mut().map(|r| pointers(r));
        if release_ptrs.as_ref().is_some_and(|r| r.len() != shard_ptrs.len()) {
            return Err(Error::Internal { what: "ZeRO's reducer".into(), message: "one buffer to release per unit".into() });
        }
        let release_ptr = release_ptrs.as_ref().map_or(std::ptr::null(), |r| r.as_ptr());
        // SAFETY: live reducer; `n` live shard tensors and, when given, `n` live buffers, which
        // the reducer keeps its own references to; an error buffer of its length.
        call("ZeRO's reducer", |err, len| unsafe {
            sb_reducer_scatter(self.ptr.as_ptr(), shard_ptrs.as_ptr(), release_ptr, shard_ptrs.len(), err, len)
        })
    }

    /// Arms the hooks for the next backward pass, in which every gradient is complete after
    /// `firings` accumulations (one per thread back-propagating a slice of the batch).
    pub fn arm(&self, firings: usize) {
        // SAFETY: live reducer.
        unsafe { sb_reducer_arm(self.ptr.as_ptr(), firings) }
    }

    /// Issues what backward did not, waits for all of it and writes the sums (averages when
    /// `average`) back into the gradients. Returns how many buckets backward issued.
    pub fn finish(&self, average: bool) -> Result<usize, Error> {
        let mut early = 0usize;
        // SAFETY: live reducer, out slot and error buffer valid during the call.
        call("overlapped gradient all-reduce", |err, len| unsafe {
            sb_reducer_finish(self.ptr.as_ptr(), c_int::from(average), &mut early, err, len)
        })?;
        Ok(early)
    }
}

impl Drop for OverlappedReducer {
    fn drop(&mut self) {
        // SAFETY: created by sb_reducer_new, freed once here.
        unsafe { sb_reducer_free(self.ptr.as_ptr()) }
    }
}
