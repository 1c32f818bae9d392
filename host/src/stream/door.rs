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
    /// `work` of another `enqueue`, on any stream (see below); [`Error::BufferInOtherContext`];
    /// the driver's errors.
    ///
    /// # Inside `work`
    /// `work` runs with this stream's driver-call lock held (so that no capture of the stream
    /// begins or ends around its driver calls, G14-5). While it runs, ferrocuda waits for no
    /// lock on this thread: every call that could (queuing on any stream, a capture's begin or
    /// end, an event's record or wait, a host wait for a stream, a declaration, a library
    /// call that holds a lock of its own across its queuing) is refused with
    /// [`Error::NestedDoorCall`], and GPU resources dropped inside `work` are released after
    /// it, on ferrocuda's release thread (as inside a host callback). So a `work` closure can
    /// never wait for its own thread, or for a thread that waits for it (two closures queuing
    /// on each other's streams; audit 2026-11-28c review2 G15R-6; docs/host-safety.md, "The
    /// locks"). Queue everything the work needs through the one raw handle, or after `work`
    /// returns. Locks of your own held across a door call are yours to order: do not take one
    /// inside `work` that another thread holds while it queues
    /// ([`Stream::refuse_inside_door_work`] tells a library wrapper where it is).
    #[inline]
    pub fn enqueue<R, E: From<Error>>(&self, operation: &str, accesses: &[BufferAccess<'_>], work: impl FnOnce(RawStream<'_>) -> Result<R, E>) -> Result<R, E> {
        self.enqueue_with(operation, accesses, None, true, work)
    }

    /// [`Stream::enqueue`] with a second list of accesses declared under `gate` (shared): a
    /// launch's slice arguments, then its module's globals under the module's globals gate
    /// (S1: a `Global::write` takes it exclusively around its own declaration and queuing).
    ///
    /// The gate is taken **after** `accesses` are ordered and their shared records locked, and
    /// held until `work` returns (session 17): a thread holding the gate then waits for no
    /// record. Taken before them, as it was, a launch waiting for a record held by another
    /// thread's `will_use_for` held the gate meanwhile; a `Global::write` waited for it, and
    /// that `will_use_for`'s work, launching a kernel of the same module, waited behind the
    /// waiting write (the std `RwLock` lets no reader in before a waiting writer): a deadlock.
    /// `gated` must hold no shared record (a module's globals record is never shared): it is
    /// ordered while this call already holds `accesses`' records.
    #[inline]
    pub(crate) fn enqueue_gated<R, E: From<Error>>(
        &self,
        operation: &str,
        accesses: &[BufferAccess<'_>],
        gate: &std::sync::RwLock<()>,
        gated: &[BufferAccess<'_>],
        work: impl FnOnce(RawStream<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        self.enqueue_with(operation, accesses, Some((gate, gated)), true, work)
    }

    /// The door itself. `note_race`: after work queued from outside a capture, check whether
    /// a capture of this stream began meanwhile (`Stream::note_capture_race`, two atomic
    /// loads); false only for the records and waits that open a capture's window themselves.
    /// `gated`: accesses ordered after `accesses`, under a gate held shared until `work`
    /// returns ([`Stream::enqueue_gated`]).
    #[inline]
    pub(crate) fn enqueue_with<R, E: From<Error>>(
        &self,
        operation: &str,
        accesses: &[BufferAccess<'_>],
        gated: Option<(&std::sync::RwLock<()>, &[BufferAccess<'_>])>,
        note_race: bool,
        work: impl FnOnce(RawStream<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        // Inside another door's work (this thread holds that stream's `driver_calls`): the
        // ordering below may wait for other streams' locks and the lock below for this one's,
        // whose holders may wait for this thread (G15R-6). Refused before anything is waited
        // for or ordered.
        refuse_inside_door_work(operation)?;
        // One capture check for both lists (for a borrowed stream it is a driver query).
        let (own_capture, ours) = self.capture_state(operation)?;
        // Held until the work is queued: the locks of records other threads may reach at once
        // (the halves of a split buffer, D2), so that no other ordering comes in between.
        let held = order_buffers(self, operation, &[accesses], own_capture)?;
        // The gate after the records (see `enqueue_gated`), held until the work is queued.
        let gate = match gated {
            Some((gate, gated)) => {
                let guard = gate.read().unwrap_or_else(|poisoned| poisoned.into_inner());
                debug_assert!(gated.iter().all(|access| !access.is_shared()), "a gated access is never shared");
                // Empty (no shared record), kept with the gate all the same.
                let gated_held = order_buffers(self, operation, &[gated], own_capture)?;
                Some((gated_held, guard))
            }
            None => None,
        };
        let _bound = self.context().bind()?;
        let key = std::sync::Arc::as_ptr(&self.inner) as usize;
        let outcome = locked(&self.inner.driver_calls, || {
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
        });
        drop(gate);
        drop(held);
        if note_race && !own_capture {
            self.note_capture_race();
        }
        outcome
    }
}

/// How many streams this thread can be marked for at once and still be checked (deeper nesting
/// is not checked: `will_use_for` inside `will_use_for`, four deep).
const KEPT: usize = 4;

/// A per-thread stack of stream keys (`StreamInner` addresses): how many, and the first
/// [`KEPT`]. No destructor, no allocation (the launch path allocates nothing).
type Keys = std::cell::Cell<(usize, [usize; KEPT])>;

thread_local! {
    /// How many door calls' `work` this thread runs now (0 or 1: a door call inside `work` is
    /// refused), with that stream's `driver_calls` held (G15R-6).
    static INSIDE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The streams for which this thread runs the `work` of a [`Stream::will_use_for`] whose
    /// declaration was made inside a capture of ferrocuda's, so ordered and recorded nothing
    /// (G15R-5).
    static DECLARED_CAPTURED: Keys = const { std::cell::Cell::new((0, [0; KEPT])) };
}

/// True while this thread runs the `work` of a door call ([`Stream::enqueue`] and the crate's
/// own queuing), holding that stream's `driver_calls`: it must wait for no lock then (G15R-6).
/// One thread-local load.
#[inline]
pub(crate) fn in_door_work() -> bool {
    INSIDE.with(std::cell::Cell::get) > 0
}

/// [`Error::NestedDoorCall`] naming `operation` while this thread runs a door call's `work`
/// ([`in_door_work`]), and [`Error::CallInHostCallback`] inside a stream host callback (the
/// GPU waits for the callback, so a thread inside a door that waits for the GPU must not be
/// waited for by the callback): what every path that may wait for a lock of ferrocuda's (a
/// stream's `driver_calls` or capture gate, a stretch, a use record, an event's state, a plan's
/// turn, a module's globals gate, the release thread) calls before it waits. Two thread-local
/// loads.
#[inline]
pub(crate) fn refuse_inside_door_work(operation: &str) -> crate::error::Result<()> {
    if in_door_work() {
        return Err(Error::NestedDoorCall { operation: operation.to_string() });
    }
    if crate::context::in_host_callback() {
        return Err(Error::CallInHostCallback { operation: operation.to_string() });
    }
    Ok(())
}

/// Runs `work` with `driver_calls` (a stream's) held and this thread marked as inside a door
/// call's work until it returns (or unwinds): the door's critical section. Called only after
/// [`refuse_inside_door_work`], so a thread holds at most one `driver_calls` this way and waits
/// for no lock while it holds it (G15R-6).
fn locked<R>(driver_calls: &std::sync::Mutex<()>, work: impl FnOnce() -> R) -> R {
    let _driver = driver_calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let _inside = Inside::enter();
    work()
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

/// This thread runs a door call's `work` until this drops (G15R-6); also on unwinding.
struct Inside(());

impl Inside {
    fn enter() -> Inside {
        INSIDE.with(|inside| inside.set(inside.get() + 1));
        Inside(())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(inside.get() - 1));
    }
}

impl Stream {
    /// [`Error::NestedDoorCall`] naming `operation` when the calling thread runs the `work` of a
    /// [`Stream::enqueue`] now (which holds that stream's driver-call lock), and
    /// [`Error::CallInHostCallback`] inside a stream host callback; else `Ok`.
    ///
    /// For library wrappers built on the door that hold a lock of their own across their
    /// queuing (a cache of tensor maps, a plan's turn): call it before taking that lock. Inside
    /// `work` such a lock could be held by another thread that waits to queue on the stream
    /// whose `work` this is, which waits for `work` to return: a deadlock. ferrocuda's own
    /// calls refuse themselves there the same way (audit 2026-11-28c review2 G15R-6).
    ///
    /// # Errors
    /// [`Error::NestedDoorCall`] inside a `work` closure; [`Error::CallInHostCallback`] inside
    /// a host callback.
    #[inline]
    pub fn refuse_inside_door_work(operation: &str) -> crate::error::Result<()> {
        refuse_inside_door_work(operation)
    }

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

    /// A model of two streams' doors: the door's own refusal, then its critical section
    /// ([`locked`]) around `work` (what `enqueue_with` does, without the driver).
    fn door<R>(driver_calls: &std::sync::Mutex<()>, operation: &str, work: impl FnOnce() -> R) -> crate::error::Result<R> {
        refuse_inside_door_work(operation)?;
        Ok(locked(driver_calls, work))
    }

    /// G15R-6: inside a door's work every door call is refused, on the same stream (it would
    /// wait for its own thread) and on any other (it could wait for a thread that waits for
    /// this one); the mark is this thread's, ends with the work, also on unwinding.
    #[test]
    fn g15r_6_a_door_entered_inside_a_doors_work_is_refused_on_every_stream() {
        let (a, b) = (std::sync::Mutex::new(()), std::sync::Mutex::new(()));
        assert!(!in_door_work() && refuse_inside_door_work("outside").is_ok());
        let nested = door(&a, "outer", || {
            assert!(in_door_work());
            (door(&a, "same stream", || ()), door(&b, "other stream", || ()), std::thread::spawn(in_door_work).join().unwrap())
        })
        .unwrap();
        assert!(matches!(&nested.0, Err(Error::NestedDoorCall { operation }) if operation == "same stream"), "{:?}", nested.0);
        assert!(matches!(&nested.1, Err(Error::NestedDoorCall { operation }) if operation == "other stream"), "{:?}", nested.1);
        assert!(!nested.2, "another thread is not inside this thread's door");
        let message = nested.1.unwrap_err().to_string();
        assert!(message.contains("work") && message.contains("after"), "{message}");
        assert!(!in_door_work() && door(&b, "after", || 7).unwrap() == 7, "left the door");
        let caught = std::panic::catch_unwind(|| door(&a, "panics", || panic!("a work closure panics")));
        assert!(caught.is_err() && !in_door_work(), "unwinding left the door");
        assert!(door(&a, "after a panic", || ()).is_ok(), "the poisoned lock is taken again");
        // Inside a host callback: refused by name too (the GPU waits for the callback).
        let _callback = crate::context::HostCallbackScope::enter();
        let refused = door(&a, "in a callback", || ());
        assert!(matches!(&refused, Err(Error::CallInHostCallback { operation }) if operation == "in a callback"), "{refused:?}");
    }

    /// G15R-6, the cross-stream cycle: two threads, each inside its own stream's door work
    /// (held at once: a barrier inside both), queue on the other's stream. Before, each waited
    /// for the other's `driver_calls` for ever (ABBA); now both calls are refused at once and
    /// both threads finish (a 10 s limit reports a hang instead of hanging the test run).
    #[test]
    fn g15r_6_two_door_works_queuing_on_each_others_streams_are_refused_not_deadlocked() {
        use std::sync::{Arc, Barrier, Mutex};
        let streams = Arc::new((Mutex::new(()), Mutex::new(())));
        let both_inside = Arc::new(Barrier::new(2));
        let (done, finished) = std::sync::mpsc::channel();
        for first in [true, false] {
            let (streams, both_inside, done) = (Arc::clone(&streams), Arc::clone(&both_inside), done.clone());
            std::thread::spawn(move || {
                let (own, other) = if first { (&streams.0, &streams.1) } else { (&streams.1, &streams.0) };
                let outcome = door(own, "own", || {
                    both_inside.wait();
                    door(other, "the other stream's", || ())
                });
                let _ = done.send(outcome);
            });
        }
        for _ in 0..2 {
            let outcome = finished.recv_timeout(std::time::Duration::from_secs(10)).expect("HUNG: two door works queuing on each other's streams deadlocked");
            assert!(matches!(outcome, Ok(Err(Error::NestedDoorCall { .. }))), "{outcome:?}");
        }
        // And a releases' hand-off: a drop inside the work goes to the release thread.
        let inside = door(&streams.0, "drop", crate::context::hand_off_releases).unwrap();
        assert!(inside && !crate::context::hand_off_releases());
    }

    /// G15R-5: the mark of a declaration made in a capture is this thread's, for that stream,
    /// while its `work` runs (also across unwinding).
    #[test]
    fn g15r_5_a_declaration_made_in_a_capture_is_marked_for_its_work_only() {
        assert!(!on(&DECLARED_CAPTURED, 7));
        {
            let _mark = Mark::push(&DECLARED_CAPTURED, 7);
            assert!(on(&DECLARED_CAPTURED, 7) && !on(&DECLARED_CAPTURED, 8) && !in_door_work());
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
