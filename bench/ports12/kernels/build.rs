//! Compiles the ports for the GPU: sm_90 PTX (the FP8 pair conversion and the bf16 arithmetic
//! are single instructions there; the benches run on an H200), precise math (vLLM builds
//! without fast math; the llm.c ports call the `FastMath` methods where nvcc's
//! `--use_fast_math` would apply, docs/performance.md "`--use_fast_math`").

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).run();
}
