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
        // Session 21: loops with a run-time trip count unrolled by 4 as nvcc's (the batch loop
        // of `wpe_backward_kernel_fixed`: 0.80x -> 1.01x nvcc; RESULTS.md). With LLVM's own
        // limits the first try's rolled loops keep `accum` in local memory, which this vouches for.
        .runtime_unroll(4)
        .local_memory_expected("wpe_backward_kernel")
        .run();
}
