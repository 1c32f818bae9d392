//! compute-sanitizer's default report holds no failed driver call of ferrocuda's own (issue
//! 30). Its default `--report-api-errors explicit` reports every driver call that returns an
//! error, and counts it in the ERROR SUMMARY; the host used to look up globals that a module
//! may not have (the panic slot, the check tables, the unbounded-stack marks) and count a
//! kernel's parameters by asking for one past the last, so every ferrocuda program checked
//! with memcheck read dozens of errors that were not its own (30 in session 11's ports2 log).
//! Now the host reads what an image holds before asking (`host/src/module/symbols.rs`).
//!
//! The workload, run under `compute-sanitizer --tool memcheck` in a child process: kernels of
//! an embedded module (first launches: every check), a hand-written PTX module launched through
//! a typed launcher (the parameter count), and `Module::global` of a name the module lacks.
//! Skips (printed) without a GPU; under `REQUIRE_GPU=1` a missing GPU or compute-sanitizer
//! fails.

mod common;
#[path = "common/host_ordering.rs"]
#[allow(dead_code)] // this test uses only the PTX of `late_read_ptx`
mod host_ordering;

use std::path::PathBuf;
use std::process::Command;

use ferrocuda::{DeviceBuffer, Error, JitOptions, LaunchConfig, Module, Stream};
use gpu_kernels::saxpy;
use test_kernels::launch_kinds::mark_blocks;

const CHILD: &str = "FERROCUDA_SANITIZER_QUIET_CHILD";

/// `$COMPUTE_SANITIZER`, else the CUDA toolkit's, else one on `PATH`.
fn sanitizer() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("COMPUTE_SANITIZER") {
        return Some(path.into());
    }
    let toolkit = PathBuf::from("/usr/local/cuda/bin/compute-sanitizer");
    if toolkit.exists() {
        return Some(toolkit);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("compute-sanitizer")).find(|p| p.exists())
}

/// What the child does under the sanitizer.
fn workload() {
    let context = common::gpu_or_skip("sanitizer workload").expect("the parent found a GPU");
    let stream = Stream::non_blocking(&context).unwrap();
    // An embedded module: loaded with the context's first launch of it, each kernel checked
    // on its first launch (layout and type tables, unbounded-stack mark, panic slot).
    let n = 1000;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::from_slice(&context, &vec![2.0f32; n]).unwrap();
    for _ in 0..2 {
        saxpy::launch(&stream, LaunchConfig::for_elements(n, 256), 3.0, &x, &mut y).unwrap();
    }
    // A module not built by `#[kernel]` (no check globals), launched through a typed launcher:
    // the fingerprint and layout lookups and the parameter count.
    // SAFETY: a hand-written kernel with mark_blocks's parameters (bool, pointer, length).
    let module = unsafe { Module::load_ptx(&context, "late_read", &host_ordering::late_read_ptx(0), &JitOptions::new()) }.unwrap();
    let mut marks = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    mark_blocks::launch_in(&module, &stream, (4u32, 32u32), false, &mut marks).unwrap();
    // One of ours: refused before any driver call (G14-1: ferrocuda's own globals are never
    // handed out; a name of another prefix is asked of the driver, whose failure is then the
    // caller's).
    assert!(matches!(module.global::<u64>("__ferrocuda_panic_slot"), Err(Error::ReservedGlobal { .. })));
    assert!(module.global::<u32>("FILL").is_ok());
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap()[n - 1], 8.0);
    assert_eq!(marks.to_vec().unwrap(), [1, 2, 3, 4]);
    println!("WORKLOAD-DONE");
}

#[test]
fn issue30_compute_sanitizer_reports_no_failed_driver_call_of_ours() {
    let name = "issue30_compute_sanitizer_reports_no_failed_driver_call_of_ours";
    if std::env::var(CHILD).is_ok() {
        workload();
        return;
    }
    if common::gpu_or_skip(name).is_none() {
        return;
    }
    let Some(tool) = sanitizer() else {
        assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but compute-sanitizer was not found (set COMPUTE_SANITIZER)");
        eprintln!("SKIPPED {name}: compute-sanitizer not found (set COMPUTE_SANITIZER)");
        return;
    };
    let output = Command::new(&tool)
        .args(["--tool", "memcheck"])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("run compute-sanitizer");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{text}");
    assert!(text.contains("WORKLOAD-DONE"), "the workload did not finish under the sanitizer:\n{text}");
    let failed: Vec<&str> = text.lines().filter(|l| l.contains("Program hit")).collect();
    assert!(failed.is_empty(), "compute-sanitizer saw {} failed driver calls:\n{}", failed.len(), failed.join("\n"));
    assert!(text.contains("ERROR SUMMARY: 0 errors"), "{text}");
}
