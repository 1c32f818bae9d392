//! Compiles the llm.c ports for the GPU: sm_90 PTX and cubin (the H200 they are timed on), with
//! fast math, as llm.c's dev/cuda Makefile builds its kernels (`-O3 --use_fast_math`).

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).fast_math(true).run();
}
