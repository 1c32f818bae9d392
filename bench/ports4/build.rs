//! vLLM's kernels, built as vLLM builds them: sm_90, no fast math.
use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).run();
}
