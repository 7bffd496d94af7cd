//! The optimizers' test run: three steps on loss = Σ (p · k)² with k = 2, 3, 4, plain or through
//! the fp16 loss scaler, wherever the parameters live.

use scalebook_shared::config::Optimizer as Choice;
use scalebook_trainer::train::amp::GradScaler;
use scalebook_trainer::train::optim::Optimizer;
use tch::{Kind, Tensor};

/// The parameters after three steps of `choice` (`fused` for Adam's multi-tensor kernel).
pub fn three_steps(ps: &[(String, Tensor)], choice: Choice, fused: bool, scaled: bool) -> Vec<Tensor> {
    let device = ps[0].1.device();
    let mut optimizer = Optimizer::new(choice, ps.iter().map(|(n, p)| (n.clone(), p.shallow_clone())).collect(), fused);
    let mut scaler = scaled.then(|| GradScaler::new(device, None));
    for k in 2..5 {
        optimizer.zero_grad();
        let loss =
            ps.iter().map(|(_, p)| (p * f64::from(k)).square().sum(Kind::Float)).fold(Tensor::from(0.0f32).to_device(device), |a, b| a + b);
        match &scaler {
            Some(s) => s.scale(&loss).backward(),
            None => loss.backward(),
        }
        optimizer.step(1e-2, scaler.as_mut()).unwrap();
        if let Some(s) = &mut scaler {
            s.update();
        }
    }
    ps.iter().map(|(_, p)| p.detach()).collect()
}
