//! Compiles the ports for the GPU: sm_90 PTX (the FP8 pair conversion and the bf16 arithmetic
//! are single instructions there; the benches run on an H200), precise math (vLLM builds
//! without fast math; the llm.c ports call the `FastMath` methods where nvcc's
//! `--use_fast_math` would apply, docs/performance.md "`--use_fast_math`").

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    // The bench launches most kernels with 256-thread blocks (llm.c's and vLLM's sizes here):
    // the occupancy check looks at that size (no cap on the registers).
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).launch_block_threads(256).run();
}
