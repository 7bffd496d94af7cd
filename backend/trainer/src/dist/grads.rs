//! Data-parallel gradient averaging the way DDP does it: gradients packed into large flat
//! buckets (25 MB by default, DDP's `bucket_cap_mb`, after a first bucket of 1 MiB), one
//! all-reduce per bucket instead of one per tensor, then unpacked. With context parallelism
//! the block parameters' gradients are also summed over cp first (each cp rank saw only its
//! share of the tokens).

use tch::{Kind, Tensor};

use crate::Error;
use crate::ffi::{ProcessGroup, ReduceOp};

/// The sizes, in bytes, at which a bucket is closed. DDP closes its first bucket early
/// (`dist._DEFAULT_FIRST_BUCKET_BYTES`, 1 MiB) so that the gradients backward makes first,
/// the last layers', set off at once instead of waiting for a whole `bucket_cap_mb`; every
/// later bucket is closed at the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketCaps {
    pub first: usize,
    pub rest: usize,
}

pub struct GradReducer {
    /// Groups of parameter indices, each closed once it held its cap in float32 gradients.
    buckets: Vec<Vec<usize>>,
}

impl GradReducer {
    /// Buckets `params` in the order given (backward's) as DDP does: a tensor joins the open
    /// bucket, which is closed once it holds at least its cap.
    pub fn new(params: &[Tensor], caps: BucketCaps) -> GradReducer {
        GradReducer { buckets: assign(params.iter().map(|p| p.numel() * 4), caps) }
    }

    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Parameter indices per bucket, in order.
    pub fn buckets(&self) -> &[Vec<usize>] {
        &self.buckets
    }

    /// Reduces the gradients of `params` (in the order given to [`GradReducer::new`]) over
    /// `group` with `op`, in place. A group of one is left alone.
    pub fn reduce(&self, params: &[Tensor], group: &ProcessGroup, op: ReduceOp) -> Result<(), Error> {
        if group.size() == 1 {
            return Ok(());
        }
        tch::no_grad(|| {
            for bucket in &self.buckets {
                let grads: Vec<Tensor> = bucket.iter().map(|&i| params[i].grad()).collect();
                let mut flat = Tensor::cat(&grads.iter().map(|g| g.to_kind(Kind::Float).reshape([-1])).collect::<Vec<_>>(), 0);
                group.all_reduce(&mut flat, op)?;
                let mut offset = 0;
                for mut g in grads {
                    let n = g.numel() as i64;
                    let part = flat.narrow(0, offset, n).view_as(&g).to_kind(g.kind());
                    g.copy_(&part);
                    offset += n;
                }
            }
            Ok(())
        })
    }
}

/// Bucket indices for gradients of `bytes` each, in the order given: a gradient joins the open
/// bucket, which is closed once it holds at least its cap.
fn assign(bytes: impl Iterator<Item = usize>, caps: BucketCaps) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let (mut open, mut held) = (Vec::new(), 0usize);
    for (i, size) in bytes.enumerate() {
        open.push(i);
        held += size;
        let cap = if buckets.is_empty() { caps.first } else { caps.rest };
        if held >= cap {
            buckets.push(std::mem::take(&mut open));
            held = 0;
        }
    }
    if !open.is_empty() {
        buckets.push(open);
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets of float32 gradients of `sizes` elements each.
    fn buckets(sizes: &[usize], caps: BucketCaps) -> Vec<Vec<usize>> {
        assign(sizes.iter().map(|n| n * 4), caps)
    }

    #[test]
    fn a_bucket_closes_once_it_holds_its_cap_and_the_first_cap_applies_once() {
        // A first cap of 40 bytes (10 floats), then 100 (25 floats): [0] reaches 10 floats and
        // closes the first bucket; [1, 2, 3] passes 25 floats with its last tensor; [4] (50)
        // is over the cap alone; [5, 6] is what is left when the tensors run out.
        let caps = BucketCaps { first: 40, rest: 100 };
        assert_eq!(buckets(&[10, 10, 10, 10, 50, 5, 5], caps), vec![vec![0], vec![1, 2, 3], vec![4], vec![5, 6]]);
        // With the first cap as large as the rest, every bucket fills alike.
        let even = BucketCaps { first: 100, rest: 100 };
        assert_eq!(buckets(&[10, 10, 10, 10, 50, 5, 5], even), vec![vec![0, 1, 2], vec![3, 4], vec![5, 6]]);
    }

    /// SC22's U-Net (`networks/UNet.py` of its repository): six 4 × 4 × 4 convolutions down
    /// (4 → 64 → 128 → 256 → 512 → 512 → 512 channels) and six transposed ones up, each taking
    /// the skip connection's channels too, as (in, out) channels in the order backward reaches
    /// them, the last layer first. 117 million parameters.
    const SC22_UNET: [(usize, usize); 12] = [
        (128, 5),
        (256, 64),
        (512, 128),
        (1024, 256),
        (1024, 512),
        (512, 512),
        (512, 512),
        (512, 512),
        (256, 512),
        (128, 256),
        (64, 128),
        (4, 64),
    ];

    /// SC22 counted 8 NCCL calls per step at DDP's default 25 MB and 5 at 100 MB: the U-Net's
    /// gradients bucketed by DDP's rule, a first bucket of 1 MiB included, make exactly those;
    /// without the first bucket they would make 7 and 4.
    #[test]
    fn sc22s_unet_makes_the_all_reduces_sc22_counted() {
        // Each layer's bias, then its kernel, in floats.
        let sizes: Vec<usize> = SC22_UNET.iter().flat_map(|&(i, o)| [o, i * o * 64]).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 116_977_029);
        let count = |first_mb: usize, cap_mb: usize| buckets(&sizes, BucketCaps { first: first_mb << 20, rest: cap_mb << 20 }).len();
        assert_eq!((count(1, 25), count(1, 100)), (8, 5));
        assert_eq!((count(25, 25), count(100, 100)), (7, 4));
    }
}
