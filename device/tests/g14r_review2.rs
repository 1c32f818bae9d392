//! Audit 2026-11-28b, second held-out review (audit/2026-11-28b/FINDINGS-review2.md): the CPU
//! executor's G14-4 change seen from a destructor.
//!
//! G14R-5 (pinned, documented): the threads of a failed block are unwound (G14-4), and every
//! wait of a thread being unwound raises the executor's cancellation. A destructor that waits
//! (a barrier, a warp operation, or 64 atomic accesses in a row, after which the executor lets
//! the block's other threads run) therefore panics inside the unwinding, and Rust aborts the
//! process. Before G14-4 such a thread was abandoned and the launch returned its error; now the
//! launch's error is printed and the process aborts. Not unsound (no frame is left); the
//! kernel-model's N13 paragraph says so.

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;

/// RAII that closes a block-wide step at scope end, a CUDA habit (`__syncthreads()` before the
/// shared memory is reused): harmless while every thread of the block reaches it.
struct SyncOnDrop;

impl Drop for SyncOnDrop {
    fn drop(&mut self) {
        sync_threads();
    }
}

/// In a run where every thread succeeds, the guard is fine; when another thread of the block
/// fails, the waiting thread's guard waits again during its unwinding, and the process aborts
/// after printing the launch's error. In a child process.
#[test]
fn g14r_5_a_destructor_that_waits_while_a_failed_block_is_unwound_aborts_after_saying_the_error() {
    const TEST: &str = "g14r_5_a_destructor_that_waits_while_a_failed_block_is_unwound_aborts_after_saying_the_error";
    let body = |fail: bool| {
        move || {
            if fail && thread_idx_x() == 1 {
                // No guard here: the failure is recorded while thread 0 waits in its body.
                panic!("thread 1 fails the block");
            }
            let _guard = SyncOnDrop;
            sync_threads();
        }
    };
    // Every thread reaches the guard: no error.
    CpuExecutor::deterministic().run("g14r_5_ok", LaunchConfig::new(1u32, 2u32), &body(false)).expect("the guard is fine in a run that succeeds");
    if std::env::var("FERROCUDA_G14R_5_CHILD").is_ok() {
        let result = CpuExecutor::deterministic().run("g14r_5_guard", LaunchConfig::new(1u32, 2u32), &body(true));
        println!("G14R-5 CHILD RETURNED: {result:?}");
        return;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env("FERROCUDA_G14R_5_CHILD", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&child.stdout), String::from_utf8_lossy(&child.stderr));
    println!("child: {:?}\n{stdout}\n{stderr}", child.status);
    assert!(!child.status.success() && !stdout.contains("G14R-5 CHILD RETURNED"), "today the child aborts (G14R-5): {:?}\n{stdout}\n{stderr}", child.status);
    assert!(stderr.contains("thread 1 fails the block"), "the launch's error is said before the abort, in:\n{stderr}");
}
