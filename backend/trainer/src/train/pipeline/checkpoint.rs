//! A pipelined run's checkpoint is one run's: every stage's tensors (parameters, optimizer
//! state, loss scale) gathered on the first stage, which writes them as one file, with the
//! keys a one-rank run writes. A run then resumes under any pipeline layout (each stage reads
//! its own chunks' tensors by name), and a one-rank checkpoint resumes as a pipeline.

use std::io::Cursor;

use tch::{Device, Kind, Tensor};

use super::Pipeline;
use crate::Error;

/// The tags of a stage's tensors on their way to the first stage (its size, then its bytes),
/// below every activation's and gradient's (whose boundary is at least 1).
const SIZE_TAG: usize = 0;
const BYTES_TAG: usize = 1;

impl Pipeline {
    /// On the first stage: its own `tensors` and every other stage's (a name two stages hold,
    /// as the loss scale, taken once). On the others: `None`, once their tensors have left.
    /// Every stage must call it.
    pub fn gather_to_first(&self, tensors: Vec<(String, Tensor)>) -> Result<Option<Vec<(String, Tensor)>>, Error> {
        let group = self.0.links.group();
        let device = group.device();
        if group.rank() > 0 {
            let mut bytes = Vec::new();
            Tensor::save_multi_to_stream(&tensors, &mut bytes)?;
            let size = Tensor::from_slice(&[bytes.len() as i64]).to_device(device);
            group.send(&size, 0, SIZE_TAG)?.wait()?;
            group.send(&Tensor::from_slice(&bytes).to_device(device), 0, BYTES_TAG)?.wait()?;
            return Ok(None);
        }
        let mut all = tensors;
        for peer in 1..group.size() {
            let mut size = Tensor::zeros([1], (Kind::Int64, device));
            group.recv(&mut size, peer, SIZE_TAG)?;
            let mut bytes = Tensor::zeros([size.int64_value(&[0])], (Kind::Uint8, device));
            group.recv(&mut bytes, peer, BYTES_TAG)?;
            let bytes = Vec::<u8>::try_from(bytes.to_device(Device::Cpu))?;
            for (name, t) in Tensor::load_multi_from_stream(Cursor::new(bytes))? {
                if !all.iter().any(|(n, _)| *n == name) {
                    all.push((name, t));
                }
            }
        }
        Ok(Some(all))
    }
}
