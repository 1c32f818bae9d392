//! Compiles the vLLM ports to PTX for sm_90, without fast math (vLLM builds without it).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).run();
}
