//! Compile-fail tests: each file under `tests/compile_fail/` must fail to compile with the
//! error in its `.stderr` (regenerate with `TRYBUILD=overwrite` after checking the new text).
//!
//! `launch/`: misuse of a typed launcher (wrong element type, host data, `&` for `&mut`,
//! argument count, one output twice, raw pointers without `unsafe`). `kernel/`: kernel
//! signatures `#[kernel]` rejects.

#[test]
fn compile_fail() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/launch/*.rs");
    cases.compile_fail("tests/compile_fail/kernel/*.rs");
}
