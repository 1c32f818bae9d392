//! Process exit while a communicator's finaliser thread may still be inside NCCL.
//!
//! A [`Communicator`](super::Communicator)'s drop finalises it on a thread of its own and
//! returns after at most its drop timeout plus a second, leaving a finalisation that NCCL has
//! not finished to that thread (`comm.rs`, issue 29). If the process then exits, glibc's
//! `exit` runs the handlers registered with `atexit`/`__cxa_atexit`, newest first (the C++
//! static destructors of libnccl, loaded when the first communicator was made, and CUDA's own
//! teardown among them), and then the ELF destructors of every loaded library, while the
//! finaliser thread is still executing inside `ncclCommFinalize`/`ncclCommAbort`/
//! `ncclCommDestroy` on the state they destroy: the H200 run of `s9_item2_*` (NCCL 2.28)
//! ended in a segmentation fault at exit after its drop had left the finaliser running. The
//! finaliser's own code touches nothing that exit destroys (its `Context` handle and a
//! channel live on the heap, which exit does not free); only the NCCL and CUDA calls do.
//!
//! So every finaliser thread holds an [`InFlight`] token from before it starts until after its
//! last NCCL or CUDA call (the context handle it holds is released before the token), and the
//! first finaliser registers an exit handler (once per process), after libnccl was loaded, so
//! glibc runs it before libnccl's and CUDA's teardown. The handler waits for the tokens:
//! - all finalisers done within [`EXIT_WAIT`]: the exit goes on as usual (nothing runs inside
//!   NCCL any more);
//! - one still inside NCCL after it: the handler says so on standard error and ends the process
//!   with `_exit` and the status `exit` was called with, skipping the library teardown that would
//!   crash under that thread (and every handler registered before this one: C `stdio` buffers
//!   are not flushed; Rust's standard output is flushed before `exit` is called).
//!
//! On glibc the handler gets the exit status (`on_exit`); elsewhere (`atexit`) it only waits,
//! and the process exits as before past the bound.

use std::sync::{Condvar, Mutex, Once};
use std::time::{Duration, Instant};

/// How long the exit handler waits for finaliser threads still inside NCCL (5 s).
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Finaliser threads that have not made their last NCCL or CUDA call yet.
static IN_FLIGHT: Mutex<usize> = Mutex::new(0);
/// Signalled whenever [`IN_FLIGHT`] drops.
static SETTLED: Condvar = Condvar::new();

/// Held by a finaliser thread until it has made its last NCCL or CUDA call.
pub(crate) struct InFlight(());

impl InFlight {
    /// A token for a finaliser about to start; registers the exit handler on first use.
    pub(crate) fn begin() -> InFlight {
        register_exit_handler();
        *IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        InFlight(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut count = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        *count -= 1;
        SETTLED.notify_all();
    }
}

/// Waits until no finaliser is in flight, at most `bound`; how many still are.
pub(crate) fn wait_settled(bound: Duration) -> usize {
    let deadline = Instant::now() + bound;
    let mut count = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    while *count > 0 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        count = SETTLED.wait_timeout(count, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
    *count
}

/// What the exit handler prints when finalisers are still inside NCCL after [`EXIT_WAIT`].
fn exit_message(still: usize) -> String {
    format!(
        "ferrocuda-collectives: the process is exiting while {still} NCCL communicator finalisation(s) left to a background \
         thread by a drop are still inside NCCL after {EXIT_WAIT:?}; ending the process now (_exit, same status) rather than \
         letting the exit tear NCCL and CUDA down under that thread (a crash). Synchronise a communicator's streams, or \
         call Communicator::synchronize with a Config::timeout, before dropping it"
    )
}

/// The exit handler: waits for the finalisers, then ends the process with `status` if one is
/// still inside NCCL (`None`: the status is not known, and the exit goes on).
fn at_exit(status: Option<i32>) {
    let still = wait_settled(exit_wait());
    if still == 0 {
        return;
    }
    eprintln!("{}", exit_message(still));
    if let Some(status) = status {
        // SAFETY: ends the process at once; nothing of this process runs after it.
        unsafe { libc::_exit(status) }
    }
}

/// The handler's wait: [`EXIT_WAIT`], or a shorter one a test child sets.
fn exit_wait() -> Duration {
    #[cfg(test)]
    if let Some(ms) = std::env::var("FERROCUDA_TEST_EXIT_WAIT_MS").ok().and_then(|v| v.parse().ok()) {
        return Duration::from_millis(ms);
    }
    EXIT_WAIT
}

/// Registers [`at_exit`] with the C library, once per process.
fn register_exit_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            unsafe extern "C" {
                /// glibc's `on_exit`: like `atexit`, with the status passed to `exit`.
                fn on_exit(function: extern "C" fn(std::ffi::c_int, *mut std::ffi::c_void), argument: *mut std::ffi::c_void) -> std::ffi::c_int;
            }
            extern "C" fn handler(status: std::ffi::c_int, _: *mut std::ffi::c_void) {
                at_exit(Some(status));
            }
            // SAFETY: registers a handler that lives for the whole process (a plain function).
            if unsafe { on_exit(handler, std::ptr::null_mut()) } != 0 {
                eprintln!("ferrocuda-collectives: could not register the exit handler that waits for NCCL finalisations");
            }
        }
        #[cfg(all(unix, not(all(target_os = "linux", target_env = "gnu"))))]
        {
            extern "C" fn handler() {
                at_exit(None);
            }
            // SAFETY: as above.
            if unsafe { libc::atexit(handler) } != 0 {
                eprintln!("ferrocuda-collectives: could not register the exit handler that waits for NCCL finalisations");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait ends as soon as the last token drops, and reports the ones still held past
    /// its bound.
    #[test]
    fn exit_wait_ends_when_the_finalisers_are_done_and_is_bounded_otherwise() {
        // Other tests of this binary may hold tokens: count relative to the start.
        let held = InFlight::begin();
        let start = Instant::now();
        assert!(wait_settled(Duration::from_millis(100)) >= 1);
        assert!(start.elapsed() >= Duration::from_millis(100));
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        let start = Instant::now();
        let still = wait_settled(Duration::from_secs(10));
        releaser.join().unwrap();
        assert_eq!(still, 0);
        assert!(start.elapsed() < Duration::from_secs(5), "woken when the token dropped: {:?}", start.elapsed());
        assert!(exit_message(1).contains("_exit") && exit_message(1).contains("synchronize"));
    }

    /// Runs this test binary again with only `child` (a test of this module that returns
    /// while a "finaliser" thread holds a token) and returns its exit status and stderr.
    fn run_child(child: &str, wait_ms: u64) -> (Option<i32>, String, Duration) {
        let exe = std::env::current_exe().unwrap();
        let start = Instant::now();
        let output = std::process::Command::new(exe)
            .args(["--exact", child, "--nocapture", "--test-threads=1"])
            .env("FERROCUDA_TEST_EXIT_CHILD", "1")
            .env("FERROCUDA_TEST_EXIT_WAIT_MS", wait_ms.to_string())
            .output()
            .unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout), start.elapsed())
    }

    /// NCCL item of issue 29 (the `s9_item2` exit crash): a process whose `main` (here the test
    /// harness) returns while a finaliser thread is still "inside NCCL" waits for it at exit:
    /// the thread's last words appear, and the status is the harness's (0).
    #[test]
    fn s10_nccl_exit_waits_for_a_finaliser_still_running() {
        let (status, output, _) = run_child("nccl::exit_guard::tests::child_returns_while_a_finaliser_runs", 10_000);
        assert_eq!(status, Some(0), "{output}");
        assert!(output.contains("finaliser: done with NCCL"), "the exit did not wait for the finaliser: {output}");
    }

    /// A finaliser that never returns: the exit waits for the bound, says why, and ends the
    /// process with the harness's status instead of crashing or hanging.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn s10_nccl_exit_with_a_finaliser_stuck_in_nccl_ends_after_the_bound_with_the_status() {
        let (status, output, took) = run_child("nccl::exit_guard::tests::child_returns_while_a_finaliser_is_stuck", 300);
        assert_eq!(status, Some(0), "{output}");
        assert!(output.contains("still inside NCCL") && output.contains("_exit"), "{output}");
        assert!(took < Duration::from_secs(20), "{took:?}");
    }

    /// Child of `s10_nccl_exit_waits_for_a_finaliser_still_running` (does nothing otherwise).
    #[test]
    fn child_returns_while_a_finaliser_runs() {
        if std::env::var_os("FERROCUDA_TEST_EXIT_CHILD").is_none() {
            return;
        }
        let token = InFlight::begin();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            eprintln!("finaliser: done with NCCL");
            drop(token);
        });
    }

    /// Child of `s10_nccl_exit_with_a_finaliser_stuck_in_nccl_*` (does nothing otherwise).
    #[test]
    fn child_returns_while_a_finaliser_is_stuck() {
        if std::env::var_os("FERROCUDA_TEST_EXIT_CHILD").is_none() {
            return;
        }
        let token = InFlight::begin();
        std::thread::spawn(move || {
            let _token = token;
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        });
    }
}
