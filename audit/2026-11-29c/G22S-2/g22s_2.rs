//! G22S-2 (suspected, needs one GPU run): the process's panic record is allocated once, with
//! `cuMemHostAlloc(PORTABLE | DEVICEMAP)`, in whatever context is current at the first module
//! load (host/src/panic_report.rs, `slot()`, called from `install` under the loading context's
//! bind). When that context is a `Context::create` one, it is destroyed with its last handle,
//! and with it, as far as the driver documents it ("destroys and cleans up all resources
//! associated with the context"), that page-locked allocation: every later kernel panic in any
//! other context writes to the freed mapping, and the host's `recorded()` reads
//! `slot.host` (freed host memory: a use-after-free in safe code, or a segfault).
//!
//! Safe code only. To run: copy into tests/ (beside gpu_fault.rs, which it reuses the shape
//! of), `cargo test --release -p ferrocuda --test g22s_2`, on a GPU (REQUIRE_GPU=1). Passes if
//! the record survives its context (the report names `square_checked`); otherwise the child
//! dies (SIGSEGV) or reports an illegal address instead of the panic. compute-sanitizer on the
//! child shows the device write either way.

mod common;

use std::process::Command;

use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, SchedulePolicy, Stream};
use test_kernels::square_checked;

const CHILD: &str = "FERROCUDA_FAULT_CHILD";
const TEST: &str = "g22s_2_the_panic_record_outlives_the_context_it_was_allocated_in";

#[test]
fn g22s_2_the_panic_record_outlives_the_context_it_was_allocated_in() {
    if std::env::var(CHILD).is_ok_and(|name| name == TEST) {
        return child();
    }
    if common::gpu_or_skip(TEST).is_none() {
        return;
    }
    // Variant 1: the record made in a created context; variant 2 (G22S2_PRIMARY=1): made in the
    // primary context, every handle of which the child drops (ferrocuda releases it to 0).
    for primary in [false, true] {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args([TEST, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, TEST);
        if primary {
            command.env("G22S2_PRIMARY", "1");
        }
        let output = command.output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        println!("child (primary: {primary}, {:?}):\n{text}", output.status);
        assert!(text.contains("CHILD CHECKED"), "the panic record did not survive the context it was allocated in (primary: {primary}):\n{text}");
    }
}

fn child() {
    {
        // The first module load of the process, in a created context: the record is made here.
        // (Variant, G22S2_PRIMARY=1: the primary context, every handle of which drops below, so
        // that ferrocuda releases it to a reference count of 0 and the driver resets it.)
        let created = if std::env::var("G22S2_PRIMARY").is_ok() { Context::primary(0).unwrap() } else { Context::create(0, SchedulePolicy::Auto).unwrap() };
        let stream = Stream::new(&created).unwrap();
        let x = DeviceBuffer::from_slice(&created, &[1u32; 32]).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&created, 32).unwrap();
        square_checked::launch(&stream, LaunchConfig::from((1u32, 32u32)), &x, &mut out).unwrap();
        stream.synchronize().unwrap();
    } // every handle dropped: cuCtxDestroy
    let context = Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
    square_checked::launch(&stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("CHILD SAW: {error}");
    let Error::KernelPanic { report, .. } = &error else { panic!("expected the kernel panic, got {error:?}") };
    assert_eq!(report.kernel, "square_checked");
    println!("CHILD CHECKED");
}
