//! Compiles the llm.c ports to PTX for sm_90 with fast math (llm.c's Makefile passes
//! `--use_fast_math` to nvcc).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).fast_math(true).run();
}
