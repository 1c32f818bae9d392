//! vLLM's kernels, built as vLLM builds them: sm_90, no fast math.
use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(Arch::SM_90)
        // An earlier round's fix variant, kept as measured (bench/ports3/RESULTS.md).
        .occupancy_expected("dynamic_per_token_scaled_fp8_quant_kernel_fixed")
        .run();
}
