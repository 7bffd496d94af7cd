//! The C++ shims' safe faces: the only module of the crate with `unsafe` code. Nothing outside
//! it sees a raw pointer.
#![allow(unsafe_code)]

mod clock;
mod comm;
mod copy;
mod memory;
mod p2p;
mod profiler;
mod recompute;
mod reducer;
mod tensor_ops;
mod zero;

use std::ffi::{CStr, c_char, c_int};

use tch::Tensor;
use torch_sys::C_tensor;

use crate::Error;

pub use clock::GpuMark;
pub use comm::{ProcessGroup, ReduceOp, Region, Store, Traffic};
pub use copy::InFlight;
pub use memory::{SharedForward, float_bytes_mut, float_values_mut, keep_freed_memory};
pub use p2p::Sent;
pub use profiler::{ProfiledThread, Range, Recording};
pub use recompute::{Recomputable, recompute, shared_part};
pub use reducer::OverlappedReducer;
pub use tensor_ops::{
    AdamStep, AdamTensors, backward_with, empty_pinned, fused_adam, gpu_memory_used, gpu_peak_allocated, set_autocast, set_tf32,
    unscale_grads,
};
pub use zero::{Unit, set_data, set_grad, storage_bytes};

/// Runs a shim call with an error buffer and turns a non-zero status into an error.
fn call(what: &str, f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), Error> {
    let mut buf = [0 as c_char; 1024];
    if f(buf.as_mut_ptr(), buf.len()) == 0 {
        return Ok(());
    }
    Err(Error::Native { what: what.to_owned(), message: message(&buf) })
}

/// The text the shim left in an error buffer.
fn message(buf: &[c_char]) -> String {
    // SAFETY: the buffer starts zeroed and the shim NUL-terminates what it writes, so it
    // always holds a C string within its length.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Makes a child process receive SIGKILL when this process dies, however it dies, so ranks
/// started by the launcher never outlive it.
pub fn kill_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls prctl, which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(std::io::Error::from));
    }
}

fn pointers(tensors: &mut [Tensor]) -> Vec<*mut C_tensor> {
    tensors.iter_mut().map(|t| t.as_mut_ptr()).collect()
}
