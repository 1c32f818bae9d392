//! The device build checks integer overflow, as the host build of this crate does (the root
//! `Cargo.toml` sets `overflow-checks = true` for it in every profile): the CPU executor and a
//! GPU then both panic at an overflow (audit 2026-11-27b, Q11).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_80).overflow_checks(true).run();
}
