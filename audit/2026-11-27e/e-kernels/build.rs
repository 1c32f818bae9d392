fn main() {
    // sm_90: `elect.sync` (warpgroup::elect_one) and `barrier.cluster` need it.
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).run();
}
