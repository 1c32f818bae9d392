//! Compiles the vLLM ports for the GPU as vLLM builds its CUDA: sm_90 (FP8 conversions need
//! sm_89+), without fast math.

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).run();
}
