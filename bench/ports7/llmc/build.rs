//! Compiles the llm.c ports for sm_90 with nvcc's --use_fast_math, as llm.c builds them.

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).fast_math(true).run();
}
