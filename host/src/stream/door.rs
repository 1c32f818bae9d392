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
    /// queuing (nothing was queued); [`Error::NestedDoorCall`] when called from inside the
    /// `work` of another `enqueue` on the same stream (which holds the stream's driver-call
    /// lock; do not call ferrocuda's stream API inside `work`); [`Error::BufferInOtherContext`];
    /// the driver's errors.
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
        // This thread inside this stream's door already (a `work` closure queuing on its own
        // stream): the lock below would wait for itself (G15R-6). Refused instead.
        let key = std::sync::Arc::as_ptr(&self.inner) as usize;
        let Some(_inside) = Inside::enter(key) else {
            return Err(E::from(Error::NestedDoorCall { operation: operation.to_string() }));
        };
        let outcome = {
            let _driver = self.driver_calls();
            // The check again, in one critical section with the driver call: a capture's
            // begin, end and joins change its state only under this mutex, so the state read
            // here is the one the call meets (audit 2026-11-28b G14-5). Refused work was
            // ordered and recorded for the state first seen: harmless extra records.
            // Work of a `will_use_for` declared for a capture that has ended since (G15R-5): its
            // memory was neither ordered nor recorded; running it now would leave it untracked.
            // (`own_capture`: also an owner's capture of a `from_raw_in_owner_captures` stream.)
            let declared_for_capture = !own_capture && on(&DECLARED_CAPTURED, key);
            match self.recheck_locked(ours, operation) {
                Ok(()) if declared_for_capture => Err(E::from(Error::CaptureChangedWhileQueued { operation: operation.to_string() })),
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

/// How many streams' doors this thread can be inside at once and still be checked (deeper
/// nesting is not checked; it needs closures queuing on other streams, four deep).
const KEPT: usize = 4;

/// A per-thread stack of stream keys (`StreamInner` addresses): how many, and the first
/// [`KEPT`]. No destructor, no allocation (the launch path allocates nothing).
type Keys = std::cell::Cell<(usize, [usize; KEPT])>;

thread_local! {
    /// The streams whose door this thread is inside now, with their `driver_calls` held while
    /// `work` runs (G15R-6).
    static INSIDE: Keys = const { std::cell::Cell::new((0, [0; KEPT])) };
    /// The streams for which this thread runs the `work` of a [`Stream::will_use_for`] whose
    /// declaration was made inside a capture of ferrocuda's, so ordered and recorded nothing
    /// (G15R-5).
    static DECLARED_CAPTURED: Keys = const { std::cell::Cell::new((0, [0; KEPT])) };
}

/// True when `key` is on the stack `keys` of this thread.
fn on(keys: &'static std::thread::LocalKey<Keys>, key: usize) -> bool {
    keys.with(|keys| {
        let (depth, keys) = keys.get();
        keys[..depth.min(KEPT)].contains(&key)
    })
}

/// `key` is on one of this thread's stacks until this drops.
struct Mark(&'static std::thread::LocalKey<Keys>);

impl Mark {
    fn push(keys: &'static std::thread::LocalKey<Keys>, key: usize) -> Mark {
        keys.with(|cell| {
            let (depth, mut entries) = cell.get();
            if depth < KEPT {
                entries[depth] = key;
            }
            cell.set((depth + 1, entries));
        });
        Mark(keys)
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.with(|cell| {
            let (depth, entries) = cell.get();
            cell.set((depth - 1, entries));
        });
    }
}

/// This thread is inside one stream's door until this drops (G15R-6).
struct Inside(#[allow(dead_code)] Mark);

impl Inside {
    /// `None` when this thread is inside the door of the stream `key` already.
    fn enter(key: usize) -> Option<Inside> {
        if on(&INSIDE, key) { None } else { Some(Inside(Mark::push(&INSIDE, key))) }
    }
}

impl Stream {
    /// Runs `work` (of a [`Stream::will_use_for`] whose declaration found this stream captured
    /// by ferrocuda, and so ordered and recorded nothing) with this thread marked: door work on
    /// this stream inside `work` that finds the capture over is refused
    /// ([`Error::CaptureChangedWhileQueued`]) instead of running untracked (G15R-5: another
    /// handle's `end_capture` between the declaration and the work).
    pub(crate) fn with_declared_captured<R>(&self, work: impl FnOnce() -> R) -> R {
        let _mark = Mark::push(&DECLARED_CAPTURED, std::sync::Arc::as_ptr(&self.inner) as usize);
        work()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G15R-6: a second entry into one stream's door on a thread already inside it is refused
    /// (it would wait for its own `driver_calls`); other streams nest; the record ends with the
    /// guard, on unwinding too.
    #[test]
    fn g15r_6_a_door_entered_again_on_its_thread_is_refused_not_waited_for() {
        let outer = Inside::enter(1).expect("first entry");
        assert!(Inside::enter(1).is_none(), "the same stream's door again on this thread");
        {
            let _other = Inside::enter(2).expect("another stream's door nests");
            assert!(Inside::enter(2).is_none() && Inside::enter(1).is_none());
        }
        assert!(Inside::enter(2).is_some(), "left");
        // Another thread is not inside this thread's doors.
        assert!(std::thread::spawn(|| Inside::enter(1).is_some()).join().unwrap());
        drop(outer);
        let caught = std::panic::catch_unwind(|| {
            let _inside = Inside::enter(1).unwrap();
            panic!("a work closure panics");
        });
        assert!(caught.is_err());
        assert!(Inside::enter(1).is_some(), "unwinding left the door");
        // Deeper than KEPT: not checked, but counted back to 0.
        let deep: Vec<_> = (10..10 + KEPT + 2).map(|key| Inside::enter(key).unwrap()).collect();
        drop(deep);
        assert_eq!(INSIDE.with(|inside| inside.get().0), 0);
    }

    /// G15R-5: the mark of a declaration made in a capture is this thread's, for that stream,
    /// while its `work` runs (also across unwinding).
    #[test]
    fn g15r_5_a_declaration_made_in_a_capture_is_marked_for_its_work_only() {
        assert!(!on(&DECLARED_CAPTURED, 7));
        {
            let _mark = Mark::push(&DECLARED_CAPTURED, 7);
            assert!(on(&DECLARED_CAPTURED, 7) && !on(&DECLARED_CAPTURED, 8) && !on(&INSIDE, 7));
            assert!(!std::thread::spawn(|| on(&DECLARED_CAPTURED, 7)).join().unwrap(), "another thread");
        }
        assert!(!on(&DECLARED_CAPTURED, 7));
        let caught = std::panic::catch_unwind(|| {
            let _mark = Mark::push(&DECLARED_CAPTURED, 7);
            panic!("work panics");
        });
        assert!(caught.is_err() && !on(&DECLARED_CAPTURED, 7));
    }
}
