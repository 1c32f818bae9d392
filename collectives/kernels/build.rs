//! Compiles the peer kernels to PTX (sm_80 and newer; cubins for sm_90 where ptxas exists).
//!
//! `one_shot_all_reduce_f32` keeps its table of the ranks' staging pointers (up to 8) on the
//! stack on purpose: it is indexed by the run-time rank, so it cannot live in registers.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(ferrocuda_builder::Arch::SM_80)
        .arch(ferrocuda_builder::Arch::SM_90)
        .local_memory_expected("one_shot_all_reduce_f32")
        // `PeerRank::all_reduce` launches 512-thread blocks (`THREADS`): the occupancy warning
        // checks that size, not 1024 (the G20R-1 checks took the kernel to 35 registers, which
        // at 1024 threads would fit one block per SM; at 512 three fit).
        .launch_block_threads(512)
        .run();
}
