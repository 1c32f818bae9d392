fn main() {
    // sm_80 and sm_90 cubins (the H200 runs the sm_90 one), PTX beside them; the kernels launch
    // with at most 256 threads (the occupancy check's block size).
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(ferrocuda_builder::Arch::SM_80)
        .arch(ferrocuda_builder::Arch::SM_90)
        .launch_block_threads(256)
        .run();
}
