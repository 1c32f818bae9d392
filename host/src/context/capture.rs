//! Stream capture bookkeeping of a context: the count of running captures, the buffer releases
//! postponed until they end (E1b), and the explicit modules a capture's graph must keep (U5).

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use cudarc::driver::sys;

use super::{Context, lock};

/// A buffer release postponed until no capture runs in the context.
pub(crate) type DeferredRelease = Box<dyn FnOnce(&Context) + Send>;

impl Context {
    /// True while a stream of this context is being captured (through `Stream::begin_capture`).
    #[inline]
    pub(crate) fn is_capturing(&self) -> bool {
        self.inner.capturing.load(Ordering::Acquire) > 0
    }

    pub(crate) fn capture_started(&self) {
        self.inner.capturing.fetch_add(1, Ordering::AcqRel);
    }

    /// Called when a capture ends: once none runs any more, performs the releases of the
    /// buffers dropped meanwhile.
    pub(crate) fn capture_ended(&self) {
        if self.inner.capturing.fetch_sub(1, Ordering::AcqRel) == 1 {
            let deferred = std::mem::take(&mut *lock(&self.inner.deferred));
            for release in deferred {
                release(self);
            }
        }
    }

    /// Postpones a buffer's release until no capture runs (E1b); false when none runs now
    /// (then release it now).
    pub(crate) fn defer_while_capturing(&self, release: impl FnOnce(&Context) + Send + 'static) -> Result<(), DeferredRelease> {
        let mut deferred = lock(&self.inner.deferred);
        // Checked under the lock `capture_ended` drains with, so nothing is left behind.
        if self.is_capturing() {
            deferred.push(Box::new(release));
            Ok(())
        } else {
            Err(Box::new(release))
        }
    }

    /// How many buffer releases wait for a capture to end (for tests and diagnostics).
    pub fn deferred_releases(&self) -> usize {
        lock(&self.inner.deferred).len()
    }

    /// Keeps `module` loaded for the graph that `stream`'s running capture will make (U5).
    /// `stream` is the capturing stream's raw handle.
    pub(crate) fn keep_for_capture(&self, stream: sys::CUstream, module: Arc<dyn Any + Send + Sync>) {
        let key = stream as usize;
        let mut captured = lock(&self.inner.captured_modules);
        if !captured.iter().any(|(k, m)| *k == key && Arc::ptr_eq(m, &module)) {
            captured.push((key, module));
        }
    }

    /// The modules kept for `stream`'s capture, handed to its graph.
    pub(crate) fn take_captured_modules(&self, stream: sys::CUstream) -> Vec<Arc<dyn Any + Send + Sync>> {
        let key = stream as usize;
        let mut captured = lock(&self.inner.captured_modules);
        let (mine, others) = std::mem::take(&mut *captured).into_iter().partition(|(k, _)| *k == key);
        *captured = others;
        mine.into_iter().map(|(_, m): (usize, _)| m).collect()
    }
}
