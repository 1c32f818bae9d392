//! Compiles this crate to PTX for the GPU (and to cubins where `ptxas` is installed).
//! The host build of the same crate embeds them through `embed_kernels!()`.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        // PTX for sm_70 runs on every GPU from Volta on (the driver JIT-compiles it);
        // cubins (where ptxas is installed) skip the JIT on A100 (sm_80) and H100/H200 (sm_90).
        .arch(ferrocuda_builder::Arch::SM_70)
        .cubin_arch(ferrocuda_builder::Arch::SM_80)
        .cubin_arch(ferrocuda_builder::Arch::SM_90)
        .run();
}
