// G18S-1 (audit/2026-11-28e/FINDINGS-review.md, session 18's addendum): a crate that renames
// the runtime (`extern crate self as ferrocuda_host;`, its `__private` checks made no-ops) still
// has both unsound launches refused by the real launch. The program is
// `../shared/g18s_1_renamed_runtime.rs` (what it does and why), shared with the test binary
// `ferrocuda/tests/gpu_g18s_1_renamed_runtime.rs`, which the GPU machines run.
extern crate self as ferrocuda_host;

include!("../shared/g18s_1_renamed_runtime.rs");

fn main() {
    renamed_runtime_case();
}
