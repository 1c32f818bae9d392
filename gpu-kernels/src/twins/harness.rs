//! The pieces every "ours beside its nvcc-built twin" benchmark program repeats (the ports'
//! `ports_bench` and `ports2_bench`): the exit code from a run that may fail a check, the
//! header line with the device and its copy bandwidth, loading a twin's cubin, a check's
//! outcome line and a timing row.

use std::path::Path;
use std::process::ExitCode;

use ferrocuda_host::{Context, JitOptions, Module, Stream};

use super::timing::{Runs, copy_bandwidth_gbps, median};

/// The error type of the benchmark programs.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Runs a benchmark program's body: success when every check passed (`Ok(true)`); a failed
/// check or an error (printed, prefixed with `program`) is a failure exit.
pub fn exit_code(program: &str, run: impl FnOnce() -> Result<bool>) -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("FAILED: a check above failed");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("{program}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the device, the timing method and the device-to-device copy bandwidth (1 GiB).
pub fn print_header(context: &Context, stream: &Stream, runs: Runs) -> Result<()> {
    let device = context.device();
    println!(
        "device: {} (sm_{}), {} SMs; CUDA events, {} warm-up + {} timed runs interleaved, median",
        device.name()?,
        device.arch()?,
        device.multiprocessor_count()?,
        runs.warmup,
        runs.timed
    );
    let (copy, _) = copy_bandwidth_gbps(stream, 1 << 30, runs)?;
    println!("device-to-device copy: {copy:.0} GB/s");
    Ok(())
}

/// Loads the twins' cubin at `path` (an nvcc build of CUDA C++ source).
///
/// # Safety
/// Its kernels must be launched only through typed launchers whose parameter layouts the
/// CUDA C++ source declares alike (the host checks the parameter sizes, not their types).
pub unsafe fn load_twin(context: &Context, path: &Path) -> Result<Module> {
    let image = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: the caller's promise above.
    Ok(unsafe { Module::load_binary(context, &path.display().to_string(), &image, &JitOptions::default())? })
}

/// Prints a check's outcome; `false` when it failed.
pub fn report(what: &str, outcome: std::result::Result<(), String>) -> bool {
    match outcome {
        Ok(()) => {
            println!("  check {what}: ok");
            true
        }
        Err(e) => {
            println!("  check {what}: FAILED {e}");
            false
        }
    }
}

/// One timing row, `name` padded to `width`: the medians of `rust` and `twin` (milliseconds),
/// their bandwidth for `bytes` moved, and twin / Rust (above 1: Rust is faster), returned.
pub fn row(name: &str, width: usize, rust: &[f64], twin: &[f64], bytes: f64) -> f64 {
    let (rust, twin) = (median(rust), median(twin));
    let gbps = |ms: f64| bytes / (ms * 1e-3) / 1e9;
    println!("{name:<width$} Rust {rust:.4} ms ({:>4.0} GB/s)  nvcc {twin:.4} ms ({:>4.0} GB/s)  twin/Rust {:.3}", gbps(rust), gbps(twin), twin / rust);
    twin / rust
}
