fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_80).arch(ferrocuda_builder::Arch::SM_90).run();
}
