//! Compiles the vLLM ports for the GPU: sm_90 PTX and cubin (native bf16 arithmetic, the FP8
//! conversion instruction), precise math as vLLM builds its kernels (no fast math).

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).run();
}
