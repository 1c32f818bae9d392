//! Compiles this crate for the GPU; the host build of the same crate embeds the result
//! (options: templates/kernel-crate/build.rs).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).run();
}
