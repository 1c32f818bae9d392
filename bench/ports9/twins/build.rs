//! Compiles this crate for the GPU; the host build of the same crate embeds the result.

#[allow(unused_imports)]
use ferrocuda_builder::Arch;

fn main() {
    // the stubs have empty bodies; the default build is enough (nothing of it runs: the twins' cubin is nvcc's).
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).run();
}
