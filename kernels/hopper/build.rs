//! Compiles the Hopper kernels for `sm_90a` (wgmma and setmaxnreg need the arch-specific
//! target; its PTX and cubin run on H100/H200 only).
//!
//! Without integer overflow checks in every profile: ptxas 13.0 crashes (SIGSEGV, no message)
//! on the debug build's overflow-checked sm_90a PTX of these kernels (2026-11-27). The root
//! Cargo.toml turns the host build's checks off for this crate too, so both builds agree (the
//! CPU executor refuses kernels whose two builds disagree about overflow, audit Q11).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90A).overflow_checks(false).run();
}
