fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_80).run();
}
