//! The CUDA build's C++, compiled here: a machine without CUDA still checks that
//! `csrc/profile.cpp` builds the way the `cuda` feature builds it (with `SCALEBOOK_NVTX`), and
//! `csrc/cuda_memory.cpp`, `csrc/cuda_copy.cpp` and `csrc/cuda_clock.cpp` (built only by that feature), against the
//! same libtorch headers as the CPU build.

use std::process::Command;

/// Checks that `csrc/<file>` compiles with `define` against libtorch's headers and `extra`
/// include directories.
fn compiles(file: &str, define: &str, extra: &[std::path::PathBuf]) {
    let include = std::path::Path::new(env!("SCALEBOOK_LIBTORCH_INCLUDE"));
    let source = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("csrc").join(file);
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(compiler)
        .args(["-std=c++17", "-fsyntax-only", define, "-D_GLIBCXX_USE_CXX11_ABI=1", "-DGLOG_USE_GLOG_EXPORT", "-w"])
        .arg(format!("-I{}", include.display()))
        .arg(format!("-I{}", include.join("torch/csrc/api/include").display()))
        .args(extra.iter().map(|dir| format!("-I{}", dir.display())))
        .arg(source)
        .output()
        .expect("a C++ compiler (the trainer's build uses one)");
    assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_cuda_builds_nvtx_ranges_compile() {
    compiles("profile.cpp", "-DSCALEBOOK_NVTX", &[]);
}

/// The CUDA build's allocator peak (`csrc/cuda_memory.cpp`) and batch copies on their own
/// stream (`csrc/cuda_copy.cpp`) and phases timed by events (`csrc/cuda_clock.cpp`), against the CUDA runtime headers the setup installs beside
/// libtorch.
#[test]
fn the_cuda_builds_allocator_peak_and_copy_stream_compile() {
    let include = std::path::Path::new(env!("SCALEBOOK_LIBTORCH_INCLUDE"));
    // Through the link the setup makes to the wheel's torch/, to the site-packages beside it.
    let real = include.canonicalize().expect("libtorch's include directory");
    let site = real.parent().and_then(std::path::Path::parent).expect("torch/ sits in site-packages");
    for file in ["cuda_memory.cpp", "cuda_copy.cpp", "cuda_clock.cpp"] {
        compiles(file, "-DUSE_CUDA", &[site.join("nvidia/cu13/include")]);
    }
}
