//! Regression (audit 2026-11-24 N13): the threads of a failed block are abandoned where they
//! wait, not unwound, so their destructors do not run (one that panics cannot abort the
//! process); past the executor's budget of leaked stacks they are unwound as before. Its own
//! test binary: the budget is per process.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LEAKED_STACK_BUDGET, LaunchConfig, leaked_stacks};
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
fn n13_threads_of_a_failed_block_are_abandoned_until_the_leak_budget_then_unwound() {
    let executor = CpuExecutor::deterministic();
    assert_eq!((leaked_stacks(), LEAKED_STACK_BUDGET), (0, 16384), "nothing leaked before the first failure");
    // 16 failed blocks of 1023 waiting threads leak 16368 stacks of the budget of 16384.
    let abandoned: Vec<u32> = (0..16).map(|_| failing_launch(&executor)).collect();
    assert_eq!(abandoned, [0; 16], "abandoned threads run no destructor");
    assert_eq!(leaked_stacks(), 16 * 1023, "the leak is counted, stack by stack");
    // The next block's first 16 waiting threads use up the budget; its other 1007 and every
    // later block's are unwound: their destructors run.
    assert_eq!(failing_launch(&executor), 1007);
    assert_eq!(leaked_stacks(), LEAKED_STACK_BUDGET);
    assert_eq!(failing_launch(&executor), 1023);
    assert_eq!(leaked_stacks(), LEAKED_STACK_BUDGET, "past the budget nothing more leaks");
    // And the executor works on.
    executor.run("after", LaunchConfig::new(1u32, 1024u32), &|| sync_threads()).unwrap();
}
