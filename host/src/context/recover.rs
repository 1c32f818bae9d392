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
    /// - A created context is replaced by a new one (`cuCtxCreate`); the old one is destroyed
    ///   when its last handle drops.
    /// - The primary context is shared, so it is only reset (`cuDevicePrimaryCtxReset`) when
    ///   this is the last ferrocuda handle to it: drop every buffer, stream, event, graph and
    ///   clone of the context first, or get [`Error::ContextStillInUse`] (nothing is reset
    ///   then). Other users of the primary context in the process (the CUDA runtime, cuBLAS)
    ///   lose their state with the reset.
    ///
    /// **Measured (CUDA 13.0 driver 580, H200):** after a kernel fault the driver poisons the
    /// whole process, as NVIDIA's documentation of the sticky errors says ("the process must
    /// be terminated and relaunched"): the reset succeeds but every new or retained context
    /// fails with the same error, so this returns [`Error::ProcessPoisoned`]. The recipe that
    /// works is a new process: run GPU work that may fault in a child process (as
    /// `tests/gpu_fault.rs` and `tests/gpu_contexts.rs` do) and start a new one after a fault.
    /// `recover` is still the one call to make: it starts over where the driver allows it and
    /// says plainly where it does not.
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
            ContextKind::Primary => {
                let registry = PRIMARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let handles = Arc::strong_count(&self.inner);
                if handles > 1 {
                    return Err(Error::ContextStillInUse { device: ordinal, other_handles: handles - 1 });
                }
                let device = self.inner.device;
                drop(self);
                // SAFETY: no ferrocuda handle to this primary context is left (checked above
                // under the registry lock, so none can appear meanwhile).
                unsafe { driver::context::primary_reset(device.raw()) }?;
                drop(registry);
                Context::primary(ordinal)?.usable_after_recovery()
            }
        }
    }

    /// Checks that a context made by `recover` can do work: the driver may keep the whole
    /// process poisoned after a fault (see [`Error::ProcessPoisoned`]).
    fn usable_after_recovery(self) -> Result<Self> {
        let mut probe = 0;
        // SAFETY: a one-byte allocation in the bound context, freed right away.
        let outcome = unsafe { driver::memory::alloc(&mut probe, 1) }.and_then(|()| {
            // SAFETY: frees the allocation made above.
            unsafe { driver::memory::free(probe) }?;
            // SAFETY: no arguments; the context is bound.
            unsafe { driver::context::synchronize() }
        });
        outcome.map_err(poisoned_if_sticky)?;
        Ok(self)
    }
}

/// A sticky error outside the context that faulted means the driver poisoned the process.
pub(super) fn poisoned_if_sticky(error: DriverError) -> Error {
    if error.is_sticky() { Error::ProcessPoisoned { source: error } } else { Error::Driver(error) }
}
