//! Starting over after a kernel fault.

use std::sync::Arc;

use super::{Context, ContextKind, PRIMARY};
use crate::driver::{self, DriverError};
use crate::error::{Error, Result};

impl Context {
    /// Tries to start over after a kernel fault (a "sticky" error, after which every call in
    /// the context fails): gives up this context and returns a fresh, working one of the same
    /// kind on the same device, or [`Error::ProcessPoisoned`] when the driver refuses.
    ///
    /// - A created context ([`Context::create`]) is replaced by a new one (`cuCtxCreate`);
    ///   the old one is destroyed when its last handle drops. Only ferrocuda holds such a
    ///   context, so nothing else loses anything.
    /// - The primary context is never reset here: [`Error::SharedContextNotReset`] (P6). Other
    ///   libraries of the process (cudarc, candle, PyTorch, the CUDA runtime) may hold it, and
    ///   a reset destroys their streams and memory under their safe APIs (cudarc's next call
    ///   crashed the process in the audit). If you know that nothing else uses it,
    ///   [`Context::reset_primary`] (`unsafe`) resets it.
    /// - A context borrowed from another library is its owner's to start over
    ///   ([`Error::BorrowedHandle`]).
    ///
    /// **Measured (CUDA 13.0 driver 580, H200):** after a kernel fault the driver poisons the
    /// whole process, as NVIDIA's documentation of the sticky errors says ("the process must
    /// be terminated and relaunched"): every new or retained context fails with the same
    /// error, so this returns [`Error::ProcessPoisoned`]. The recipe that works is a new
    /// process: run GPU work that may fault in a child process (as `tests/gpu_fault.rs` and
    /// `tests/gpu_contexts.rs` do) and start a new one after a fault.
    pub fn recover(self) -> Result<Context> {
        let ordinal = self.inner.device.ordinal();
        match self.inner.kind {
            ContextKind::Created(schedule) => {
                drop(self);
                Context::create(ordinal, schedule)?.usable_after_recovery()
            }
            ContextKind::Borrowed => Err(Error::BorrowedHandle {
                problem: "cannot recover a context borrowed from another library: its owner must start it over (then borrow the new one)".into(),
            }),
            ContextKind::Primary => Err(Error::SharedContextNotReset { device: ordinal }),
        }
    }

    /// Resets the device's primary context (`cuDevicePrimaryCtxReset`) once this is the last
    /// ferrocuda handle to it, and returns the fresh primary context (or
    /// [`Error::ProcessPoisoned`], see [`Context::recover`]). Drop every buffer, stream,
    /// event, graph and clone of the context first, or get [`Error::ContextStillInUse`]
    /// (nothing is reset then).
    ///
    /// Against other threads (S3): whether this handle is the last one is decided in one
    /// atomic step. A thread that revives the context first ([`Context::current`] on a thread
    /// where it was bound, [`Context::primary`]) holds a handle, and this then fails with
    /// [`Error::ContextStillInUse`], resetting nothing. Once the last handle is taken,
    /// [`Context::current`] returns `None` everywhere, and [`Context::primary`] waits until
    /// the reset is done and returns the fresh context. No ferrocuda handle ever refers to a
    /// context that is being reset.
    ///
    /// Refused for a context that is not a primary one (use [`Context::recover`]).
    ///
    /// # Safety
    /// Nothing else in the process uses the device's primary context, now or through handles
    /// it keeps: no other library (cudarc, candle, PyTorch, the CUDA runtime, cuBLAS, ...)
    /// holds streams, memory, modules or events in it, since the reset destroys them under
    /// their owners; and no ferrocuda value adopted from such a library
    /// ([`crate::borrowed`]) is alive. ferrocuda cannot check this: the driver does not say
    /// who else retains the primary context.
    pub unsafe fn reset_primary(self) -> Result<Context> {
        let ordinal = self.inner.device.ordinal();
        if self.inner.kind != ContextKind::Primary {
            return Err(Error::BorrowedHandle {
                problem: format!("reset_primary on a context that is not device {ordinal}'s primary context: use `Context::recover`"),
            });
        }
        // Under the registry lock, `Context::primary` cannot hand out a handle; the take below
        // is atomic against `Context::current()` upgrading its weak handle on another thread
        // (S3): see `take_last_handle`.
        let registry = PRIMARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let device = self.inner.device;
        let inner = take_last_handle(self.inner).map_err(|other_handles| Error::ContextStillInUse { device: ordinal, other_handles })?;
        // Releases our reference to the primary context (after its work is done).
        drop(inner);
        // SAFETY: no ferrocuda handle to this primary context is left, and none can appear:
        // the last one was taken above, so weak handles no longer upgrade, and
        // `Context::primary` waits for the registry lock. No other user: the caller's contract.
        unsafe { driver::context::primary_reset(device.raw()) }?;
        drop(registry);
        Context::primary(ordinal)?.usable_after_recovery()
    }

    /// Checks that a context made by `recover` or `reset_primary` can do work: the driver may keep the whole
    /// process poisoned after a fault (see [`Error::ProcessPoisoned`]).
    fn usable_after_recovery(self) -> Result<Self> {
        // Bound for the probe only (G20R-4: a created context is never left current).
        let bound = self.bind()?;
        let mut probe = 0;
        // SAFETY: a one-byte allocation in the bound context, freed right away.
        let outcome = unsafe { driver::memory::alloc(&mut probe, 1) }.and_then(|()| {
            // SAFETY: frees the allocation made above.
            unsafe { driver::memory::free(probe) }?;
            // SAFETY: no arguments; the context is bound.
            unsafe { driver::context::synchronize() }
        });
        drop(bound);
        outcome.map_err(poisoned_if_sticky)?;
        Ok(self)
    }
}

/// Takes `inner` if it is the last strong handle, in one atomic step (`Arc::try_unwrap`): a
/// weak handle upgraded on another thread before it makes it fail (with the count of other
/// handles); once it succeeded, no weak handle can be upgraded any more.
pub(super) fn take_last_handle<T>(inner: Arc<T>) -> std::result::Result<T, usize> {
    Arc::try_unwrap(inner).map_err(|shared| Arc::strong_count(&shared) - 1)
}

/// A sticky error outside the context that faulted means the driver poisoned the process.
pub(super) fn poisoned_if_sticky(error: DriverError) -> Error {
    if error.is_sticky() { Error::ProcessPoisoned { source: error } } else { Error::Driver(error) }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use crate::Error;

    /// P6: `recover` refuses the primary context with an error that names why (other
    /// libraries' state) and both ways out.
    #[test]
    fn p6_recover_of_the_primary_context_names_the_shared_state_and_the_ways_out() {
        let message = Error::SharedContextNotReset { device: 0 }.to_string();
        assert!(message.contains("does not reset the primary context of device 0"), "{message}");
        assert!(message.contains("cudarc") && message.contains("PyTorch"), "{message}");
        assert!(message.contains("Context::create") && message.contains("reset_primary()"), "{message}");
    }
    use std::sync::{Arc, Weak};

    use super::take_last_handle;

    /// S3 at the CPU level: threads keep reviving a weak handle (as `Context::current` does)
    /// while another takes the last strong one (as `recover` does). Either the take fails
    /// (a revived handle existed), or it succeeds and no revival succeeds afterwards.
    #[test]
    fn s3_recover_and_a_reviving_thread_never_both_win() {
        for _ in 0..200 {
            let strong = Arc::new(7u32);
            let weak: Weak<u32> = Arc::downgrade(&strong);
            let taken = Arc::new(AtomicBool::new(false));
            let revived_after_take = Arc::new(AtomicUsize::new(0));
            let reviver = {
                let (weak, taken, revived_after_take) = (weak.clone(), taken.clone(), revived_after_take.clone());
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        let was_taken = taken.load(Ordering::SeqCst);
                        if let Some(handle) = weak.upgrade() {
                            if was_taken {
                                revived_after_take.fetch_add(1, Ordering::SeqCst);
                            }
                            drop(handle);
                        }
                    }
                })
            };
            let mut candidate = strong;
            loop {
                match take_last_handle(candidate) {
                    Ok(value) => {
                        taken.store(true, Ordering::SeqCst);
                        assert_eq!(value, 7);
                        break;
                    }
                    Err(others) => {
                        assert!(others >= 1, "a failed take names the other handles");
                        // Retry with a fresh strong handle, as a caller would after dropping its clones.
                        match weak.upgrade() {
                            Some(again) => candidate = again,
                            None => break,
                        }
                    }
                }
            }
            reviver.join().unwrap();
            assert_eq!(revived_after_take.load(Ordering::SeqCst), 0, "a handle was revived after the last one was taken");
            assert!(weak.upgrade().is_none());
        }
    }
}
