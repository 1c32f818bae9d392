//! Compiles this crate to PTX for the GPU (and to cubins where `ptxas` is installed).
//! The host build of the same crate embeds them through `embed_kernels!()`.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        // PTX for sm_80 runs on A100 and every newer GPU (the driver JIT-compiles it); the sm_90
        // build adds what only Hopper has (clusters, distributed shared memory), behind
        // `cfg(ferrocuda_sm = "90")`. CUDA 13 no longer compiles for Volta (sm_70).
        // Cubins (where ptxas is installed) skip the JIT on A100 (sm_80) and H100/H200 (sm_90).
        .arch(ferrocuda_builder::Arch::SM_80)
        .arch(ferrocuda_builder::Arch::SM_90)
        .run();
}
