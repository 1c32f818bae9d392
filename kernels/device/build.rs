//! Compiles the library's kernels to PTX (sm_80 and newer; cubins for sm_90 where ptxas exists).

fn main() {
    // The library launches its kernels without launch bounds at 256 threads (`BLOCK`): the
    // occupancy warning checks that size.
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(ferrocuda_builder::Arch::SM_80)
        .arch(ferrocuda_builder::Arch::SM_90)
        .launch_block_threads(256)
        .run();
}
