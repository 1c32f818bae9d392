//! Builds the kernel for sm_80 (PTX, JIT-compiled by newer GPUs), as the workspace's kernel crates.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_80).run();
}
