//! Audit 2026-11-28b (held-out review, session 14), the CPU executor's findings: G14-4.
//!
//! Kernel bodies are closures given to `CpuExecutor::run`, the safe public call that every
//! generated `name::launch_cpu` makes with the kernel's body: what a body does here, a
//! `#[kernel]` body run by `launch_cpu` does the same way (the body is host code there, with
//! `std`, as audit 2026-11-28's G13-1 used).
//!
//! G14-4 (fixed): the threads of a failed block were abandoned where they waited
//! (`scheduler::abandon`: `Coroutine::force_reset`, the stack leaked, no destructor run; audit
//! N13). corosensei's
//! contract for `force_reset` is that "there are no objects currently on the coroutine's
//! stack that need to execute `Drop` code": a `longjmp` over the frames. A kernel body's frames
//! are arbitrary safe code, and `std::thread::scope` is safe code whose soundness rests on its
//! frame never being left without its join: a thread waiting at a barrier inside a scope is
//! abandoned, the launch returns, the caller frees what the scope's threads borrowed, and they
//! go on using it. Now they are unwound (`scheduler::end_waiting`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;

/// One block of two: thread 0 opens a `std::thread::scope`, spawns a thread in it that sets
/// `done` after `delay`, and waits at a barrier inside the scope; thread 1 panics, which fails
/// the block while thread 0 waits. Returns the launch's result.
fn scope_across_a_failed_barrier(executor: &CpuExecutor, done: &Arc<AtomicBool>, delay: Duration) -> Result<(), CpuError> {
    executor.run("g14_4_scope", LaunchConfig::new(1u32, 2u32), &|| {
        if thread_idx_x() == 0 {
            let done = Arc::clone(done);
            std::thread::scope(|s| {
                s.spawn(move || {
                    std::thread::sleep(delay);
                    done.store(true, Ordering::SeqCst);
                });
                sync_threads();
            });
        } else {
            panic!("thread 1 fails the block");
        }
    })
}

/// The wanted property: a launch returns only after every scope opened by its GPU threads has
/// joined its threads (the threads of a failed block are unwound, so `std::thread::scope` joins
/// on the way out, as it does for a panic), whatever the executor does with the block's other
/// threads.
#[test]
fn g14_4_a_failed_launch_returns_only_after_the_scoped_threads_of_its_threads_ended() {
    for executor in [CpuExecutor::deterministic(), CpuExecutor::new()] {
        let done = Arc::new(AtomicBool::new(false));
        let result = scope_across_a_failed_barrier(&executor, &done, Duration::from_millis(200));
        assert!(matches!(&result, Err(CpuError::KernelPanic(p)) if p.message == "thread 1 fails the block"), "{result:?}");
        assert!(done.load(Ordering::SeqCst), "the launch returned while a scoped thread of one of its GPU threads still ran");
    }
}

/// What G14-4 allowed from safe code: the scoped thread wrote memory the caller freed after the
/// launch returned (before the fix: the victim's first element overwritten at the freed
/// address, 3 of 3 runs). Fixed, the write lands before the launch returns, in the caller's
/// live buffer. (Were the bug back, this test would write freed memory: undefined behaviour.)
#[test]
fn g14_4_a_scoped_thread_of_a_failed_launch_writes_memory_the_caller_freed() {
    let executor = CpuExecutor::deterministic();
    let out: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(7)).collect();
    let freed = out.as_ptr() as usize;
    let out_ref: &[AtomicU32] = &out;
    let result = executor.run("g14_4_use_after_free", LaunchConfig::new(1u32, 2u32), &|| {
        if thread_idx_x() == 0 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(200));
                    out_ref[0].store(0xdead, Ordering::SeqCst);
                });
                sync_threads();
            });
        } else {
            panic!("thread 1 fails the block");
        }
    });
    assert!(matches!(result, Err(CpuError::KernelPanic(_))), "{result:?}");
    // The launch has returned: the borrow is over, and safe code frees the buffer.
    let written_before_the_free = out[0].load(Ordering::SeqCst);
    drop(out);
    let victim: Vec<u32> = vec![7; 64];
    std::thread::sleep(Duration::from_millis(400));
    let (first, at) = (victim[0], victim.as_ptr() as usize);
    assert_eq!(
        (written_before_the_free, first),
        (0xdead, 7),
        "a store from a scoped thread of the failed launch landed after the launch returned (freed {freed:#x}, victim {at:#x})"
    );
}

/// A body that catches the cancellation (a `catch_unwind` around its barrier) and waits again,
/// for ever: its frames can neither be completed nor left (G14-4), so the executor aborts the
/// process with the launch's error after 1000 resumes, rather than hang (before G14-4's fix the
/// thread was abandoned, which a watchdog's stop relied on too). In a child process.
#[test]
fn g14_4_a_thread_that_keeps_catching_its_cancellation_aborts_the_process_instead_of_hanging() {
    const TEST: &str = "g14_4_a_thread_that_keeps_catching_its_cancellation_aborts_the_process_instead_of_hanging";
    if std::env::var("FERROCUDA_G14_4_CHILD").is_ok() {
        let result = CpuExecutor::deterministic().run("g14_4_catcher", LaunchConfig::new(1u32, 2u32), &|| {
            if thread_idx_x() == 0 {
                loop {
                    let _ = std::panic::catch_unwind(sync_threads);
                }
            } else {
                panic!("thread 1 fails the block");
            }
        });
        println!("G14-4 CHILD RETURNED: {result:?}");
        return;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env("FERROCUDA_G14_4_CHILD", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&child.stdout), String::from_utf8_lossy(&child.stderr));
    assert!(!child.status.success() && !stdout.contains("G14-4 CHILD RETURNED"), "the child should abort: {:?}\n{stdout}\n{stderr}", child.status);
    assert!(
        stderr.contains("caught the cancellation of its failed block 1000 times") && stderr.contains("thread 1 fails the block"),
        "the reason and the launch's error, in:\n{stderr}"
    );
}
