//! Q11 (audit 2026-11-27b): integer overflow in a kernel. The CPU executor runs a kernel
//! crate's host build, a GPU its device build; the audit found a debug host build panicking
//! ("attempt to add with overflow") where the device build wrapped. Now the device build checks
//! overflow exactly when cargo's profile does (`KernelBuilder::overflow_checks`, by default
//! cargo's default for the build profile), and the CPU executor refuses a kernel whose two
//! builds disagree. So the same profile gives the same result: a wrapped value on both
//! (tests/gpu_rules.rs, `q11_..._in_release`), or a panic at the same `file:line` on both
//! (here: `test-kernels-checked`, whose host and device builds both check).
//!
//! The GPU half runs in a child process (a device panic poisons the context); it skips
//! (printed) without a GPU and fails under `REQUIRE_GPU=1`.

mod common;

use std::process::Command;

use ferrocuda::{DeviceBuffer, Error, Stream};
use ferrocuda_device::cpu::{CpuError, CpuExecutor};
use test_kernels_checked::checked_int_ops;

const CHILD: &str = "FERROCUDA_OVERFLOW_CHILD";

/// The line of `text` in tests/kernels-checked/src/lib.rs.
fn kernel_line(text: &str) -> u32 {
    include_str!("kernels-checked/src/lib.rs").lines().position(|l| l.contains(text)).unwrap() as u32 + 1
}

/// The crate's two builds agree (both check), so the executor runs it, and the overflow is a
/// panic at the kernel's line, as in any Rust build with overflow checks.
#[test]
fn q11_cpu_executor_panics_at_the_overflow_when_both_builds_check() {
    assert!(test_kernels_checked::KERNELS.device_overflow_checks, "the device build checks overflow (build.rs)");
    let x = [u32::MAX, 1, 2, 3];
    let mut out = vec![0u32; 4];
    let error = checked_int_ops::launch_cpu(&CpuExecutor::new(), (1u32, 4u32), 0, &x, &mut out).unwrap_err();
    let CpuError::KernelPanic(report) = &error else { panic!("expected a panic, got {error:?}") };
    println!("Q11 CPU (both builds check): {error}");
    assert!(report.file.ends_with("tests/kernels-checked/src/lib.rs"), "{report:?}");
    assert_eq!(report.line, kernel_line("v + 1"), "{report:?}");
    assert_eq!(report.thread, [0, 0, 0]);
    assert!(report.message.contains("overflow"), "{report:?}");
    // No overflow: it runs.
    checked_int_ops::launch_cpu(&CpuExecutor::new(), (1u32, 4u32), 1, &[1, 2, 3, 4], &mut out).unwrap();
    assert_eq!(out, [3, 6, 9, 12]);
}

/// The release test-kernels crate: both builds wrap, and the executor says nothing.
#[test]
fn q11_cpu_executor_wraps_when_both_builds_wrap() {
    assert!(!test_kernels::KERNELS.device_overflow_checks, "a release build script defaults to wrapping");
    let mut out = vec![0u32; 4];
    test_kernels::gpu_rules::q11_int_ops::launch_cpu(&CpuExecutor::new(), (1u32, 4u32), 0, &[u32::MAX, 1, 2, 3], 0, &mut out).unwrap();
    assert_eq!(out, [0, 2, 3, 4]);
}

/// On the GPU: the same kernel, the same input, a panic report at the same `file:line`.
#[test]
fn q11_gpu_panics_at_the_same_line_as_the_cpu_executor() {
    const TEST: &str = "q11_gpu_panics_at_the_same_line_as_the_cpu_executor";
    if std::env::var(CHILD).is_ok_and(|name| name == TEST) {
        let Some(context) = common::gpu_or_skip(TEST) else { return };
        let stream = Stream::new(&context).unwrap();
        let x = DeviceBuffer::from_slice(&context, &[u32::MAX, 1, 2, 3]).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
        checked_int_ops::launch(&stream, (1u32, 4u32), 0, &x, &mut out).unwrap();
        let error = stream.synchronize().unwrap_err();
        println!("Q11 GPU CHILD SAW: {error}");
        let Error::KernelPanic { report, .. } = &error else { panic!("expected a kernel panic, got {error:?}") };
        println!("Q11 GPU REPORT {}:{} thread {:?}", report.file, report.line, report.thread);
        return;
    }
    if common::gpu_or_skip(TEST).is_none() {
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap()).args([TEST, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, TEST).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    let expected = format!("Q11 GPU REPORT tests/kernels-checked/src/lib.rs:{} thread [0, 0, 0]", kernel_line("v + 1"));
    assert!(text.contains(&expected), "expected `{expected}` in:\n{text}");
}
