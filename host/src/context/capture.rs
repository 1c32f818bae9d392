//! Stream capture bookkeeping of a context: the count of running captures (the releases
//! postponed until they end are in `release`), and the explicit modules a capture's graph
//! must keep (U5).

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Context, lock};

/// Captures begun through `Stream::begin_capture` and not ended yet, in every context of the
/// process. While none runs, no stream of ferrocuda's can be part of a capture of ferrocuda's
/// (a stream joins one only by waiting on an event recorded in it), so the checks of the
/// tail-event rules (`Stream::tail_for`) need no driver query.
static CAPTURES_RUNNING: AtomicUsize = AtomicUsize::new(0);

/// True while a capture begun through ferrocuda runs in any context of the process.
#[inline]
pub(crate) fn any_capture_running() -> bool {
    CAPTURES_RUNNING.load(Ordering::SeqCst) > 0
}

impl Context {
    /// True while a stream of this context is being captured (through `Stream::begin_capture`).
    #[inline]
    pub(crate) fn is_capturing(&self) -> bool {
        self.inner.capturing.load(Ordering::Acquire) > 0
    }

    /// Counts a capture that began; `with_legacy`: of a stream ordered with the legacy default
    /// stream, whose work (a free, a wait) would then invalidate the capture.
    pub(crate) fn capture_started(&self, with_legacy: bool) {
        if with_legacy {
            self.inner.capturing_with_legacy.fetch_add(1, Ordering::AcqRel);
        }
        self.inner.capturing.fetch_add(1, Ordering::AcqRel);
        CAPTURES_RUNNING.fetch_add(1, Ordering::SeqCst);
    }

    /// How many captures run in the context (begun through `Stream::begin_capture`).
    pub(crate) fn captures(&self) -> usize {
        self.inner.capturing.load(Ordering::Acquire)
    }

    /// True while work queued on the legacy default stream would invalidate a capture: one of
    /// a stream ordered with it ([`Stream::new`](crate::Stream::new)) runs through
    /// `Stream::begin_capture`. (Another library's capture of a stream ordered with the legacy
    /// one is not seen: `Stream::from_raw`'s contract covers a borrowed stream's captures.)
    pub(crate) fn legacy_blocked_by_capture(&self) -> bool {
        self.inner.capturing_with_legacy.load(Ordering::Acquire) > 0
    }

    /// Called when a capture ends: once none runs any more, performs the releases postponed
    /// meanwhile (see `context::release`).
    pub(crate) fn capture_ended(&self, with_legacy: bool) {
        if with_legacy {
            self.inner.capturing_with_legacy.fetch_sub(1, Ordering::AcqRel);
        }
        CAPTURES_RUNNING.fetch_sub(1, Ordering::SeqCst);
        if self.inner.capturing.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.drain_deferred();
        }
    }

    /// Keeps `module` loaded for the graph that `stream`'s running capture will make (U5).
    /// `key` is the capturing stream's [`Stream::key`](crate::Stream::key).
    pub(crate) fn keep_for_capture(&self, key: usize, module: Arc<dyn Any + Send + Sync>) {
        let mut captured = lock(&self.inner.captured_modules);
        if !captured.iter().any(|(k, m)| *k == key && Arc::ptr_eq(m, &module)) {
            captured.push((key, module));
        }
    }

    /// The modules kept for `stream`'s capture, handed to its graph.
    pub(crate) fn take_captured_modules(&self, key: usize) -> Vec<Arc<dyn Any + Send + Sync>> {
        let mut captured = lock(&self.inner.captured_modules);
        let (mine, others) = std::mem::take(&mut *captured).into_iter().partition(|(k, _)| *k == key);
        *captured = others;
        mine.into_iter().map(|(_, m): (usize, _)| m).collect()
    }
}
