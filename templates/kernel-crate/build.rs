//! Compiles this crate for the GPU; the host build of the same crate embeds the result.

fn main() {
    // Defaults: PTX for sm_75 (the oldest architecture CUDA 13 compiles for; the driver
    // JIT-compiles it for newer GPUs) and, where ptxas is installed, cubins for sm_80 and sm_90.
    // Other choices: `.arch(Arch::SM_80)` (PTX targets), `.cubin_arch(Arch::SM_90)` (cubins),
    // `.release(false)`, `.line_info(false)`, `.fma(FmaContraction::Off)`, `.cfg("name")`,
    // `.panic_messages(true)` (panic reports with core's messages, printed by the device too,
    // for a ~600-byte stack frame in every kernel that can panic).
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).run();
}
