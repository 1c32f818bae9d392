fn main() {
    // sm_90 (the H200), PTX beside it; launched with 256 threads a block.
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).launch_block_threads(256).run();
}
