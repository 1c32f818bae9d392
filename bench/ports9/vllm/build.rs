//! Compiles this crate for the GPU; the host build of the same crate embeds the result.

#[allow(unused_imports)]
use ferrocuda_builder::Arch;

fn main() {
    // vLLM builds without --use_fast_math; sm_90 for the native bf16 instructions on the H200 the bench runs on.
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).run();
}
