//! Compiles the test kernels to PTX (and cubins where `ptxas` is installed), like any user's
//! kernel crate.

fn main() {
    let builder = ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        // sm_80 PTX for everything; the sm_90 build adds the cluster kernels behind
        // `cfg(ferrocuda_sm = "90")`, which the tests check are absent from the sm_80 PTX.
        .arch(ferrocuda_builder::Arch::SM_80)
        .arch(ferrocuda_builder::Arch::SM_90);
    // SAFETY: `q4_fnptr_recurse` recurses through a function pointer (audit 2026-11-27b, Q4);
    // tests/gpu_rules.rs launches it deeper than the default stack only in a child process that
    // expects the fault, and otherwise raises `Limit::StackSize` for its depth first.
    // Kernels whose local memory is the point (the stack-limit tests, printing, the math
    // accuracy tables), so the build's local-memory warning stays for the unintended kind.
    let builder = ["math_f32", "math_f64", "p10_deep_but_bounded", "print_lines", "q7_big_stack", "q7_small_stack"]
        .into_iter()
        .fold(builder, |b, kernel| b.local_memory_expected(kernel));
    // Test kernels whose block size is the test's business (correctness, not occupancy).
    let builder =
        ["block_collectives_256", "matmul_tiled", "p30_row_sum_fixed_1024", "print_lines"].into_iter().fold(builder, |b, kernel| b.occupancy_expected(kernel));
    unsafe { builder.allow_recursion("q4_fnptr_recurse") }.run();
}
