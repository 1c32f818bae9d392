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
/// (`Error::WorkStillRunning`), or its context faulted. What each owned is leaked, never freed
/// while the GPU may still use it; `Context::synchronize()` waits for the work for good.
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
