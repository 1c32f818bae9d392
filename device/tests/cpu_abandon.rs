//! Regression (audit 2026-11-24 N13, then audit 2026-11-28b G14-4): the threads of a failed
//! block are ended where they wait by unwinding them, so their destructors run before the
//! launch returns (a `std::thread::scope` they wait in joins its threads: G14-4,
//! `device/tests/g14_review.rs`). N13 had them abandoned instead (no destructor, stacks leaked,
//! up to a budget), which let a scope's threads outlive the launch. A destructor that panics
//! during the unwinding aborts the process (tests/cpu_sanitizer.rs, `n13_`, in a child).

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;

static DROPS: AtomicU32 = AtomicU32::new(0);

struct Counted;

impl Drop for Counted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

/// One block of 1024: every thread holds a `Counted` at a barrier; the last thread panics
/// there, so 1023 started threads are ended while they wait. Returns how many of their
/// `Counted`s dropped.
fn failing_launch(executor: &CpuExecutor) -> u32 {
    let before = DROPS.load(Ordering::Relaxed);
    let result = executor.run("n13_counted", LaunchConfig::new(1u32, 1024u32), &|| {
        let _held = Counted;
        sync_threads();
        if thread_idx_x() == 1023 {
            panic!("the last thread fails");
        }
        sync_threads();
    });
    match result {
        Err(CpuError::KernelPanic(panic)) => assert_eq!((panic.thread, panic.message.as_str()), ([1023, 0, 0], "the last thread fails")),
        other => panic!("expected the last thread's panic, got {other:?}"),
    }
    // The panicking thread's own `Counted` drops as its panic unwinds.
    DROPS.load(Ordering::Relaxed) - before - 1
}

#[test]
fn n13_g14_4_threads_of_a_failed_block_are_unwound_and_run_their_destructors() {
    let executor = CpuExecutor::deterministic();
    // Every failed block's 1023 waiting threads drop their `Counted` before the launch
    // returns, the 17th failure as the first (nothing is leaked any more, so no budget).
    let ended: Vec<u32> = (0..17).map(|_| failing_launch(&executor)).collect();
    assert_eq!(ended, [1023; 17], "the waiting threads of a failed block are unwound");
    // On the parallel executor too.
    assert_eq!(failing_launch(&CpuExecutor::new()), 1023);
    // And the executor works on.
    executor.run("after", LaunchConfig::new(1u32, 1024u32), &|| sync_threads()).unwrap();
}
