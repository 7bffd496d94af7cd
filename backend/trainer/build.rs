//! Two jobs:
//! - torch-sys links libtorch dynamically but leaves no rpath in our binaries, so they would
//!   only start with LD_LIBRARY_PATH set. torch-sys (`links = "tch"`) tells dependants where
//!   the libraries are; record that directory as the rpath of every binary and test.
//! - compile `csrc/shim.cpp`, the few libtorch calls tch does not expose, against the headers
//!   of that same libtorch.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.cpp");
    let lib = PathBuf::from(std::env::var("DEP_TCH_LIBTORCH_LIB").expect("torch-sys reports its libtorch directory"));
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    let include = lib.parent().expect("libtorch's lib/ has a parent").join("include");
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("csrc/shim.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("GLOG_USE_GLOG_EXPORT", None)
        .flag("-w")
        .compile("scalebook_shim");
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=torch_cpu");
    println!("cargo:rustc-link-lib=c10");
}
