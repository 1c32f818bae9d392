//! Releases skipped because the work that used the memory could not be waited for (audit
//! 2026-11-27c F6): after `Stream::synchronize_timeout` reported work still running, or in a
//! faulted context, a drop leaks what it owns rather than free what the GPU may still touch.
//! Every such leak is counted ([`leaked_releases`]), and the first of a process is said on
//! standard error, so a drop in a retry loop never leaks silently.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;

static LEAKED: AtomicUsize = AtomicUsize::new(0);

/// How many releases (a [`DeviceBuffer`](crate::DeviceBuffer)'s, a
/// [`PinnedBuffer`](crate::PinnedBuffer)'s, a cuFFT plan's) this process has skipped so far
/// because the work that used the memory could not be waited for: it was reported still
/// running by [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout)
/// (`Error::WorkStillRunning`), or its context faulted; or because a stream that used a
/// device buffer was captured into another library's graph when it dropped. What each owned is
/// leaked, never freed while the GPU may still use it; `Context::synchronize()` waits for the
/// work for good.
pub fn leaked_releases() -> usize {
    LEAKED.load(Ordering::Relaxed)
}

/// Notes one skipped release of `what` after the wait for its work failed with `error`:
/// counted, and said on standard error the first time in the process.
pub(crate) fn leaked_after_failed_wait(what: &str, error: &Error) {
    if LEAKED.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!("{}", message(what, error));
    }
}

/// For a release whose driver or library call waits for *all* of the context's work, not only
/// for the streams that used what it frees (`cublasDestroy` "implicitly calls
/// `cudaDeviceSynchronize()`", `cuMemFreeHost`, `cufftDestroy`, `cuMemFree`: audit 2026-11-27f
/// F12-2, each hung for ever after a reported timeout). `timed_out` is
/// `Context::timed_out()`: while work given up on still runs, the release does not block (the
/// rule of every release, host-safety.md "After a timeout"): it is counted and said as a leak of
/// `what` (`operation` names the call that would have waited). True when it may go on.
pub(crate) fn may_release(what: &str, timed_out: bool, operation: &'static str) -> bool {
    if timed_out {
        leaked_after_failed_wait(what, &Error::WorkStillRunning { operation });
    }
    !timed_out
}

/// Notes one skipped release of `what` (device memory) because a stream that used it is
/// captured into a graph ferrocuda does not know of (another library's capture of a borrowed
/// stream): a free queued there would become a node of that graph, and nothing tells when it
/// ends. Counted with the others (audit 2026-11-28d review3, G16S-4: it was counted nowhere)
/// and said each time.
pub(crate) fn leaked_into_foreign_capture(what: &str) {
    LEAKED.fetch_add(1, Ordering::Relaxed);
    eprintln!(
        "ferrocuda: a {what} was dropped while a stream that used it is captured into a graph outside ferrocuda's knowledge \
         (another library's capture of a borrowed stream); its memory is leaked rather than freed into that graph \
         (`ferrocuda_host::leaked_releases()` counts it). Drop it after that capture ends"
    );
}

/// The first leak's message: what leaked, why, and what to do.
fn message(what: &str, error: &Error) -> String {
    format!(
        "ferrocuda: a {what} was dropped while the work that used it could not be waited for ({error}); it is leaked rather than \
         freed under the GPU, as is every release after it that cannot wait (this message is said once per process; \
         `ferrocuda_host::leaked_releases()` counts them). Call `Context::synchronize()` to wait for the work for good before \
         dropping, or end the process"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F12-2: a release whose call would wait for the whole device (`cublasDestroy`,
    /// `cuMemFreeHost`, ...) goes on when no timeout is pending, and is skipped, counted and
    /// named after one (the GPU half: `f12_2_drops_and_pinned_allocations_after_a_timeout_return`
    /// in tests/gpu_host_seams.rs).
    #[test]
    fn f12_2_a_release_that_would_wait_for_the_device_after_a_timeout_is_skipped_and_counted() {
        let before = leaked_releases();
        assert!(may_release("cuBLAS handle", false, "cublasDestroy"));
        assert!(!may_release("cuBLAS handle", true, "cublasDestroy"));
        assert!(leaked_releases() > before);
        let text = message("cuBLAS handle", &Error::WorkStillRunning { operation: "cublasDestroy" });
        assert!(text.contains("cuBLAS handle was dropped") && text.contains("cublasDestroy"), "{text}");
    }

    /// F6: each skipped release is counted (the count the drops' tests read), and the message
    /// names what leaked, the cause and the way out.
    #[test]
    fn f6_a_release_skipped_after_a_timeout_is_counted_and_said() {
        let error = Error::WorkStillRunning { operation: "a release's wait for a stream" };
        let before = leaked_releases();
        leaked_after_failed_wait("PinnedBuffer", &error);
        leaked_after_failed_wait("cuFFT plan", &error);
        assert!(leaked_releases() >= before + 2);
        let text = message("PinnedBuffer", &error);
        assert!(text.contains("PinnedBuffer was dropped") && text.contains("leaked") && text.contains("synchronize_timeout"), "{text}");
        assert!(text.contains("Context::synchronize()") && text.contains("leaked_releases()"), "{text}");
    }
}
