//! Audit 2026-11-29b, G22R-1, on a GPU (skipped without one, a failure under `REQUIRE_GPU=1`):
//! the panic report's kernel name comes from the module's names table, so it is right for a
//! kernel with shared arrays, and a shared-memory store that rewrites the kernel tag with
//! `(secret, secret ^ key)` (the review's `gpu-tag` shape) makes the report name no kernel,
//! never the bytes at `secret`. Each faulting kernel runs in a child process (this binary re-run
//! with `FERROCUDA_FAULT_CHILD=<test>`): a fault poisons the process's primary context.
//! The CPU executor's side: device/tests/g22r_1_shared_sites.rs.

mod common;

use std::process::Command;

use ferrocuda::{DeviceBuffer, Error, KernelPanic, LaunchConfig, Stream};
use test_kernels::g22r::{g22r_1_forged_tag, g22r_1_named_panic};

const CHILD: &str = "FERROCUDA_FAULT_CHILD";

/// The bytes the forged tag points at: a buffer the kernel is never given.
const SECRET: &[u8] = b"SECRET-BYTES-NOT-LENT-TO-KERNEL!\0";

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

/// The report of a launch that panics.
fn panic_report(launch: impl FnOnce() -> Result<(), Error>, stream: &Stream) -> KernelPanic {
    launch().unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("CHILD SAW: {error}");
    let Error::KernelPanic { report, .. } = &error else { panic!("expected a kernel panic, got {error:?}") };
    (**report).clone()
}

fn line_of(marker: &str) -> u32 {
    include_str!("kernels/src/g22r.rs").lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

#[test]
fn g22r_1_the_gpu_panic_report_names_the_kernel_from_the_names_table() {
    const TEST: &str = "g22r_1_the_gpu_panic_report_names_the_kernel_from_the_names_table";
    if in_child(TEST) {
        let context = ferrocuda::Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 128).unwrap();
        let report = panic_report(|| g22r_1_named_panic::launch(&stream, LaunchConfig::from((2u32, 64u32)), &mut out, 7), &stream);
        assert_eq!(report.kernel, "g22r_1_named_panic", "{report:?}");
        assert_eq!((report.file.as_str(), report.line), ("tests/kernels/src/g22r.rs", line_of("// G22R1:named")), "{report:?}");
        assert_eq!((report.block, report.thread), ([1, 0, 0], [3, 0, 0]), "{report:?}");
        println!("CHILD CHECKED");
        return;
    }
    let Some(text) = run_child(TEST) else { return };
    assert!(text.contains("CHILD CHECKED"), "the child's checks did not all pass:\n{text}");
}

#[test]
fn g22r_1_a_forged_kernel_tag_reports_no_foreign_bytes() {
    const TEST: &str = "g22r_1_a_forged_kernel_tag_reports_no_foreign_bytes";
    if in_child(TEST) {
        let context = ferrocuda::Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        let secret = DeviceBuffer::<u8>::from_slice(&context, SECRET).unwrap();
        let address = secret.device_ptr();
        // First without the panic: the tag as the report would read it, to see whether the
        // forgery reached it (it depends on where ptxas put the tag).
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
        g22r_1_forged_tag::launch(&stream, LaunchConfig::from((1u32, 32u32)), &mut out, address, 0).unwrap();
        stream.synchronize().unwrap();
        let words = out.to_vec().unwrap();
        let tag = (words[0] as u64 | (words[1] as u64) << 32, words[2] as u64 | (words[3] as u64) << 32);
        let forged = tag.0 == address;
        println!("CHILD TAG: {tag:#x?}, forged: {forged}");
        let report = panic_report(|| g22r_1_forged_tag::launch(&stream, LaunchConfig::from((1u32, 32u32)), &mut out, address, 7), &stream);
        assert!(!report.kernel.contains("SECRET"), "the report carries the bytes at the forged address: {report:?}");
        if forged {
            // An id the table does not list: no name.
            assert_eq!(report.kernel, "", "{report:?}");
        } else {
            assert_eq!(report.kernel, "g22r_1_forged_tag", "{report:?}");
        }
        assert_eq!(report.file, "tests/kernels/src/g22r.rs", "{report:?}");
        println!("CHILD CHECKED forged={forged}");
        return;
    }
    let Some(text) = run_child(TEST) else { return };
    assert!(text.contains("CHILD CHECKED"), "the child's checks did not all pass:\n{text}");
    // The review's repro put the tag right after a 16-byte array (sm_80 and sm_90 SASS): the
    // forgery must have reached it, or this test shows nothing.
    assert!(text.contains("CHILD CHECKED forged=true"), "the forged pair did not reach the tag; the test must put it there:\n{text}");
}
