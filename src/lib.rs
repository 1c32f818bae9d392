//! ferrocuda: GPU kernels written in Rust, compiled to PTX at build time by rustc's own NVPTX
//! backend, launched from Rust through the CUDA driver API.
//!
//! This crate is the host-side entry point: the driver API ([`Context`], [`Stream`],
//! [`DeviceBuffer`], ...) from `ferrocuda-host`, and the CUDA-style [`launch!`] macro.
//! Kernels live in a kernel crate that depends on `ferrocuda-device`; see README.md.
//!
//! ```no_run
//! use ferrocuda::{Context, DeviceBuffer, Stream, launch};
//! use gpu_kernels::saxpy;
//!
//! # fn main() -> ferrocuda::Result<()> {
//! let context = Context::primary(0)?;
//! let stream = Stream::new(&context)?;
//! let x = DeviceBuffer::from_slice(&context, &[1.0f32; 1024])?;
//! let mut y = DeviceBuffer::from_slice(&context, &[2.0f32; 1024])?;
//! launch!(saxpy<<<4, 256, 0, &stream>>>(3.0, &x, &mut y))?;
//! stream.synchronize()?;
//! assert_eq!(y.to_vec()?[0], 5.0);
//! # Ok(())
//! # }
//! ```

pub use ferrocuda_host::*;
pub use ferrocuda_macros::launch;

/// The CPU executor: the same kernels run on the CPU with CUDA's semantics (every `#[kernel]`
/// has `name::launch_cpu(&executor, config, args..)`).
pub use ferrocuda_device::cpu;

/// True when GPU tests must run rather than skip (`REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The exit code of a program whose GPU work returned `result`: success, or "nothing to run"
/// (also success) when the machine has no driver or no device, or the error on stderr and a
/// failure. The examples' `main` is `ferrocuda::exit_code(run())`.
pub fn exit_code(result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("nothing to run: {error}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
