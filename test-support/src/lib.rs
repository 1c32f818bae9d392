//! What this repository's tests, examples and main job share, kept out of the `ferrocuda`
//! facade so that its API is the product's alone.

use ferrocuda_host::{Error, Result};

/// True when GPU tests must run rather than skip (`REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The exit code of a program whose GPU work returned `result`: success, or "nothing to run"
/// (also success) when the machine has no driver or no device, unless `REQUIRE_GPU=1`; or the
/// error on stderr and a failure. The examples' `main` is `exit_code(run())`.
pub fn exit_code(result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) if !gpu_required() => {
            println!("nothing to run: {error}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
