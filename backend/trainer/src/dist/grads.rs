//! Data-parallel gradient averaging the way DDP does it: gradients packed into large flat
//! buckets (25 MB by default, DDP's `bucket_cap_mb`), one all-reduce per bucket instead of
//! one per tensor, then unpacked. With context parallelism the block parameters' gradients
//! are also summed over cp first (each cp rank saw only its share of the tokens).

use tch::{Kind, Tensor};

use crate::Error;
use crate::ffi::{ProcessGroup, ReduceOp};

pub struct GradReducer {
    /// Groups of parameter indices, each at most the bucket size in float32 gradients.
    buckets: Vec<Vec<usize>>,
}

impl GradReducer {
    /// Buckets `params` in order (a tensor larger than a bucket gets a bucket of its own).
    pub fn new(params: &[Tensor], bucket_bytes: usize) -> GradReducer {
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        let mut current = 0usize;
        for (i, p) in params.iter().enumerate() {
            let bytes = p.numel() * 4;
            match buckets.last_mut() {
                Some(bucket) if current + bytes <= bucket_bytes => bucket.push(i),
                _ => {
                    buckets.push(vec![i]);
                    current = 0;
                }
            }
            current += bytes;
        }
        GradReducer { buckets }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_up_to_the_cap_in_order() {
        let sizes = [10usize, 10, 10, 50, 5];
        let params: Vec<Tensor> = sizes.iter().map(|&n| Tensor::zeros([n as i64], (Kind::Float, tch::Device::Cpu))).collect();
        // 100 bytes = 25 floats per bucket: [0, 1] (20), [2] (10, +50 would overflow), [3] (50, alone), [4].
        let r = GradReducer::new(&params, 100);
        assert_eq!(r.buckets, vec![vec![0, 1], vec![2], vec![3], vec![4]]);
    }
}
