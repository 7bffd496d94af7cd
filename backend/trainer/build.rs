//! Two jobs:
//! - torch-sys links libtorch dynamically but leaves no rpath in our binaries, so they would
//!   only start with LD_LIBRARY_PATH set. torch-sys (`links = "tch"`) tells dependants where
//!   the libraries are; record that directory as the rpath of every binary and test.
//! - compile the C++ shims against the headers of that same libtorch: `csrc/shim.cpp` (the
//!   few tensor calls tch does not expose), `csrc/profile.cpp` (the Kineto profiler and named
//!   ranges), `csrc/recompute.cpp` (activation recomputation), `csrc/comm.cpp` (c10d process
//!   groups and the parallel-region autograd functions), `csrc/reducer.cpp` (DDP's gradient
//!   all-reduce overlapped with backward, and ZeRO's reduce-scatter) and `csrc/zero.cpp` (ZeRO's
//!   parameter units: gathered, released, gathered again before backward) and `csrc/p2p.cpp`
//!   (the pipeline's point-to-point sends and receives).
//!
//! With the `cuda` feature, the ranges are NVTX ranges too, comm.cpp is built with NCCL,
//! `csrc/cuda_memory.cpp` (the caching allocator's peak), `csrc/cuda_copy.cpp` (batches
//! copied on a stream of their own) and `csrc/cuda_clock.cpp` (phases timed by events) are built, and libtorch_cuda is linked even though
//! nothing in Rust names it (the linker's --as-needed would otherwise drop it and CUDA would
//! look unavailable).

use std::path::{Path, PathBuf};

fn main() {
    watch(Path::new("csrc"));
    let lib = PathBuf::from(std::env::var("DEP_TCH_LIBTORCH_LIB").expect("torch-sys reports its libtorch directory"));
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    let include = lib.parent().expect("libtorch's lib/ has a parent").join("include");
    let cuda = std::env::var_os("CARGO_FEATURE_CUDA").is_some();
    // For the test that compiles the CUDA build's NVTX path on a machine without CUDA.
    println!("cargo:rustc-env=SCALEBOOK_LIBTORCH_INCLUDE={}", include.display());

    let mut shim = build(&include, "csrc/shim.cpp");
    shim.file("csrc/profile.cpp").file("csrc/recompute.cpp");
    if cuda {
        shim.define("SCALEBOOK_NVTX", None);
    }
    shim.compile("scalebook_shim");

    let mut comm = build(&include, "csrc/comm.cpp");
    comm.file("csrc/reducer.cpp").file("csrc/zero.cpp").file("csrc/p2p.cpp");
    comm.include("csrc/gloo-stub").define("USE_C10D_GLOO", None);
    if cuda {
        // The wheel's site-packages holds the NVIDIA headers beside torch/.
        let site = site_packages(&lib);
        comm.define("SCALEBOOK_NCCL", None)
            .define("USE_C10D_NCCL", None)
            .define("USE_CUDA", None)
            .include(site.join("nvidia/nccl/include"))
            .include(site.join("nvidia/cu13/include"));
    }
    comm.compile("scalebook_comm");

    if cuda {
        let site = site_packages(&lib);
        let mut memory = build(&include, "csrc/cuda_memory.cpp");
        memory.file("csrc/cuda_copy.cpp").file("csrc/cuda_clock.cpp").define("USE_CUDA", None).include(site.join("nvidia/cu13/include"));
        memory.compile("scalebook_cuda_memory");
    }

    println!("cargo:rustc-link-search=native={}", lib.display());
    if cuda {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,-lc10_cuda,--as-needed");
    }
    println!("cargo:rustc-link-lib=torch_cpu");
    println!("cargo:rustc-link-lib=c10");
}

/// Rebuild when a file under `dir` changes: each file, not the directory, whose own time
/// changes in every new clone although no source did (scalebook.sh gives a clone's unchanged
/// files the times of the build that compiled them, and cargo then compiles nothing again).
fn watch(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("csrc/ is readable") {
        let path = entry.expect("csrc/ lists its entries").path();
        if path.is_dir() {
            watch(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// The site-packages the wheel's torch/ sits in (through a link to it, as the setup makes),
/// where the NVIDIA headers are.
fn site_packages(lib: &Path) -> PathBuf {
    let real = lib.canonicalize().expect("libtorch's lib/ exists");
    real.parent().and_then(Path::parent).expect("torch/ sits in site-packages").to_path_buf()
}

fn build(include: &Path, file: &str) -> cc::Build {
    let mut b = cc::Build::new();
    b.cpp(true)
        .std("c++17")
        .file(file)
        .include(include)
        .include(include.join("torch/csrc/api/include"))
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("GLOG_USE_GLOG_EXPORT", None)
        .flag("-w");
    b
}
