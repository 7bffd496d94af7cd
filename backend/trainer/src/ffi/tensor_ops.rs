//! Safe wrappers over `csrc/shim.cpp`: autocast, TF32, and the fused Adam and GradScaler kernels
//! that tch does not expose.

use std::ffi::{c_char, c_int};

use tch::{Device, Kind, Tensor};
use torch_sys::C_tensor;

use crate::Error;

unsafe extern "C" {
    fn sb_set_autocast(device: c_int, enabled: c_int, dtype: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_set_tf32(enabled: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_backward_with(y: *mut C_tensor, grad: *mut C_tensor, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_gpu_memory_used(device: u32, used: *mut u64, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_empty_pinned(shape: *const i64, ndim: usize, out: *mut *mut C_tensor, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_fused_adam(
        params: *const *mut C_tensor,
        grads: *const *mut C_tensor,
        exp_avgs: *const *mut C_tensor,
        exp_avg_sqs: *const *mut C_tensor,
        steps: *const *mut C_tensor,
        n: usize,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        grad_scale: *mut C_tensor,
        found_inf: *mut C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn sb_unscale_grads(
        grads: *const *mut C_tensor,
        n: usize,
        found_inf: *mut C_tensor,
        inv_scale: *mut C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

use super::{call, pointers};

/// Switches libtorch's autocast for `device`'s type on (computing in `kind`, BFloat16 or
/// Half) or off, for this thread.
pub fn set_autocast(device: Device, enabled: bool, kind: Kind) -> Result<(), Error> {
    let dtype = c_int::from(kind == Kind::Half);
    let device = c_int::from(device.is_cuda());
    // SAFETY: plain values in, error buffer valid for its length.
    call("autocast", |err, len| unsafe { sb_set_autocast(device, c_int::from(enabled), dtype, err, len) })
}

/// Allows or forbids TF32 for float32 matmuls and convolutions on GPUs (no effect on CPU).
pub fn set_tf32(enabled: bool) -> Result<(), Error> {
    // SAFETY: plain value in, error buffer valid for its length.
    call("TF32 switch", |err, len| unsafe { sb_set_tf32(c_int::from(enabled), err, len) })
}

/// Back-propagates from `y` with `grad` as its gradient, into the leaves' gradients: a
/// pipeline stage's backward pass, from the gradient the next stage sent back.
pub fn backward_with(y: &Tensor, grad: &Tensor) -> Result<(), Error> {
    let (mut y, mut grad) = (y.shallow_clone(), grad.shallow_clone());
    let (y, grad) = (y.as_mut_ptr(), grad.as_mut_ptr());
    // SAFETY: two live tensors and an error buffer valid for the call.
    call("backward from a stage's output", |err, len| unsafe { sb_backward_with(y, grad, err, len) })
}

/// GPU `device`'s whole used memory in bytes, read through NVML like the tutorial's memory
/// lines (an error where NVML is not installed).
/// The most bytes GPU `device`'s tensors have held at once (the caching allocator's peak, what
/// PyTorch's `torch.cuda.max_memory_allocated` reports). Only a `cuda` build has it.
pub fn gpu_peak_allocated(device: usize) -> Result<u64, Error> {
    #[cfg(feature = "cuda")]
    {
        unsafe extern "C" {
            fn sb_cuda_peak_allocated(device: c_int, peak: *mut u64, err: *mut c_char, err_len: usize) -> c_int;
        }
        let mut peak = 0u64;
        let device = c_int::try_from(device).unwrap_or(c_int::MAX);
        // SAFETY: `peak` outlives the call; error buffer valid for its length.
        call("GPU peak memory", |err, len| unsafe { sb_cuda_peak_allocated(device, &mut peak, err, len) })?;
        Ok(peak)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(Error::Native {
            what: format!("GPU {device} peak memory"),
            message: "this build has no CUDA; build with --features cuda".into(),
        })
    }
}

pub fn gpu_memory_used(device: usize) -> Result<u64, Error> {
    let mut used = 0u64;
    let device = u32::try_from(device).unwrap_or(u32::MAX);
    // SAFETY: `used` outlives the call; error buffer valid for its length.
    call("GPU memory", |err, len| unsafe { sb_gpu_memory_used(device, &mut used, err, len) })?;
    Ok(used)
}

/// An uninitialised float32 CPU tensor in page-locked memory, for batches bound for a GPU
/// (needs a CUDA build; tch's `pin_memory` would copy the batch once more).
pub fn empty_pinned(shape: &[i64]) -> Result<Tensor, Error> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `shape` is valid for `shape.len()` values and `out` outlives the call; error
    // buffer valid for its length.
    call("pinned batch", |err, len| unsafe { sb_empty_pinned(shape.as_ptr(), shape.len(), &mut out, err, len) })?;
    // SAFETY: on success the shim stored a heap-allocated at::Tensor whose ownership passes
    // to the returned Tensor.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// Adam's per-parameter state, in the layout the fused kernel takes.
pub struct AdamTensors<'a> {
    pub params: &'a mut [Tensor],
    pub grads: &'a mut [Tensor],
    pub exp_avgs: &'a mut [Tensor],
    pub exp_avg_sqs: &'a mut [Tensor],
    pub steps: &'a mut [Tensor],
}

/// Hyper-parameters of one Adam step.
#[derive(Debug, Clone, Copy)]
pub struct AdamStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

/// One fused Adam step over every parameter. With `scale = Some((grad_scale, found_inf))`
/// the kernel unscales the gradients itself and skips the update where an inf was found.
pub fn fused_adam(t: AdamTensors<'_>, h: AdamStep, scale: Option<(&mut Tensor, &mut Tensor)>) -> Result<(), Error> {
    let n = t.params.len();
    let lens = [t.grads.len(), t.exp_avgs.len(), t.exp_avg_sqs.len(), t.steps.len()];
    if lens.iter().any(|&l| l != n) {
        return Err(Error::Internal { what: "fused Adam".into(), message: format!("{n} parameters but state lengths {lens:?}") });
    }
    let (p, g, m, v, s) = (pointers(t.params), pointers(t.grads), pointers(t.exp_avgs), pointers(t.exp_avg_sqs), pointers(t.steps));
    let (scale_ptr, inf_ptr) = match scale {
        Some((scale, inf)) => (scale.as_mut_ptr(), inf.as_mut_ptr()),
        None => (std::ptr::null_mut(), std::ptr::null_mut()),
    };
    // SAFETY: five arrays of `n` live tensor pointers borrowed mutably for the call; the
    // optional scale tensors are live or null, which the shim checks.
    call("fused Adam", |err, len| unsafe {
        sb_fused_adam(
            p.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            s.as_ptr(),
            n,
            h.lr,
            h.beta1,
            h.beta2,
            0.0,
            h.eps,
            scale_ptr,
            inf_ptr,
            err,
            len,
        )
    })
}

/// Multiplies every gradient by `inv_scale` and sets `found_inf` to 1 if any is not finite.
pub fn unscale_grads(grads: &mut [Tensor], found_inf: &mut Tensor, inv_scale: &mut Tensor) -> Result<(), Error> {
    let g = pointers(grads);
    let (inf, inv) = (found_inf.as_mut_ptr(), inv_scale.as_mut_ptr());
    // SAFETY: `g` holds live tensor pointers borrowed mutably for the call; `inf` and `inv`
    // are live single-element tensors.
    call("gradient unscale", |err, len| unsafe { sb_unscale_grads(g.as_ptr(), g.len(), inf, inv, err, len) })
}
