//! A kernel that panics: the host gets an error from the next synchronisation, the device
//! prints the kernel, file, line, block and thread, the host's error carries the same
//! record (`Error::KernelPanic`), and every later call reports it (the fault is sticky).
//!
//! The faulting kernel runs in a child process (this test binary re-run with
//! `FERROCUDA_FAULT_CHILD=1`), because a fault poisons the process's primary context.

mod common;

use std::process::Command;

use ferrocuda::{DeviceBuffer, Error, LaunchConfig, Stream};
use test_kernels::square_checked;

const CHILD: &str = "FERROCUDA_FAULT_CHILD";

#[test]
fn device_panic_reports_file_line_block_and_thread() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    if common::gpu_or_skip("device_panic_reports_file_line_block_and_thread").is_none() {
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["device_panic_reports_file_line_block_and_thread", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    let line = include_str!("kernels/src/lib.rs").lines().position(|l| l.contains("out[i] = x[i].wrapping_mul(x[i]);")).unwrap() + 1;
    // The device's own line (through vprintf), then the host's error and the later call's:
    // the same text three times.
    let location = format!("kernel `square_checked` panicked at tests/kernels/src/lib.rs:{line}:");
    assert_eq!(text.matches(&location).count(), 3, "the device's line, the error and the later error, in:\n{text}");
    assert!(text.contains("block (1, 0, 0), thread ("), "no block/thread in:\n{text}");
    // The host's error, built from the record the panicking thread left.
    assert!(text.contains("CHILD SAW KERNEL: square_checked"), "the synchronisation error did not carry the panic:\n{text}");
    assert!(text.contains(&format!("CHILD SAW LOCATION: tests/kernels/src/lib.rs:{line}")), "wrong location:\n{text}");
    assert!(text.contains("CHILD SAW BLOCK: [1, 0, 0]"), "wrong block:\n{text}");
    assert!(text.contains("CHILD SAW AFTER: kernel `square_checked` panicked"), "later calls must report the panic too:\n{text}");
}

/// Squares 64 elements into an output of 40: threads 40..64 index out of bounds.
fn child() {
    let context = ferrocuda::Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
    square_checked::launch(&stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("CHILD SAW: {error}");
    let Error::KernelPanic { report, source } = &error else { panic!("expected a kernel panic, got {error:?}") };
    assert!(source.is_sticky());
    println!("CHILD SAW KERNEL: {}", report.kernel);
    println!("CHILD SAW LOCATION: {}:{}", report.file, report.line);
    println!("CHILD SAW BLOCK: {:?}", report.block);
    assert!((8..32).contains(&report.thread[0]), "threads 40..63 overrun the output: {report:?}");
    let after = DeviceBuffer::<u32>::zeroed(&context, 1).map(|_| ()).and_then(|_| context.synchronize()).unwrap_err();
    println!("CHILD SAW AFTER: {after}");
}
