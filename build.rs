//! Compiles the example kernels (`gpu-kernels/src/`, this package's library) to PTX for the
//! GPU, and to cubins where `ptxas` is installed. The main job (`src/main.rs`) and the
//! benchmarks embed them through `embed_kernels!()`. A kernel crate of your own has the same
//! build script (README.md, "Your own kernel crate").

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        // One device build: PTX for sm_80 runs on A100 and every newer GPU (the driver
        // JIT-compiles it; CUDA 13 no longer compiles for Volta, sm_70). Cubins (where ptxas
        // is installed) skip the JIT on A100 (sm_80) and H100/H200 (sm_90).
        .arch(Arch::SM_80)
        .cubin_arch(Arch::SM_80)
        .cubin_arch(Arch::SM_90)
        // Launched with 256-thread blocks (gpu-kernels/src/twins/cases/partitions.rs), where
        // its 39 registers fit six blocks per SM: the occupancy warning's 1024-thread cliff
        // does not apply (docs/performance.md, "registers and occupancy").
        .occupancy_expected("rms_norm_warp_rows")
        .run();
}
