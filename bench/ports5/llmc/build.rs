//! Compiles the llm.c ports for the GPU as llm.c's Makefile compiles its CUDA: sm_90, with
//! `--use_fast_math` (`fast_math(true)`).

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).fast_math(true).run();
}
