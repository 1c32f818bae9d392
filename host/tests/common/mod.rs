//! What the host crate's GPU test binaries share.

use ferrocuda_host::{Context, Error};

/// The context of GPU 0, or `None` (printed) without a GPU; a panic under `REQUIRE_GPU=1`.
pub fn gpu_or_skip(test: &str) -> Option<Context> {
    match Context::primary(0) {
        Ok(context) => Some(context),
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but {test} found no GPU: {error}");
            eprintln!("SKIPPED {test}: {error}");
            None
        }
        Err(error) => panic!("{test}: could not open the GPU: {error}"),
    }
}
