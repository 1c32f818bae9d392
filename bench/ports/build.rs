//! Compiles the ported kernels to PTX for sm_90 (the H100/H200 they are measured on), as a
//! user's kernel crate does.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).run();
}
