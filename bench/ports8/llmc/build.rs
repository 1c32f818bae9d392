//! Compiles the kernels for sm_90 (the lent H200) and to an sm_90 cubin where `ptxas` is
//! installed: one device build, as the docs advise for the GPUs one runs on.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(Arch::SM_90)
        .cubin_arch(Arch::SM_90)
        // llm.c's Makefile builds with `--use_fast_math`: its twins too, so the port does.
        .fast_math(true)
        .launch_block_threads(256)
        // The first try of `wpe_backward_kernel` is kept as written: its rolled loops keep
        // `accum` in local memory (the warning this vouches for); `wpe_backward_kernel_fixed`
        // is the fix (RESULTS.md).
        .local_memory_expected("wpe_backward_kernel")
        .run();
}
