//! Kernels that panic: the host gets an error from the next synchronisation carrying the
//! record the first panicking thread left (`Error::KernelPanic`: kernel, file, line, column,
//! block, thread, message), and every later call reports it (the fault is sticky).
//!
//! Kernels are built with the cheap panic handler (the default, issue 20): it records
//! everything but the message of core's own panics, which the report replaces by
//! `MESSAGE_NOT_KEPT`, and prints nothing from the device; `kernel_panic!` keeps its message,
//! and so do the output types' bounds panics (index and length, through `kernel_panic!`).
//! In both launches below several threads panic at once: the record must be one thread's,
//! complete.
//!
//! Each faulting kernel runs in a child process (this test binary re-run with
//! `FERROCUDA_FAULT_CHILD=<test name>`), because a fault poisons the process's primary context.

mod common;

use std::process::Command;

use ferrocuda::{DeviceBuffer, Error, KernelPanic, LaunchConfig, Stream};
use test_kernels::{check_limit, square_checked};

const CHILD: &str = "FERROCUDA_FAULT_CHILD";

/// Runs `test` again in a child process with [`CHILD`] set, and returns what it printed (or
/// `None`, printed, without a GPU).
fn run_child(test: &str) -> Option<String> {
    common::gpu_or_skip(test)?;
    let output = Command::new(std::env::current_exe().unwrap()).args([test, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, test).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    Some(text)
}

fn in_child(test: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|name| name == test)
}

/// The line of `text` in tests/kernels/src/lib.rs.
fn kernel_line(text: &str) -> usize {
    include_str!("kernels/src/lib.rs").lines().position(|l| l.contains(text)).unwrap() + 1
}

/// Launches, synchronises and returns the report; checks the error is sticky and that a
/// later call reports the same panic.
fn panic_report(context: &ferrocuda::Context, launch: impl FnOnce() -> Result<(), Error>, stream: &Stream) -> KernelPanic {
    launch().unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("CHILD SAW: {error}");
    let Error::KernelPanic { report, source } = &error else { panic!("expected a kernel panic, got {error:?}") };
    assert!(source.is_sticky());
    let after = DeviceBuffer::<u32>::zeroed(context, 1).map(|_| ()).and_then(|_| context.synchronize()).unwrap_err();
    println!("CHILD SAW AFTER: {after}");
    (**report).clone()
}

#[test]
fn device_panic_reports_file_line_block_and_thread() {
    const TEST: &str = "device_panic_reports_file_line_block_and_thread";
    if in_child(TEST) {
        return square_child();
    }
    let Some(text) = run_child(TEST) else { return };
    let line = kernel_line("out[i] = x[i].wrapping_mul(x[i]);");
    // The host's error and the later call's: the same text twice. The cheap handler prints
    // nothing from the device (the detailed one, `panic_messages(true)`, adds a third).
    let location = format!("kernel `square_checked` panicked at tests/kernels/src/lib.rs:{line}:");
    assert_eq!(text.matches(&location).count(), 2, "the error and the later error, in:\n{text}");
    assert!(text.contains("block (1, 0, 0), thread ("), "no block/thread in:\n{text}");
    // The output's bounds panic keeps its index and length (kernel_panic!, formatted by the host).
    assert!(text.contains("): index out of bounds: the len is 40 but the index is "), "the report lost the index and length, in:\n{text}");
    assert!(text.contains("CHILD SAW AFTER: kernel `square_checked` panicked"), "later calls must report the panic too:\n{text}");
    assert!(text.contains("CHILD CHECKED"), "the child's checks did not all pass:\n{text}");
}

/// Squares 64 elements into an output of 40: threads 40..64 (block 1, threads 8..32) all
/// index out of bounds at once.
fn square_child() {
    let context = ferrocuda::Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
    let report = panic_report(&context, || square_checked::launch(&stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out), &stream);
    let line = kernel_line("out[i] = x[i].wrapping_mul(x[i]);");
    assert_eq!((report.kernel.as_str(), report.file.as_str(), report.line as usize), ("square_checked", "tests/kernels/src/lib.rs", line), "{report:?}");
    assert!(report.column > 0, "{report:?}");
    assert_eq!(report.block, [1, 0, 0], "{report:?}");
    assert!((8..32).contains(&report.thread[0]) && report.thread[1..] == [0, 0], "threads 40..63 overrun the output: {report:?}");
    // Thread t of block 1 takes element 32 + t: the report names that thread's index.
    assert_eq!(report.message, format!("index out of bounds: the len is 40 but the index is {}", 32 + report.thread[0]), "{report:?}");
    println!("CHILD CHECKED");
}

#[test]
fn kernel_panic_message_reaches_the_host_with_its_arguments() {
    const TEST: &str = "kernel_panic_message_reaches_the_host_with_its_arguments";
    if in_child(TEST) {
        return limit_child();
    }
    let Some(text) = run_child(TEST) else { return };
    let line = kernel_line("ferrocuda_device::kernel_panic!(\"value {} at {} is over the limit {}\"");
    let location = format!("kernel `check_limit` panicked at tests/kernels/src/lib.rs:{line}:");
    assert_eq!(text.matches(&location).count(), 2, "the error and the later error, in:\n{text}");
    assert!(text.contains("is over the limit 5"), "the message lost its arguments, in:\n{text}");
    assert!(text.contains("CHILD CHECKED"), "the child's checks did not all pass:\n{text}");
}

/// Elements 3, 5 and 6 are over the limit: three threads of one warp panic at once, and the
/// record (message, thread) must be one of theirs, whole.
fn limit_child() {
    let context = ferrocuda::Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let values = [1u32, 2, 3, 7, 4, 9, 6, 0];
    let x = DeviceBuffer::from_slice(&context, &values).unwrap();
    let report = panic_report(&context, || check_limit::launch(&stream, LaunchConfig::from((1u32, 32u32)), &x, 5), &stream);
    assert_eq!((report.kernel.as_str(), report.block), ("check_limit", [0, 0, 0]), "{report:?}");
    let i = report.thread[0] as usize;
    assert!([3, 5, 6].contains(&i) && report.thread[1..] == [0, 0], "{report:?}");
    assert_eq!(report.message, format!("value {} at {i} is over the limit 5", values[i]), "the message is not the reporting thread's: {report:?}");
    println!("CHILD CHECKED");
}

/// Audit 2026-11-27b, Q5: `Stream::synchronize_timeout`, the wait the docs recommend for bounding
/// hangs, reported a device panic as "a kernel faulted" without the panicking thread's record.
#[test]
fn q5_synchronize_timeout_reports_a_kernel_panic_with_its_record() {
    const TEST: &str = "q5_synchronize_timeout_reports_a_kernel_panic_with_its_record";
    if in_child(TEST) {
        let context = ferrocuda::Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        let x = DeviceBuffer::from_slice(&context, &[1u32, 2, 3, 7]).unwrap();
        check_limit::launch(&stream, LaunchConfig::from((1u32, 32u32)), &x, 5).unwrap();
        let error = stream.synchronize_timeout(std::time::Duration::from_secs(10)).unwrap_err();
        println!("CHILD SAW: {error}");
        let Error::KernelPanic { report, .. } = &error else { panic!("expected a kernel panic, got {error:?}") };
        assert_eq!((report.kernel.as_str(), report.thread[0]), ("check_limit", 3), "{report:?}");
        println!("CHILD CHECKED");
        return;
    }
    let Some(text) = run_child(TEST) else { return };
    let line = kernel_line("ferrocuda_device::kernel_panic!(\"value {} at {} is over the limit {}\"");
    assert!(text.contains(&format!("CHILD SAW: kernel `check_limit` panicked at tests/kernels/src/lib.rs:{line}:")), "no panic record in:\n{text}");
    assert!(text.contains("CHILD CHECKED"), "the child's checks did not all pass:\n{text}");
}
