//! Compiles the llm.c ports for sm_90 with nvcc's --use_fast_math, as llm.c builds them.

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(Arch::SM_90)
        .fast_math(true)
        // Launched with llm.c's 8 warps (256 threads) a block, where its 40 registers fit 6
        // blocks per SM: the occupancy warning's 1024-thread cliff does not apply.
        .occupancy_expected("fused_residual_forward_kernel5_fixed")
        .run();
}
