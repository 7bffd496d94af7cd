//! c10d from `csrc/comm.cpp`: a TCPStore for rendezvous, process groups (Gloo, or NCCL in
//! `cuda` builds), their collectives, and the tutorial's parallel-region operations as autograd
//! functions.

use std::ffi::{CString, c_char, c_int};
use std::ptr::NonNull;
use std::time::Duration;

use tch::{Device, Tensor};
use torch_sys::C_tensor;

use scalebook_shared::profile::ranges;

use super::{Range, call, message};
use crate::Error;

#[repr(C)]
struct SbStore {
    _opaque: [u8; 0],
}

#[repr(C)]
pub(super) struct SbGroup {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn sb_store_connect(
        host: *const c_char,
        port: c_int,
        world: c_int,
        is_master: c_int,
        timeout_ms: i64,
        err: *mut c_char,
        len: usize,
    ) -> *mut SbStore;
    fn sb_store_free(store: *mut SbStore);
    fn sb_group_new(
        store: *mut SbStore,
        name: *const c_char,
        rank: c_int,
        size: c_int,
        nccl: c_int,
        timeout_ms: i64,
        gloo_host: *const c_char,
        err: *mut c_char,
        len: usize,
    ) -> *mut SbGroup;
    fn sb_group_free(group: *mut SbGroup);
    fn sb_group_stats(group: *const SbGroup, seconds: *mut f64, bytes: *mut u64, calls: *mut u64);
    fn sb_all_reduce(group: *mut SbGroup, t: *mut C_tensor, op: c_int, err: *mut c_char, len: usize) -> c_int;
    fn sb_broadcast(group: *mut SbGroup, t: *mut C_tensor, root: c_int, err: *mut c_char, len: usize) -> c_int;
    fn sb_barrier(group: *mut SbGroup, err: *mut c_char, len: usize) -> c_int;
    fn sb_all_gather_flat(group: *mut SbGroup, out: *mut C_tensor, input: *mut C_tensor, err: *mut c_char, len: usize) -> c_int;
    fn sb_reduce_scatter_flat(
        group: *mut SbGroup,
        out: *mut C_tensor,
        input: *mut C_tensor,
        op: c_int,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    fn sb_region(
        group: *mut SbGroup,
        kind: c_int,
        x: *mut C_tensor,
        dim: i64,
        sizes: *const i64,
        n: usize,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn cstring(what: &str, s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Internal { what: what.into(), message: format!("`{s}` contains a NUL byte") })
}

/// The TCPStore every rank meets at (`MASTER_ADDR:MASTER_PORT`); rank 0 serves it.
pub struct Store(NonNull<SbStore>);

impl Store {
    pub fn connect(host: &str, port: u16, world: usize, is_master: bool, timeout: Duration) -> Result<Store, Error> {
        let host_c = cstring("store", host)?;
        let mut buf = [0 as c_char; 1024];
        let world = c_int::try_from(world).unwrap_or(c_int::MAX);
        // SAFETY: valid C string and error buffer for the duration of the call.
        let ptr = unsafe {
            sb_store_connect(
                host_c.as_ptr(),
                c_int::from(port),
                world,
                c_int::from(is_master),
                millis(timeout),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        NonNull::new(ptr).map(Store).ok_or_else(|| Error::Rendezvous { address: format!("{host}:{port}"), message: message(&buf) })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: created by sb_store_connect, freed once here.
        unsafe { sb_store_free(self.0.as_ptr()) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum = 0,
    Avg = 1,
    Max = 2,
}

/// The tutorial's region operations (distributed/mappings.py), each with its backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// Identity forward; gradients summed over the group (input of a column-parallel layer).
    CopyTo = 0,
    /// Sum over the group forward; identity backward (output of a row-parallel layer).
    ReduceFrom = 1,
    /// Keep this rank's chunk forward; all-gather gradients backward (tokens into cp shards).
    ScatterTo = 2,
    /// All-gather forward; keep this rank's chunk backward (cp shards back to the sequence).
    GatherFrom = 3,
    /// All-gather forward; reduce-scatter (sum) backward (K and V over cp).
    AllGatherFrom = 4,
}

impl Region {
    /// The tutorial's name of the operation (its range is `c10d::` and this name).
    fn name(self) -> &'static str {
        match self {
            Region::CopyTo => "copy_to_parallel_region",
            Region::ReduceFrom => "reduce_from_parallel_region",
            Region::ScatterTo => "scatter_to_parallel_region",
            Region::GatherFrom => "gather_from_parallel_region",
            Region::AllGatherFrom => "all_gather_from_parallel_region",
        }
    }
}

/// A group's collectives counted from its start: the time from issuing each to its end, the
/// bytes of their buffers (an all-gather's gathered size), and how many.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    pub seconds: f64,
    pub bytes: u64,
    pub calls: u64,
}

impl std::ops::Sub for Traffic {
    type Output = Traffic;

    fn sub(self, before: Traffic) -> Traffic {
        Traffic { seconds: self.seconds - before.seconds, bytes: self.bytes - before.bytes, calls: self.calls - before.calls }
    }
}

/// One process group: the ranks of one group of one layout token, this process among them.
pub struct ProcessGroup {
    ptr: NonNull<SbGroup>,
    rank: usize,
    size: usize,
    name: String,
    /// Where the collectives run: the CPU (Gloo) or this rank's GPU (NCCL).
    device: Device,
}

impl ProcessGroup {
    /// Joins group `name` (the same name on every member) as `rank` of `size`, over NCCL when
    /// `device` is a GPU and Gloo otherwise. With `gloo_host`, Gloo binds to that address
    /// instead of resolving this machine's hostname.
    pub fn new(
        store: Option<&Store>,
        name: &str,
        rank: usize,
        size: usize,
        device: Device,
        timeout: Duration,
        gloo_host: Option<&str>,
    ) -> Result<ProcessGroup, Error> {
        let name_c = cstring("process group", name)?;
        let host_c = cstring("process group", gloo_host.unwrap_or(""))?;
        let mut buf = [0 as c_char; 1024];
        let (r, s) = (c_int::try_from(rank).unwrap_or(c_int::MAX), c_int::try_from(size).unwrap_or(c_int::MAX));
        let store = store.map_or(std::ptr::null_mut(), |s| s.0.as_ptr());
        // SAFETY: the store is alive (borrowed) or null (allowed for size 1); C strings and
        // buffer valid during the call.
        let ptr = unsafe {
            sb_group_new(
                store,
                name_c.as_ptr(),
                r,
                s,
                c_int::from(device.is_cuda()),
                millis(timeout),
                host_c.as_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| Error::Native { what: format!("process group {name}"), message: message(&buf) })?;
        Ok(ProcessGroup { ptr, rank, size, name: name.to_owned(), device })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The shim's group, for the reducer that issues collectives on it.
    pub(super) fn raw(&self) -> *mut SbGroup {
        self.ptr.as_ptr()
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its transfers run: the CPU (Gloo) or this rank's GPU (NCCL).
    pub fn device(&self) -> Device {
        self.device
    }

    /// What this group's collectives have cost so far (on a GPU the time is only the host's
    /// queueing: the collective itself runs on a stream).
    pub fn traffic(&self) -> Traffic {
        let mut t = Traffic::default();
        // SAFETY: live group; the three outputs are valid for the call.
        unsafe { sb_group_stats(self.ptr.as_ptr(), &mut t.seconds, &mut t.bytes, &mut t.calls) };
        t
    }

    fn what(&self, op: &str) -> String {
        format!("{op} over {}", self.name)
    }

    /// The named range around collective `op` (`all-reduce` is `c10d::all_reduce`).
    fn range(op: &str) -> Range {
        Range::enter(&format!("{}{}", ranges::COLLECTIVE_PREFIX, op.replace('-', "_")))
    }

    /// NCCL carries only tensors on the GPU: a value on the host (a seed, a loss read back, a
    /// memory figure) goes to this group's GPU for the collective and comes back.
    fn on_device(&self, t: &mut Tensor, collective: impl FnOnce(&mut Tensor) -> Result<(), Error>) -> Result<(), Error> {
        if self.size == 1 || !self.device.is_cuda() || t.device() == self.device {
            return collective(t);
        }
        let mut staged = t.to_device(self.device);
        collective(&mut staged)?;
        t.f_copy_(&staged)?;
        Ok(())
    }

    /// In place; the tensor must be contiguous.
    pub fn all_reduce(&self, t: &mut Tensor, op: ReduceOp) -> Result<(), Error> {
        self.on_device(t, |t| {
            let p = t.as_mut_ptr();
            let _range = Self::range("all-reduce");
            // SAFETY: live group and tensor for the duration of the call.
            call(&self.what("all-reduce"), |err, len| unsafe { sb_all_reduce(self.ptr.as_ptr(), p, op as c_int, err, len) })
        })
    }

    /// In place from group rank `root`; the tensor must be contiguous.
    pub fn broadcast(&self, t: &mut Tensor, root: usize) -> Result<(), Error> {
        let root = c_int::try_from(root).unwrap_or(c_int::MAX);
        self.on_device(t, |t| {
            let p = t.as_mut_ptr();
            let _range = Self::range("broadcast");
            // SAFETY: live group and tensor for the duration of the call.
            call(&self.what("broadcast"), |err, len| unsafe { sb_broadcast(self.ptr.as_ptr(), p, root, err, len) })
        })
    }

    /// Every rank's `input` into `out`, in rank order: `out` is contiguous and holds the
    /// group's size times `input`'s elements (ZeRO's gathering of updated shards).
    pub fn all_gather_into(&self, out: &mut Tensor, input: &Tensor) -> Result<(), Error> {
        self.check_flat("all-gather", out.numel() == input.numel() * self.size && out.is_contiguous())?;
        let (mut input, o) = (input.shallow_clone(), out.as_mut_ptr());
        let i = input.as_mut_ptr();
        let _range = Self::range("all-gather");
        // SAFETY: live group and tensors for the duration of the call.
        call(&self.what("all-gather"), |err, len| unsafe { sb_all_gather_flat(self.ptr.as_ptr(), o, i, err, len) })
    }

    /// This rank's chunk of `input` reduced over the group (`Sum` or `Avg`) into `out`:
    /// `input` holds the group's size times `out`'s elements, chunk r going to rank r (ZeRO's
    /// gradient reduction, in place of an all-reduce).
    pub fn reduce_scatter_into(&self, out: &mut Tensor, input: &Tensor, op: ReduceOp) -> Result<(), Error> {
        self.check_flat("reduce-scatter", input.numel() == out.numel() * self.size && out.is_contiguous() && op != ReduceOp::Max)?;
        let (mut input, o) = (input.shallow_clone(), out.as_mut_ptr());
        let i = input.as_mut_ptr();
        let _range = Self::range("reduce-scatter");
        // SAFETY: live group and tensors for the duration of the call.
        call(&self.what("reduce-scatter"), |err, len| unsafe { sb_reduce_scatter_flat(self.ptr.as_ptr(), o, i, op as c_int, err, len) })
    }

    /// The shapes a flat collective needs, or an error naming it.
    fn check_flat(&self, op: &str, ok: bool) -> Result<(), Error> {
        match ok {
            true => Ok(()),
            false => Err(Error::Internal {
                what: self.what(op),
                message: format!("needs a contiguous output and {} equal chunks (sum or average)", self.size),
            }),
        }
    }

    pub fn barrier(&self) -> Result<(), Error> {
        let _range = Self::range("barrier");
        // SAFETY: live group for the duration of the call.
        call(&self.what("barrier"), |err, len| unsafe { sb_barrier(self.ptr.as_ptr(), err, len) })
    }

    // The producer below: SAFETY of its `unsafe` call: the group is alive (borrowed
    // by self), `produce` passes a live tensor, a `sizes` slice of `n` elements, an out slot
    // and an error buffer, all valid for the duration of the call.

    /// A region operation that autograd differentiates through (see [`Region`]).
    pub fn region(&self, kind: Region, x: &Tensor, dim: i64, sizes: &[i64]) -> Result<Tensor, Error> {
        self.produce(
            kind.name(),
            sizes,
            |x_ptr, s, n, out, err, len| unsafe { sb_region(self.ptr.as_ptr(), kind as c_int, x_ptr, dim, s, n, out, err, len) },
            x,
        )
    }

    /// Calls a shim function that produces a new tensor, checking `sizes` covers the group.
    fn produce(
        &self,
        op: &str,
        sizes: &[i64],
        f: impl FnOnce(*mut C_tensor, *const i64, usize, *mut *mut C_tensor, *mut c_char, usize) -> c_int,
        x: &Tensor,
    ) -> Result<Tensor, Error> {
        if !sizes.is_empty() && sizes.len() != self.size {
            return Err(Error::Internal { what: self.what(op), message: format!("{} chunk sizes for {} ranks", sizes.len(), self.size) });
        }
        let mut x = x.shallow_clone();
        let x_ptr = x.as_mut_ptr();
        let _range = Self::range(op);
        let mut out: *mut C_tensor = std::ptr::null_mut();
        call(&self.what(op), |err, len| f(x_ptr, sizes.as_ptr(), sizes.len(), &mut out, err, len))?;
        // SAFETY: on success the shim stored a heap-allocated at::Tensor whose ownership
        // passes to the returned Tensor.
        Ok(unsafe { Tensor::from_ptr(out) })
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: created by sb_group_new, freed once here.
        unsafe { sb_group_free(self.ptr.as_ptr()) }
    }
}
