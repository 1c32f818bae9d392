//! Compiles the interop kernels to PTX for sm_80 (every newer GPU JIT-compiles it) and to
//! cubins for sm_80 and sm_90 where `ptxas` is installed.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(Arch::SM_80)
        .cubin_arch(Arch::SM_80)
        .cubin_arch(Arch::SM_90)
        // Every kernel here is launched with `ROW_BLOCK_THREADS` (256) threads a block: the
        // occupancy warning checks that size, not 1024.
        .launch_block_threads(256)
        .run();
}
