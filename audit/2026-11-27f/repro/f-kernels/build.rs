fn main() {
    // sm_90: named barriers are sm_70+, but build as the Hopper kernels are.
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).run();
}
