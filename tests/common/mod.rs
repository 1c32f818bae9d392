//! Shared by the GPU tests: a context when a GPU is present, a printed skip when not, and a
//! failure instead of a skip under `REQUIRE_GPU=1`.

use std::io::Write;

use ferrocuda::{Context, Error};

/// The primary context of device 0, or `None` (with the reason printed) when there is no GPU.
///
/// # Panics
/// Under `REQUIRE_GPU=1`, when no GPU can be used: such a run must not pass by skipping.
pub fn gpu_or_skip(test: &str) -> Option<Context> {
    match Context::primary(0) {
        Ok(context) => Some(context),
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but {test} found no GPU: {error}");
            // Straight to stderr: the test harness captures `eprintln!` of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {error}");
            None
        }
        Err(error) => panic!("{test}: could not open the GPU: {error}"),
    }
}
