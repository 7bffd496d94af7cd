//! The CUDA build's C++, compiled here: a machine without CUDA still checks that
//! `csrc/profile.cpp` builds the way the `cuda` feature builds it (with `SCALEBOOK_NVTX`), and
//! `csrc/cuda_memory.cpp` (built only by that feature), against the same libtorch headers as
//! the CPU build.

use std::process::Command;

#[test]
fn the_cuda_builds_nvtx_ranges_compile() {
    let include = std::path::Path::new(env!("SCALEBOOK_LIBTORCH_INCLUDE"));
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/csrc/profile.cpp");
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(compiler)
        .args(["-std=c++17", "-fsyntax-only", "-DSCALEBOOK_NVTX", "-D_GLIBCXX_USE_CXX11_ABI=1", "-DGLOG_USE_GLOG_EXPORT", "-w"])
        .arg(format!("-I{}", include.display()))
        .arg(format!("-I{}", include.join("torch/csrc/api/include").display()))
        .arg(source)
        .output()
        .expect("a C++ compiler (the trainer's build uses one)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The CUDA build's allocator peak (`csrc/cuda_memory.cpp`), compiled against the same
/// libtorch headers and the CUDA runtime headers the setup installs beside them.
#[test]
fn the_cuda_builds_allocator_peak_compiles() {
    let include = std::path::Path::new(env!("SCALEBOOK_LIBTORCH_INCLUDE"));
    // Through the link the setup makes to the wheel's torch/, to the site-packages beside it.
    let real = include.canonicalize().expect("libtorch's include directory");
    let site = real.parent().and_then(std::path::Path::parent).expect("torch/ sits in site-packages");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/csrc/cuda_memory.cpp");
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(compiler)
        .args(["-std=c++17", "-fsyntax-only", "-DUSE_CUDA", "-D_GLIBCXX_USE_CXX11_ABI=1", "-DGLOG_USE_GLOG_EXPORT", "-w"])
        .arg(format!("-I{}", include.display()))
        .arg(format!("-I{}", site.join("nvidia/cu13/include").display()))
        .arg(source)
        .output()
        .expect("a C++ compiler (the trainer's build uses one)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
