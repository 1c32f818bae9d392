//! G22S-2 (audit 2026-11-29c, the held-out review's repro, extended): the panic record was one
//! per process, allocated with `cuMemHostAlloc(PORTABLE | DEVICEMAP)` in whatever context was
//! current at the process's first module load. Page-locked memory dies with the context it
//! was allocated in (`cuCtxDestroy`, or the primary context's reset when its last reference
//! is released): every later kernel panic, in any context, wrote freed memory, and the host's
//! report read it. Each context now has its own record, made at its first module load and
//! freed by its teardown after its modules (host/src/panic_report.rs; docs/host-safety.md,
//! "Driver objects and the contexts they belong to").
//!
//! Safe code only. Each variant runs in a child process (a fault poisons the process). The
//! child makes the first module load of its process in one context, drops that context
//! (every handle: a created context is destroyed, the primary one released to 0), then panics
//! `square_checked` in another and expects the report to name it. Before the fix, the child
//! died (SIGSEGV) or reported a bare illegal address where the record had been freed.
//! `cargo test --release -p ferrocuda-main --test g22s_2` with REQUIRE_GPU=1; the parent prints
//! each child's output and `G22S-2 <variant>: REPORTED` or fails.

mod common;

use std::process::Command;

use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, SchedulePolicy, Stream};
use test_kernels::square_checked;

const CHILD: &str = "FERROCUDA_FAULT_CHILD";
const VARIANT: &str = "G22S2_VARIANT";
const TEST: &str = "g22s_2_the_panic_record_outlives_the_context_it_was_allocated_in";

/// What each child does before the panic (the panic itself is in the context named last):
/// - `created`: first load in a created context, dropped; the panic in the primary context
///   (the review's case).
/// - `primary`: first load in the primary context, released to 0; the panic in the primary
///   context made again.
/// - `created_then_created`: first load in a created context, dropped; the panic in another
///   created context.
/// - `two_alive`: the primary context loads first and stays alive; the panic in a created
///   context, whose own record reports it (then what the primary context says is printed).
const VARIANTS: &[&str] = &["created", "primary", "created_then_created", "two_alive"];

#[test]
fn g22s_2_the_panic_record_outlives_the_context_it_was_allocated_in() {
    if std::env::var(CHILD).is_ok_and(|name| name == TEST) {
        return child(&std::env::var(VARIANT).unwrap());
    }
    if common::gpu_or_skip(TEST).is_none() {
        return;
    }
    let mut failed = Vec::new();
    for variant in VARIANTS {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, TEST)
            .env(VARIANT, variant)
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        println!("child ({variant}, {:?}):\n{text}", output.status);
        if text.contains("CHILD CHECKED") && output.status.success() {
            println!("G22S-2 {variant}: REPORTED");
        } else {
            println!("G22S-2 {variant}: NOT REPORTED");
            failed.push(*variant);
        }
    }
    assert!(failed.is_empty(), "the panic record did not survive the context it was allocated in: {failed:?}");
}

/// One launch of `square_checked` that does not panic: loads the kernels into `context` (its
/// first module load, which makes its panic record).
fn load_kernels(context: &Context) {
    let stream = Stream::new(context).unwrap();
    let x = DeviceBuffer::from_slice(context, &[1u32; 32]).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(context, 32).unwrap();
    square_checked::launch(&stream, LaunchConfig::from((1u32, 32u32)), &x, &mut out).unwrap();
    stream.synchronize().unwrap();
}

/// Launches `square_checked` past its output (threads 40..64 of 64 panic) in `context` and
/// checks the report names it.
fn panic_in(context: &Context) {
    let stream = Stream::new(context).unwrap();
    let x = DeviceBuffer::from_slice(context, &(0..64u32).collect::<Vec<_>>()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(context, 40).unwrap();
    square_checked::launch(&stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("CHILD SAW: {error}");
    let Error::KernelPanic { report, .. } = &error else { panic!("expected the kernel panic, got {error:?}") };
    assert_eq!(report.kernel, "square_checked");
    assert!(report.thread[0] >= 8 && report.block[0] == 1, "not one of the panicking threads: {report:?}");
}

fn child(variant: &str) {
    let created = || Context::create(0, SchedulePolicy::Auto).unwrap();
    match variant {
        "created" | "primary" | "created_then_created" => {
            {
                let first = if variant == "primary" { Context::primary(0).unwrap() } else { created() };
                load_kernels(&first);
            } // every handle dropped: cuCtxDestroy, or the primary context released to 0
            let second = if variant == "created_then_created" { created() } else { Context::primary(0).unwrap() };
            panic_in(&second);
        }
        "two_alive" => {
            let primary = Context::primary(0).unwrap();
            load_kernels(&primary);
            let other = created();
            panic_in(&other);
            // Not asserted: whether a fault in one context poisons the others depends on the
            // driver (measured on CUDA 13.0: the whole process, see `Context::recover`).
            println!("G22S-2 two_alive: the primary context after the created one's panic: {:?}", primary.synchronize().map_err(|e| e.to_string()));
        }
        other => panic!("unknown variant {other}"),
    }
    println!("CHILD CHECKED");
}
