//! llm.c's kernels, built as llm.c builds them: sm_90, `--use_fast_math`.
use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).fast_math(true).run();
}
