//! The one door through which work reaches a stream (issue 21).
//!
//! Every piece of work that ferrocuda (or a library wrapper built on it) queues on a stream is
//! queued by a closure passed to [`Stream::enqueue`], together with the list of tracked memory
//! the work reads and writes: device buffers and views, pinned host buffers, library work
//! areas, module globals. The door orders the stream after the earlier conflicting work on
//! that memory, records the stream as its user, binds the context, and only then lends the
//! closure the raw stream handle ([`RawStream`]), which exists nowhere else: `Stream` has no
//! public accessor for it. Forgetting to declare is therefore not a matter of discipline: a
//! wrapper that wants to enqueue must write down what it touches to get a handle at all.
//! `host/tests/one_door.rs` scans the host crates' sources and fails when a driver or library
//! enqueue call (`cuLaunchKernel*`, `cuMemcpy*`, `cuMemset*`, `cuGraphLaunch`,
//! `cuStreamWaitEvent`, `cuEventRecord`, `cuLaunchHostFunc`, `cuMemAllocAsync`,
//! `cuMemFreeAsync`, cuBLAS and cuFFT execution, NCCL collectives) appears outside such a
//! closure.

use std::marker::PhantomData;

use cudarc::driver::sys;

use super::Stream;
use crate::error::Error;
use crate::memory::usage::{BufferAccess, order_buffers};

/// The raw `CUstream` of a [`Stream`], lent to the work of one [`Stream::enqueue`] call (the
/// lifetime keeps it inside the closure; null is the legacy default stream).
#[derive(Clone, Copy, Debug)]
pub struct RawStream<'door> {
    raw: sys::CUstream,
    _call: PhantomData<&'door ()>,
}

impl RawStream<'_> {
    /// The handle, to pass to the driver or library call being queued.
    #[inline(always)]
    pub fn get(self) -> sys::CUstream {
        self.raw
    }
}

impl Stream {
    /// Queues work on this stream: the one way to reach the raw stream handle.
    ///
    /// `accesses` lists all the tracked memory the work reads or writes
    /// (`BufferAccess::read(&x)`, `BufferAccess::write(&mut y)`, a pinned buffer's
    /// [`PinnedBuffer::read_access`](crate::PinnedBuffer::read_access), ...). The stream first waits for
    /// the earlier work on that memory that conflicts (on other streams: the last writer for a
    /// read, the last writer and the readers since for a write), buffers of another context
    /// are refused ([`Error::BufferInOtherContext`], unless peer access was enabled), the
    /// stream is recorded as the memory's user (so later work on other streams, host access and
    /// the memory's release wait for this work), the stream's context is bound, and `work` runs
    /// with the raw handle.
    ///
    /// `work` must queue only work whose device memory is in `accesses` (or is otherwise kept
    /// alive and ordered, as a library's internal state bound to this one stream is), and it
    /// is the only place where the handle may be used. While ferrocuda's own capture
    /// ([`Stream::begin_capture`]) records the stream, nothing is recorded (captured work runs
    /// when the graph is launched, see [`GraphExec::launch`](crate::GraphExec::launch)); the
    /// context check still holds.
    ///
    /// # Errors
    /// [`Error::ForeignCapture`] while the driver records a borrowed stream into a graph that
    /// ferrocuda did not begin (another library's capture, Q8);
    /// [`Error::CapturedByAnotherThread`] while a capture of ferrocuda's records the stream and
    /// this handle is not the capture's (see [`Stream`]); [`Error::CaptureChangedWhileQueued`]
    /// when another handle began, ended or joined a capture of the stream while this call was
    /// queuing (nothing was queued); [`Error::BufferInOtherContext`]; the driver's errors.
    #[inline]
    pub fn enqueue<R, E: From<Error>>(&self, operation: &str, accesses: &[BufferAccess<'_>], work: impl FnOnce(RawStream<'_>) -> Result<R, E>) -> Result<R, E> {
        self.enqueue_with(operation, accesses, &[], true, work)
    }

    /// [`Stream::enqueue`] with the accesses in two lists (a launch's slice arguments and what
    /// the launch touches besides, such as its module's globals), so neither is copied.
    #[inline]
    pub(crate) fn enqueue_both<R, E: From<Error>>(
        &self,
        operation: &str,
        accesses: &[BufferAccess<'_>],
        also: &[BufferAccess<'_>],
        work: impl FnOnce(RawStream<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        self.enqueue_with(operation, accesses, also, true, work)
    }

    /// The door itself. `note_race`: after work queued from outside a capture, check whether
    /// a capture of this stream began meanwhile (`Stream::note_capture_race`, two atomic
    /// loads); false only for the records and waits that open a capture's window themselves.
    #[inline]
    pub(crate) fn enqueue_with<R, E: From<Error>>(
        &self,
        operation: &str,
        accesses: &[BufferAccess<'_>],
        also: &[BufferAccess<'_>],
        note_race: bool,
        work: impl FnOnce(RawStream<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        // One capture check for both lists (for a borrowed stream it is a driver query).
        let (own_capture, ours) = self.capture_state(operation)?;
        // Held until the work is queued: the locks of records other threads may reach at once
        // (the halves of a split buffer, D2), so that no other ordering comes in between.
        let held = order_buffers(self, operation, &[also, accesses], own_capture)?;
        self.context().bind_to_thread()?;
        let outcome = {
            let _driver = self.driver_calls();
            // The check again, in one critical section with the driver call: a capture's
            // begin, end and joins change its state only under this mutex, so the state read
            // here is the one the call meets (audit 2026-11-28b G14-5). Refused work was
            // ordered and recorded for the state first seen: harmless extra records.
            match self.recheck_locked(ours, operation) {
                Ok(()) => work(RawStream { raw: self.inner.raw, _call: PhantomData }),
                Err(refused) => Err(E::from(refused)),
            }
        };
        drop(held);
        if note_race && !own_capture {
            self.note_capture_race();
        }
        outcome
    }
}
