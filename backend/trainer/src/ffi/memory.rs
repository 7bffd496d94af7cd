//! Views of memory the loader fills in place: a new batch tensor's values, and a float
//! slice's bytes for `pread`. Without them every sample would be copied twice more.

use tch::{Device, Kind, Tensor};

use crate::Error;

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
