//! Compile-fail tests: each file under `tests/compile_fail/` must fail to compile with the
//! error in its `.stderr` (regenerate with `TRYBUILD=overwrite` after checking the new text).
//!
//! `launch/`: misuse of a typed launcher (wrong element type, host data, `&` for `&mut`,
//! argument count, one output twice, raw pointers without `unsafe`, a programmatic dependent
//! launch without `unsafe` or by struct literal). `kernel/`: kernel
//! signatures `#[kernel]` rejects. `kernel_model/`: the unsound
//! kernels of audit findings U1/U2 (`stale_read`, `count_plain`, non-`Pod` elements) and the
//! ways around the output model that must not compile. `cublas/`: GEMM element-type pairings
//! cuBLAS does not support, TF32 for non-`f32` inputs, a bias of another type than the output,
//! the output passed as an input or as the bias. `seams/`: where generated code meets the
//! user's (audit 2026-11-27): P1, the kernel body never runs in a generated `unsafe` context
//! (the host copy; the device build is tests/macro_seams_build.rs), and P13, two kernels with
//! one PTX name.

#[test]
fn compile_fail() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/launch/*.rs");
    cases.compile_fail("tests/compile_fail/kernel/*.rs");
    cases.compile_fail("tests/compile_fail/kernel_model/*.rs");
    cases.compile_fail("tests/compile_fail/cublas/*.rs");
    cases.compile_fail("tests/compile_fail/seams/*.rs");
    cases.pass("tests/compile_fail/seams/pass/*.rs");
}
