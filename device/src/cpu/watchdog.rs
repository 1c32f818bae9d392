//! The launch watchdog ([`CpuExecutor::with_watchdog`]): what each worker runs, published for
//! a watcher thread that stops a launch running longer than its limit.
//!
//! How a launch is stopped: GPU threads switch only at barriers and warp operations, and a
//! running coroutine cannot be pre-empted. At the limit the watchdog sets a stop flag; every
//! worker checks it at each switch, so a kernel whose threads still switch (a loop around a
//! barrier) is unwound cleanly and the launch returns [`CpuError::Watchdog`] naming the
//! threads that had not finished. A thread that never switches (`while flag == 0 {}`) keeps
//! its worker busy; the launch cannot return while it runs, since it borrows the launch's
//! arguments (returning would let them be freed under it), and it cannot be unwound from
//! outside. If a worker is still inside the same thread after a grace period, the watchdog
//! prints the same report, naming that thread as never having yielded, and aborts the process
//! (a test harness or CI job then fails with the report instead of hanging).
//!
//! [`CpuExecutor::with_watchdog`]: super::CpuExecutor::with_watchdog
//! [`CpuError::Watchdog`]: super::CpuError::Watchdog

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use ferrocuda_types::Dim3;

use super::error::{CpuError, StuckThread, ThreadActivity, Watchdog};

/// What one worker runs, published with relaxed atomics for the watchdog.
#[derive(Default)]
pub(crate) struct WorkerStatus {
    block: [AtomicU32; 3],
    thread: [AtomicU32; 3],
    /// A GPU thread runs on the worker now.
    in_thread: AtomicBool,
    /// Resumes so far: unchanged while one thread runs without yielding.
    resumes: AtomicU64,
}

impl WorkerStatus {
    pub(crate) fn enter_block(&self, block: Dim3) {
        for (axis, value) in self.block.iter().zip([block.x, block.y, block.z]) {
            axis.store(value, Ordering::Relaxed);
        }
    }

    pub(crate) fn enter_thread(&self, thread: Dim3) {
        for (axis, value) in self.thread.iter().zip([thread.x, thread.y, thread.z]) {
            axis.store(value, Ordering::Relaxed);
        }
        // Only this worker writes it: a plain increment, not a locked one.
        self.resumes.store(self.resumes.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.in_thread.store(true, Ordering::Relaxed);
    }

    pub(crate) fn leave_thread(&self) {
        self.in_thread.store(false, Ordering::Relaxed);
    }

    fn dim(axes: &[AtomicU32; 3]) -> Dim3 {
        Dim3 { x: axes[0].load(Ordering::Relaxed), y: axes[1].load(Ordering::Relaxed), z: axes[2].load(Ordering::Relaxed) }
    }
}

/// Set when every worker of a launch has returned.
#[derive(Default)]
pub(crate) struct Finished {
    done: Mutex<bool>,
    signal: Condvar,
}

impl Finished {
    pub(crate) fn set(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.signal.notify_all();
    }

    /// Waits until set or until `deadline`; whether it was set.
    fn wait_until(&self, deadline: Instant) -> bool {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            done = self.signal.wait_timeout(done, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

/// How long after the limit a worker may stay inside one GPU thread before the watchdog
/// concludes that the thread never yields.
pub(crate) fn grace(limit: Duration) -> Duration {
    limit.clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// The watcher of one launch: waits for `finished` until `limit` after `start`, then sets
/// `stop`; if a worker is still in the same GPU thread after the grace period, prints the
/// report and aborts the process. Returns whether it fired.
pub(crate) fn watch(kernel: &str, start: Instant, limit: Duration, finished: &Finished, stop: &AtomicBool, workers: &[WorkerStatus]) -> bool {
    if finished.wait_until(start + limit) {
        return false;
    }
    let before: Vec<(bool, u64)> = workers.iter().map(|w| (w.in_thread.load(Ordering::Relaxed), w.resumes.load(Ordering::Relaxed))).collect();
    stop.store(true, Ordering::Relaxed);
    if finished.wait_until(Instant::now() + grace(limit)) {
        return true;
    }
    let stuck: Vec<StuckThread> = workers
        .iter()
        .zip(before)
        .filter(|(w, _)| w.in_thread.load(Ordering::Relaxed))
        .map(|(w, (was_in, resumes))| {
            let same = was_in && w.resumes.load(Ordering::Relaxed) == resumes;
            let activity = if same { ThreadActivity::NeverYielded } else { ThreadActivity::Runnable };
            StuckThread { block: WorkerStatus::dim(&w.block), thread: WorkerStatus::dim(&w.thread), activity }
        })
        .collect();
    let error = CpuError::Watchdog(Watchdog { kernel: kernel.to_owned(), limit, elapsed: start.elapsed(), stuck });
    eprintln!(
        "\nferrocuda CPU executor: {error}\n\
         Aborting the process: a GPU thread that reaches no barrier, warp operation or atomic access cannot be stopped from outside, \
         and the launch cannot return while it still uses the launch's arguments."
    );
    std::process::abort();
}
