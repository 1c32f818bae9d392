//! Where the linker finds the CUDA libraries (or scripts/cuda-link-stubs.sh's stubs) when
//! they are not in cudarc's usual places: `FERROCUDA_CUDA_LINK_DIR`
//! (scripts/check-candle-ops.sh sets it). Only candle's CUDA backend links them.

fn main() {
    println!("cargo:rerun-if-env-changed=FERROCUDA_CUDA_LINK_DIR");
    if let Some(dir) = std::env::var_os("FERROCUDA_CUDA_LINK_DIR") {
        println!("cargo:rustc-link-search=native={}", std::path::Path::new(&dir).display());
    }
}
