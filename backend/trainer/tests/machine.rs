//! `scalebook-train machine`: this machine's rates as a step estimate needs them, measured with
//! libtorch and printed as the JSON the server caches.

use std::process::Command;

use scalebook_shared::machine::{MachineModel, WIDTHS};

#[test]
fn the_machine_is_measured_with_one_thread_and_with_every_core() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_scalebook-train")).args(["machine", "--json"]).env("OMP_WAIT_POLICY", "PASSIVE").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let model: MachineModel = serde_json::from_slice(&out.stdout).unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(model.cores, cores);
    let counts: Vec<usize> = model.by_threads.iter().map(|r| r.threads).collect();
    assert_eq!(counts, if cores == 1 { vec![1] } else { vec![1, cores] });
    // Broad bounds, so a busy machine passes: any CPU of this decade multiplies float32
    // matrices at more than 0.5 GFLOP/s and copies more than 0.5 GB/s, and no op costs a
    // millisecond.
    for r in &model.by_threads {
        assert_eq!(r.matmul_gflops.len(), WIDTHS.len());
        assert!(r.matmul_gflops.iter().all(|&g| g > 0.5 && g < 1e5), "{r:?}");
        assert!(r.copy_gb_per_s > 0.5 && r.op_overhead_us > 0.0 && r.op_overhead_us < 1000.0, "{r:?}");
    }
    assert!(model.memory_gb > 0.5 && model.process_baseline_gb > 0.01 && model.process_baseline_gb < model.memory_gb, "{model:?}");
}

/// Busy loops on every core while `f` runs: other work that takes the cores from a measurement.
fn beside_a_cpu_hog<T>(f: impl FnOnce() -> T) -> T {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..std::thread::available_parallelism().unwrap().get())
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let result = f();
    stop.store(true, Ordering::Relaxed);
    hogs.into_iter().for_each(|hog| hog.join().unwrap());
    result
}

#[test]
fn a_measurement_beside_a_cpu_hog_is_not_taken_for_the_machines_rates() {
    let out = beside_a_cpu_hog(|| {
        Command::new(env!("CARGO_BIN_EXE_scalebook-train")).args(["machine", "--json"]).env("OMP_WAIT_POLICY", "PASSIVE").output().unwrap()
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let model: MachineModel = serde_json::from_slice(&out.stdout).unwrap();
    // However the load average lags, the threads had a share of the cores, not all of them.
    let shares: Vec<Option<f64>> = model.by_threads.iter().map(|r| r.cpu_share).collect();
    assert!(shares.iter().all(|s| s.is_some_and(|s| s > 0.0 && s < 0.8)), "{shares:?}");
    let why = model.contention().expect("a measurement beside a CPU hog stood for the machine");
    assert!(why.contains("of their time on the cores") || why.contains("load of"), "{why}");
}
