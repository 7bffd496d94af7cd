//! torch-sys links libtorch dynamically but leaves no rpath in our binaries, so they would
//! only start with LD_LIBRARY_PATH set. torch-sys (`links = "tch"`) tells dependants where
//! the libraries are; record that directory as the rpath of every binary and test.
fn main() {
    if let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
}
