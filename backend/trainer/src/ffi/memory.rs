//! Sharing memory past what tch's types allow: a new batch tensor's values and a float
//! slice's bytes, which the loader fills in place (without them every sample would be copied
//! twice more), and a forward pass run by several threads at once (the training lanes).

use tch::{Device, Kind, Tensor};

use crate::Error;

/// A forward pass that several threads run at once, each on its own slice of a batch (the
/// training lanes hand the model's forward in as a function, so this low module needs no
/// model type).
pub struct SharedForward<'a>(pub &'a (dyn Fn(&Tensor, bool) -> Result<Tensor, Error> + 'a));

// SAFETY: tch marks tensors `!Sync` because a handle could be mutated through `&self` by some
// in-place operations; a forward pass only reads the parameters (every operation creates new
// tensors), and libtorch itself supports concurrent use of the same parameters from several
// threads: reference counts are atomic, and backward passes accumulating into the same
// gradient take that parameter's lock. The function is the model's forward pass and reaches
// nothing else.
unsafe impl Sync for SharedForward<'_> {}

impl SharedForward<'_> {
    pub fn run(&self, x: &Tensor, train: bool) -> Result<Tensor, Error> {
        (self.0)(x, train)
    }
}

/// The values of a contiguous float32 CPU tensor, to fill in place.
pub fn float_values_mut(tensor: &mut Tensor) -> Result<&mut [f32], Error> {
    let (kind, device) = (tensor.kind(), tensor.device());
    if kind != Kind::Float || device != Device::Cpu || !tensor.is_contiguous() {
        return Err(Error::Native {
            what: "filling a batch".into(),
            message: format!("needs a contiguous float32 CPU tensor, got {kind:?} on {device:?}"),
        });
    }
    let len = tensor.numel();
    // SAFETY: the tensor is contiguous float32 on the CPU, so its data pointer addresses `len`
    // initialised-or-not f32 slots (any bit pattern is a valid f32); the exclusive borrow of
    // the tensor handle lasts as long as the slice. Callers pass tensors they just allocated,
    // whose storage no other tensor shares.
    Ok(unsafe { std::slice::from_raw_parts_mut(tensor.data_ptr().cast::<f32>(), len) })
}

/// The bytes of a float slice, to read little-endian floats into it in place.
pub fn float_bytes_mut(values: &mut [f32]) -> &mut [u8] {
    // SAFETY: any byte pattern is a valid f32, the length covers exactly the slice's memory,
    // and the returned borrow keeps the slice exclusively borrowed for its lifetime.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// Keeps freed memory in the process for reuse instead of returning it to the kernel.
///
/// libtorch's CPU allocator has no cache: every step allocates its activations afresh and
/// frees them, and glibc hands large blocks back to the kernel (unmapped, or trimmed off the
/// heap) as soon as they are free, so the next step faults every page in again and the kernel
/// zeroes it: about a hundred thousand page faults per `cpu_short` step, 5-7% of its time.
/// With a fixed mmap threshold at glibc's largest (32 MiB) and a trim threshold of 1 GiB, the
/// blocks stay in the heap between steps; the peak memory is what the step needed anyway.
pub fn keep_freed_memory() {
    use nix::libc::{M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, mallopt};
    // SAFETY: mallopt only changes glibc's allocation thresholds; it is called before any
    // other thread exists, and a refused value leaves glibc's default in place.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
    }
}
