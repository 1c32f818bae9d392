//! Compiles the Hopper kernels for `sm_90a` (wgmma and setmaxnreg need the arch-specific
//! target; its PTX and cubin run on H100/H200 only).
//!
//! Without integer overflow checks in every profile: ptxas 13.0 crashes (SIGSEGV, no message)
//! on the debug build's overflow-checked sm_90a PTX of these kernels (2026-11-27). The root
//! Cargo.toml turns the host build's checks off for this crate too, so both builds agree (the
//! CPU executor refuses kernels whose two builds disagree about overflow, audit Q11).

//!
//! The attention kernels spill a little (44-168 bytes a thread, outside or at the edge of the
//! main loop; `bench/hopper/tests/ptx.rs` pins what the loop may hold): the consumer
//! warpgroups run under a 168-register cap (`setmaxnreg`), and their speed is measured with
//! those spills (docs/kernels/attention.md). `attention_backward_store_maps` keeps its tensor maps on
//! the stack on purpose (they are written to global memory from there). The GEMM's
//! copy-engine-epilogue kernels (`gemm_bf16_tn_store*`) spill 8-24 bytes of addresses at tile
//! boundaries under the same 168-register compile cap, never in the K loop
//! (`bench/hopper/tests/ptx.rs`, `s16_gemm_copy_engine_epilogue_sass`). So the builder's
//! local-memory warning is for the other kernels (the direct-store GEMMs have none).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(ferrocuda_builder::Arch::SM_90A)
        .overflow_checks(false)
        .local_memory_expected("attention_*")
        .local_memory_expected("gemm_bf16_tn_store*")
        .run();
}
