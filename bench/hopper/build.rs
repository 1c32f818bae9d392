//! Compiles the Hopper kernels for `sm_90a` (wgmma and setmaxnreg need the arch-specific
//! target; its PTX and cubin run on H100/H200 only).
//!
//! Without integer overflow checks in every profile, as `kernels/hopper/build.rs` explains
//! (ptxas 13.0 crashes on the overflow-checked debug PTX); the root Cargo.toml turns the host
//! build's checks off for this crate too.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90A).overflow_checks(false).run();
}
