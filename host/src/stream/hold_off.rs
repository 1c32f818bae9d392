//! Stretches of a call that no capture may record (audit 2026-11-28, S1).
//!
//! Some library calls queue work that uses memory living only for the call: a tensor map
//! built on the call's stack and copied with `cuMemcpyHtoDAsync` (the driver reads the source
//! when the copy runs; a graph replays the copy and reads it again), or a temporary device
//! buffer the call frees when it returns. Such work must never be recorded into a graph: a
//! replay would read a dead stack frame or freed device memory, and the caller of
//! [`GraphExec::launch`](crate::GraphExec::launch) cannot know about either.
//!
//! A check that the stream is not captured, followed by the work, is not enough: another
//! thread may begin a capture of the same stream (or join it to one with a
//! [`Stream::wait_event`]) between the two, and everything the call queues after that lands
//! in its graph. [`Stream::hold_off_capture`] closes that window for a whole stretch of the
//! call: while a [`NoCapture`] lives, nothing can make the stream start capturing through
//! ferrocuda.
//!
//! The protocol, two counters per stream ([`HoldOff`], sequentially consistent):
//! - a stretch adds itself to `held`, then reads `starting` and the stream's
//!   capture state; if either says a capture is starting or running, it removes itself and
//!   is refused ([`Error::CallMemoryInCapture`]);
//! - what may make the stream capture (`begin_capture`, `wait_event`, `wait_raw_event`) adds
//!   itself to `starting` first, then waits until `held` is 0, and only then takes the
//!   capture gate exclusively; it leaves `starting` when it is done.
//!
//! In the single total order of these operations either the stretch's increment comes first,
//! and the capture waits for the stretch to end, or the capture's increment does, and the
//! stretch sees it and refuses. A stretch never waits for anything a capture holds (it only
//! counts), so stretches nest, and a stretch may take the capture gate's shared side as often
//! as it likes (allocations, copies, releases): the starting capture does not hold the lock
//! while it waits. A thread that begins a capture (or waits on an event) inside a stretch of
//! its own could wait for itself, or for a thread that waits for it: refused instead
//! ([`Error::CaptureInsideHoldOff`]), so no wait for a stretch is ever made from inside one.
//!
//! A capture begun by another library on a borrowed stream is outside ferrocuda's reach, as
//! for every other piece of work ([`Stream::from_raw`]'s contract); the door still refuses work
//! on such a stream while the driver says it is captured ([`Error::ForeignCapture`]).

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::RwLockWriteGuard;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::Stream;
use crate::error::{Error, Result};

thread_local! {
    /// How many stretches this thread has open (on any stream).
    static HELD_HERE: Cell<usize> = const { Cell::new(0) };
}

/// The two counters of one stream (see the module docs).
#[derive(Default)]
pub(crate) struct HoldOff {
    /// Stretches open now.
    held: AtomicUsize,
    /// Captures starting (waiting for the stretches to end, or holding the gate).
    starting: AtomicUsize,
}

impl HoldOff {
    /// Opens a stretch unless a capture is starting or `captured()` says one runs: `Ok(true)`
    /// when open (close it with [`HoldOff::close`]), `Ok(false)` when refused.
    fn open(&self, captured: impl FnOnce() -> Result<bool>) -> Result<bool> {
        self.held.fetch_add(1, Ordering::SeqCst);
        let refused = match captured() {
            _ if self.starting.load(Ordering::SeqCst) > 0 => Ok(true),
            other => other,
        };
        if !matches!(refused, Ok(false)) {
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        refused.map(|refused| !refused)
    }

    /// Closes a stretch [`HoldOff::open`] opened.
    fn close(&self) {
        self.held.fetch_sub(1, Ordering::SeqCst);
    }

    /// Announces a starting capture and waits until no stretch is open; new stretches are
    /// refused until [`HoldOff::started`].
    fn announce_and_wait(&self) {
        self.starting.fetch_add(1, Ordering::SeqCst);
        // Stretches are a call's few host steps (an allocation, a copy, a launch): yield first,
        // then sleep briefly so that a long one (a module loaded on first use) costs no CPU.
        let mut spins = 0u32;
        while self.held.load(Ordering::SeqCst) > 0 {
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
            spins = spins.saturating_add(1);
        }
    }

    /// The capture that [`HoldOff::announce_and_wait`] announced has begun (or given up).
    fn started(&self) {
        self.starting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A stretch of a call during which no capture begun through ferrocuda can start recording
/// the stream (see [`Stream::hold_off_capture`]). Ends when dropped.
///
/// Leaking it (`std::mem::forget`) leaves the stretch open for ever: every later
/// [`Stream::begin_capture`] and [`Stream::wait_event`] on the stream, from any other thread,
/// then waits for ever, and this thread's captures and event waits are refused
/// ([`Error::CaptureInsideHoldOff`]). A hang, never unsoundness; do not leak it (audit
/// 2026-11-28b review2, G14R-3). For the same reason, do not wait inside a stretch for another
/// thread (a scoped thread, a channel) that begins a capture of this stream or waits on an
/// event on it.
#[must_use = "the stretch ends when this is dropped"]
pub struct NoCapture<'s> {
    stream: &'s Stream,
    /// Not `Send`: the stretch is counted on the thread that opened it.
    _this_thread: PhantomData<*const ()>,
}

impl Drop for NoCapture<'_> {
    fn drop(&mut self) {
        HELD_HERE.with(|held| held.set(held.get() - 1));
        self.stream.inner.hold_off.close();
    }
}

impl Stream {
    /// Starts a stretch of work that must not be recorded into a graph because it uses memory
    /// that lives only for the calling function (a tensor map copied from the stack, a
    /// temporary buffer freed on return): until the returned [`NoCapture`] drops, no capture
    /// begun through ferrocuda ([`Stream::begin_capture`], or a [`Stream::wait_event`] that
    /// may join this stream to one) can start on this stream; one that tries waits for the
    /// stretch to end. Cheap: a few atomic operations and one driver query of the capture
    /// state.
    ///
    /// Inside the stretch this thread may not begin a capture or wait on an event (of any
    /// stream): refused with [`Error::CaptureInsideHoldOff`] (it could wait for itself). On
    /// another thread those wait until the stretch ends.
    ///
    /// # Errors
    /// [`Error::CallMemoryInCapture`] (naming `operation`) when the stream is being captured
    /// now or a capture of it is starting: make the call outside the capture, or take a path
    /// that does not use call-scoped memory. The driver's errors from the capture query.
    pub fn hold_off_capture(&self, operation: &'static str) -> Result<NoCapture<'_>> {
        if !self.inner.hold_off.open(|| self.capture_now())? {
            return Err(Error::CallMemoryInCapture { operation });
        }
        HELD_HERE.with(|held| held.set(held.get() + 1));
        Ok(NoCapture { stream: self, _this_thread: PhantomData })
    }
}

/// The capture gate held exclusively, taken after every [`NoCapture`] stretch of the stream
/// has ended (new ones are refused meanwhile).
pub(crate) struct ExclusiveGate<'s> {
    stream: &'s Stream,
    lock: Option<RwLockWriteGuard<'s, ()>>,
}

impl<'s> ExclusiveGate<'s> {
    pub(super) fn take(stream: &'s Stream, operation: &str) -> Result<Self> {
        // Inside a door call's work the wait below (for stretches, then the gate's readers)
        // could wait for a thread that waits for this one (G15R-6).
        super::refuse_inside_door_work(operation)?;
        if HELD_HERE.with(Cell::get) > 0 {
            return Err(Error::CaptureInsideHoldOff);
        }
        // Inside `will_use_for`'s work holding shared records: another thread's stretch may be
        // waiting for one of them (its work declares a half of the same split buffer), and the
        // wait below would wait for that stretch (session 17, docs/host-safety.md "The locks").
        crate::memory::usage::refuse_while_holding_shared(operation)?;
        stream.inner.hold_off.announce_and_wait();
        Ok(ExclusiveGate { stream, lock: Some(stream.capture_gate_write()) })
    }
}

impl Drop for ExclusiveGate<'_> {
    fn drop(&mut self) {
        // The lock first: a stretch that opens once the announcement is withdrawn finds the
        // gate free.
        drop(self.lock.take());
        self.stream.inner.hold_off.started();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// S1: a stretch keeps a capture from starting until it ends, and a capture that has
    /// announced itself refuses new stretches.
    #[test]
    fn s1_a_stretch_and_a_starting_capture_exclude_each_other() {
        let hold_off = HoldOff::default();
        assert!(hold_off.open(|| Ok(false)).unwrap());
        let announced = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let capture = scope.spawn(|| {
                hold_off.announce_and_wait();
                announced.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!announced.load(Ordering::SeqCst), "a capture started while a stretch was open");
            hold_off.close();
            capture.join().unwrap();
        });
        assert!(!hold_off.open(|| Ok(false)).unwrap(), "a stretch opened while a capture was starting");
        hold_off.started();
        assert!(hold_off.open(|| Ok(false)).unwrap());
        hold_off.close();
        assert!(!hold_off.open(|| Ok(true)).unwrap(), "a stretch opened on a captured stream");
        assert!(hold_off.open(|| Err(Error::CaptureInsideHoldOff)).is_err(), "the query's error is returned");
        assert_eq!(hold_off.held.load(Ordering::SeqCst), 0, "refused stretches leave nothing open");
    }

    /// S1, the race the stretches close: one thread keeps opening stretches (the library call:
    /// its capture check, then its work) while another keeps starting captures (the capture
    /// flag set between the announcement and its withdrawal, as `begin_capture` does under the
    /// gate). No stretch ever sees the flag set while it is open; before the stretches, a call
    /// checked the flag once and queued its work later, and the capture could begin between.
    #[test]
    fn s1_no_capture_begins_inside_an_open_stretch() {
        let hold_off = HoldOff::default();
        let capturing = AtomicBool::new(false);
        let stop = AtomicBool::new(false);
        let (mut opened, mut refused, mut captures) = (0u32, 0u32, 0u32);
        std::thread::scope(|scope| {
            let capturer = scope.spawn(|| {
                let mut captures = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    hold_off.announce_and_wait();
                    capturing.store(true, Ordering::SeqCst);
                    std::thread::yield_now();
                    capturing.store(false, Ordering::SeqCst);
                    hold_off.started();
                    captures += 1;
                    // Gaps between the captures, so that some stretches open.
                    std::thread::sleep(Duration::from_micros(20));
                }
                captures
            });
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while (opened < 2000 || refused < 100) && std::time::Instant::now() < deadline {
                if hold_off.open(|| Ok(capturing.load(Ordering::SeqCst))).unwrap() {
                    // The call's work: the capture must not begin anywhere in here.
                    for _ in 0..64 {
                        assert!(!capturing.load(Ordering::SeqCst), "a capture began inside an open stretch");
                        std::hint::spin_loop();
                    }
                    hold_off.close();
                    opened += 1;
                } else {
                    refused += 1;
                }
            }
            stop.store(true, Ordering::Relaxed);
            captures = capturer.join().unwrap();
        });
        println!("s1: {opened} stretches opened, {refused} refused, {captures} captures");
        assert!(opened > 0 && refused > 0 && captures > 0, "both sides ran, and met");
    }
}
