//! Two things a binary with ferrocuda and candle's cudarc needs from its own build script:
//!
//! - cuFFT by name: cudarc 0.19.10's `dynamic-linking` links the library of every cudarc
//!   feature but `cufft` (ferrocuda-host enables it), so without this line a binary that uses
//!   `ferrocuda_host::cufft` fails to link with "undefined symbol: cufftGetVersion" (and the
//!   rest). A binary that does not use ferrocuda's cuFFT does not need it (`--as-needed`).
//! - where the linker finds the CUDA libraries (or their stubs) when they are not in cudarc's
//!   usual places: `FERROCUDA_CUDA_LINK_DIR` (scripts/check-candle-link.sh sets it).

fn main() {
    println!("cargo:rustc-link-lib=dylib=cufft");
    println!("cargo:rerun-if-env-changed=FERROCUDA_CUDA_LINK_DIR");
    if let Some(dir) = std::env::var_os("FERROCUDA_CUDA_LINK_DIR") {
        println!("cargo:rustc-link-search=native={}", std::path::Path::new(&dir).display());
    }
}
