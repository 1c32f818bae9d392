//! G18S-1 (audit/2026-11-28e/FINDINGS-review.md, session 18's addendum; closed for the GPU
//! launch in session 19): a crate that renames the runtime (`extern crate self as
//! ferrocuda_host;` with no-op `check_requirements`, `check_output_shape` and `check_same_len`
//! beside the real `__private`) still has a 2-D launch of a per-thread output and a `same_len`
//! group of other lengths refused by the real launch.
//!
//! The program is `tests/compile_fail/seams/shared/g18s_1_renamed_runtime.rs` (what it does and
//! why), the same source as the seams/pass case
//! `tests/compile_fail/seams/pass/g18s_1_runtime_renamed_checks_no_launch_away.rs`, run here as an
//! ordinary test binary so that the final GPU call runs it. Needs a GPU: without one it prints
//! why and passes, under `REQUIRE_GPU=1` it fails.
extern crate self as ferrocuda_host;

include!("../../tests/compile_fail/seams/shared/g18s_1_renamed_runtime.rs");

/// G18S-1, the seams/pass case as a test binary (session 20): the trybuild copy runs only
/// inside `compile_fail`, which needs cargo, so it never ran on a GPU machine; this one is
/// staged by scripts/gpu-run/stage.sh (its name starts with `gpu_`).
#[test]
fn g18s_1_runtime_renamed_checks_no_launch_away() {
    renamed_runtime_case();
}
