//! Running a test body as the ranks of a layout: the test re-runs its own binary through the
//! launcher (which sets RANK and friends); in a rank the body runs, in the parent the outcome
//! is checked. Not every test file uses every helper.
#![allow(dead_code)]

pub mod optimizer;
pub mod python;
pub mod runs;

use std::time::Duration;

use scalebook_shared::config::TrainConfig;
use scalebook_shared::layout::{Layout, Sizes};
use scalebook_trainer::data::Batch;
use scalebook_trainer::dist::launch::{self, Outcome};
use scalebook_trainer::dist::{Comm, RankEnv};
use tch::{Device, Kind, Tensor};

/// In a rank: `Some(comm)` for `sizes` in `order`. In the parent: launches the ranks of test
/// function `test` (the function itself, so a wrong name does not compile), asserts they all
/// succeeded, and returns `None`.
pub fn ranks<F: Fn()>(test: F, sizes: Sizes, order: &str) -> Option<Comm> {
    let test = test_name(&test);
    let layout = Layout::new(sizes, order).unwrap();
    if std::env::var_os("RANK").is_some() {
        let env = RankEnv::from_env().unwrap();
        return Some(Comm::init(env, layout, Device::Cpu, Duration::from_secs(120)).unwrap());
    }
    let exe = std::env::current_exe().unwrap();
    let args: Vec<String> = [test.as_str(), "--exact", "--nocapture", "--test-threads", "1"].map(String::from).to_vec();
    let outcome = launch::run(&exe, &args, layout.world() as usize, launch::free_port().unwrap()).unwrap();
    assert_eq!(outcome, Outcome::Success, "a rank of {test} failed (its output is above)");
    None
}

/// The name libtest knows a test function by: its path without the crate's name (a test at
/// the top of `tests/dist.rs` is `collectives_over_two_ranks`).
fn test_name<F>(_: &F) -> String {
    let path = std::any::type_name::<F>();
    path.split_once("::").map_or(path, |(_crate, rest)| rest).to_owned()
}

/// A batch of `config`'s shape with irregular values from a formula (not libtorch's shared
/// generator).
pub fn formula_batch(config: &TrainConfig, samples: i64) -> Batch {
    let [h, w] = config.img_size.map(|v| v as i64);
    let shape = [samples, config.n_in_channels as i64, h, w];
    let values =
        |offset: f64| (Tensor::arange(shape.iter().product::<i64>(), (Kind::Float, Device::Cpu)) * 0.37 + offset).sin().reshape(shape);
    Batch { input: values(0.2), target: values(1.3), indices: (0..samples as usize).collect() }
}

/// The largest absolute difference between two tensors.
pub fn max_difference(a: &Tensor, b: &Tensor) -> f64 {
    f64::try_from((a - b).abs().max()).unwrap()
}

/// ‖a − b‖ / ‖b‖ over all elements (the tutorial's test metric).
pub fn relative_error(a: &Tensor, b: &Tensor) -> f64 {
    let diff = f64::try_from((a - b).square().sum(tch::Kind::Double).sqrt()).unwrap();
    let norm = f64::try_from(b.square().sum(tch::Kind::Double).sqrt()).unwrap();
    diff / norm
}

/// The smallest useful config of the project's config file.
pub fn cpu_tiny() -> TrainConfig {
    let text = std::fs::read_to_string(format!("{}/../../config/ViT.yaml", std::env::var("CARGO_MANIFEST_DIR").unwrap())).unwrap();
    scalebook_shared::config::ConfigFile::parse(&text).unwrap().get("cpu_tiny").unwrap()
}
