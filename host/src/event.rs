//! Events: points in a stream, for timing and for ordering other streams and the host.
//!
//! Driver reference: [event management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html).

use cudarc::driver::sys;

use crate::context::{Context, Handle};
use crate::driver;
use crate::error::{Error, Result};
use crate::stream::{RelaxedCaptureMode, Stream, not_ready_is_false};

/// A point in a stream, for timing and waiting.
pub struct Event {
    raw: sys::CUevent,
    context: Context,
    /// Recorded into a capture at least once (a fork/join point of a graph): its destruction
    /// then waits for the end of the context's captures; otherwise it is destroyed at once,
    /// even while an unrelated capture runs (P5).
    in_capture: std::sync::atomic::AtomicBool,
    /// The stream whose capture the last record went into (`None`: the last record was a
    /// point in a stream, or there was none). While set, host queries and waits are refused,
    /// and so is a stream's wait once that capture ended (E5, audit 2026-11-27e).
    captured_on: std::sync::Mutex<Option<Stream>>,
}

// SAFETY: a CUevent may be used from any thread; calls that need a context bind it.
unsafe impl Send for Event {}
// SAFETY: as above; the driver synchronises concurrent use of one event.
unsafe impl Sync for Event {}

impl Event {
    /// A new event that records timing (for [`Event::elapsed_ms`]).
    pub fn new(context: &Context) -> Result<Self> {
        Self::with_flags(context, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
    }

    /// A new event without timing: cheaper to record and wait on, for ordering only.
    pub fn without_timing(context: &Context) -> Result<Self> {
        Self::with_flags(context, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
    }

    fn with_flags(context: &Context, flags: u32) -> Result<Self> {
        let _bound = context.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle; destroyed in Drop.
        unsafe { driver::event::create(&mut raw, flags) }?;
        Ok(Event { raw, context: context.clone(), in_capture: std::sync::atomic::AtomicBool::new(false), captured_on: std::sync::Mutex::new(None) })
    }

    /// Records the event at the current end of `stream`, a stream of the event's context
    /// (else [`Error::StreamInOtherContext`]: the driver would answer `CUDA_ERROR_INVALID_HANDLE`).
    ///
    /// # Errors
    /// [`Error::StreamInOtherContext`]; [`Error::NestedDoorCall`] inside the `work` of a
    /// [`Stream::enqueue`] (the event's state is held across its record's door call, G15R-6);
    /// the door's errors.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        crate::stream::refuse_inside_door_work("Event::record")?;
        if stream.context().raw() != self.context.raw() {
            return Err(Error::StreamInOtherContext { operation: "Event::record" });
        }
        // Held across the record (audit 2026-11-28c review2, G15R-2): a `wait_event` on another
        // thread reads the capture state of the record it will wait on, never the previous
        // one (it read `None` between the driver's record into a capture and this store, and
        // forked its stream into that capture unchecked). Lock order: this event's mutex, then
        // the stream's door; nothing takes them the other way round.
        let mut captured_on = self.captured_on();
        // A stream of `Stream::from_raw_in_owner_captures` records into its owner's capture,
        // which `captured_for_ordering` does not report (G15R-1): an event recorded there is a
        // node of the owner's graph, and a ferrocuda stream waiting on it would join that
        // foreign capture unseen.
        let captured = stream.captured_for_ordering().unwrap_or(true) || stream.records_for_owner();
        if captured {
            self.in_capture.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let event = self.raw;
        // SAFETY: both handles are alive and of one context (checked above).
        stream.enqueue("cuEventRecord", &[], |s| Ok::<_, Error>(unsafe { driver::event::record(event, s.get()) }?))?;
        // A record handle, not a clone (audit 2026-11-28d review, G16R-3): a clone counts as one
        // of the caller's handles (`Stream::user`), so the caller's last handle dropped during
        // the capture no longer ended it (N11) while this event lived, and it carried the
        // capture's token.
        *captured_on = captured.then(|| stream.record());
        Ok(())
    }

    fn captured_on(&self) -> std::sync::MutexGuard<'_, Option<Stream>> {
        self.captured_on.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// [`Error::EventRecordedInCapture`] when the last record was into a capture (E5): the
    /// host can neither query nor wait for a node of a graph, and the query would invalidate
    /// the capture.
    ///
    /// Also refused inside a door call's work ([`Error::NestedDoorCall`]): the state's lock is
    /// held across a record's door call, whose holder may wait for that work (G15R-6).
    ///
    /// The guard it returns is held across the caller's driver call (G16-1): a record into a
    /// capture on another thread, the capture's end and its graph's destruction cannot come
    /// between the check and the query or wait, which would then read a destroyed graph's node.
    fn refuse_if_captured(&self, operation: &'static str) -> Result<std::sync::MutexGuard<'_, Option<Stream>>> {
        crate::stream::refuse_inside_door_work(operation)?;
        let captured_on = self.captured_on();
        if captured_on.is_some() { Err(Error::EventRecordedInCapture { operation }) } else { Ok(captured_on) }
    }

    /// Waits for the event: polls it (`cuEventQuery`), yielding and then sleeping up to 100 µs
    /// between polls.
    ///
    /// Each poll holds the event's lock (G16-1: a record into a capture, that capture's end and
    /// its graph's destruction on other threads cannot come between the check and the driver
    /// call), but the wait between polls does not (audit 2026-11-28d review, G16R-4: a lock held
    /// across `cuEventSynchronize` deadlocked with a host callback that queried the event, and
    /// kept every other user of the event waiting for the GPU). The record polled is the last
    /// one: a record made by another thread meanwhile is waited for in its place, and one made
    /// into a capture ends the wait with [`Error::EventRecordedInCapture`].
    ///
    /// Each poll runs in the driver's relaxed capture mode for this thread, so waiting here
    /// neither fails nor invalidates a stream capture another thread runs in global mode
    /// (PyTorch's `torch.cuda.graph`), as [`Event::is_complete`].
    ///
    /// # Errors
    /// [`Error::EventRecordedInCapture`] if it was last recorded into a stream capture.
    pub fn synchronize(&self) -> Result<()> {
        let mut polls = 0u32;
        loop {
            if self.query_as("Event::synchronize")? {
                return Ok(());
            }
            polls = polls.saturating_add(1);
            if polls < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(if polls < 256 { 10 } else { 100 }));
            }
        }
    }

    /// True when the work before the event has finished (or it was never recorded). Never blocks.
    ///
    /// Safe to call while another thread captures a stream in the driver's global mode (the
    /// default of `cudaStreamBeginCapture`, and of PyTorch's `torch.cuda.graph`): the query runs
    /// in relaxed capture mode for this thread, so it is neither refused nor does it invalidate
    /// that capture (an event recorded into a capture is refused before any query, below).
    ///
    /// # Errors
    /// [`Error::EventRecordedInCapture`] if it was last recorded into a stream capture.
    pub fn is_complete(&self) -> Result<bool> {
        self.query_as("Event::is_complete")
    }

    /// One `cuEventQuery` under the event's lock (G16-1), refused as `operation` when the last
    /// record went into a capture: [`Event::is_complete`], and each poll of
    /// [`Event::synchronize`].
    ///
    /// The query runs in the driver's relaxed capture mode for this thread ([`RelaxedCaptureMode`],
    /// session 19): in the default (global) mode `cuEventQuery` is a "potentially unsafe" call,
    /// refused (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`) while *any* thread runs a capture begun
    /// in global mode, and that capture is invalidated: a ferrocuda user polling its own event
    /// broke PyTorch's `torch.cuda.graph` (global mode) running on another thread. The event
    /// queried here is never a node of a capture (refused just above, under the lock held
    /// across the query), which is what the global mode's check is there to catch; PyTorch's
    /// own event queries (the caching allocator, the NCCL watchdog) are relaxed for the same
    /// reason.
    fn query_as(&self, operation: &'static str) -> Result<bool> {
        let _checked = self.refuse_if_captured(operation)?;
        let _relaxed = RelaxedCaptureMode::enter();
        // SAFETY: the event is alive.
        not_ready_is_false(unsafe { driver::event::query(self.raw) })
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    ///
    /// # Errors
    /// [`Error::EventRecordedInCapture`] if either was last recorded into a stream capture.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        // Both locks, the lower address first (`a.elapsed_ms(&b)` on one thread and
        // `b.elapsed_ms(&a)` on another must not take them in opposite orders), one when
        // `end` is `self`.
        let (first, second) = if (self as *const Event) <= (end as *const Event) { (self, end) } else { (end, self) };
        let _first = first.refuse_if_captured("Event::elapsed_ms")?;
        let _second = if std::ptr::eq(first, second) { None } else { Some(second.refuse_if_captured("Event::elapsed_ms")?) };
        let mut ms = 0.0;
        // SAFETY: writes one float.
        unsafe { driver::event::elapsed_time(&mut ms, self.raw, end.raw) }?;
        Ok(ms)
    }

    /// The raw `CUevent`.
    pub fn raw(&self) -> sys::CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let event = Handle(self.raw);
        let destroy = move |context: &Context| {
            if let Ok(_bound) = context.bind() {
                // SAFETY: created by us, destroyed once.
                let _ = unsafe { driver::event::destroy(event.into_inner()) };
            }
        };
        if self.in_capture.load(std::sync::atomic::Ordering::Relaxed) {
            // A point of a capture's graph: destroyed once the context's captures ended.
            self.context.release(crate::context::Released::Event, destroy);
        } else {
            // Destroying an event queues nothing (a wait already queued on it keeps what it
            // needs): at once, even while an unrelated capture runs, or never ends (P5).
            self.context.release_outside_captures(destroy);
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("raw", &self.raw).finish()
    }
}

/// Event ordering on a stream lives here, with the event.
impl Stream {
    /// Makes later work on this stream wait until `event` (recorded on any stream of the same
    /// context, or of a peer) has completed. The host does not wait.
    ///
    /// # Errors
    /// [`Error::EventRecordedInCapture`] if `event` was last recorded into a capture that has
    /// ended (while the capture runs, waiting for it joins this stream to the capture: a fork).
    /// [`Error::CapturedByAnotherThread`] when that capture (or this stream's) is not this
    /// code's: a stream is forked into a capture inside its [`Stream::capture`] closure, or on
    /// the thread that began it, and a joined stream is queued on through the handle that
    /// joined it (or inside the closure). [`Error::CaptureChangedWhileQueued`] when the
    /// capture ended meanwhile (nothing was queued). [`Error::WaitAcrossCaptures`] when this
    /// stream is captured into another graph than the event's. [`Error::NestedDoorCall`] inside the
    /// `work` of a [`Stream::enqueue`] (G15R-6). [`Error::WaitWhileDeclarationHeld`] inside the
    /// `work` of a [`Stream::will_use_for`] that holds shared records (session 17). The
    /// driver's errors.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        crate::stream::refuse_inside_door_work("Stream::wait_event")?;
        // Waiting on an event recorded in a capture joins this stream to it: not while another
        // thread checks this stream for captures (P2). Taken before the event's lock (audit
        // 2026-11-28d review, G16R-5): taking it waits for the stream's `hold_off_capture`
        // stretches, and a stretch's thread may record or query this event, which would wait
        // for the lock held here.
        let _gate = self.capture_gate_exclusive("Stream::wait_event")?;
        // Held until the driver's wait is queued (audit 2026-11-28d, G16-1): with the state read
        // and the lock released before the wait, another thread's record into a capture, its
        // end and the graph's destruction fit between them, and the driver's wait then read a
        // node of a destroyed graph (a segfault inside the driver, three runs of four of
        // `gpu_g15r`'s G15R-2 loop on an H200). Lock order: the stream's capture gate, this
        // event's mutex, then the stream's door (`Event::record`: the mutex, then the door).
        let captured_guard = event.captured_on();
        let captured_on = captured_guard.clone();
        let mut join = None;
        if let Some(captured) = captured_on {
            // The capture that records the event's stream, read once under that stream's
            // `driver_calls` (session 19): whether it still runs, the fork's owner rule (G14-5's
            // rule; audit 2026-11-28b review2, G14R-1: another thread holding the event forked
            // its stream into the capture, and its launches went into the capturing thread's
            // graph, untracked, reported `Ok`; G14R-4: the capture's handle, not its thread) and
            // its origin all come from that one read. Three reads apart could disagree: in
            // audit 2026-11-28d G16-2 (explained in session 18) the capture ended between the
            // first and the owner rule, which then saw no capture and let any thread through,
            // and the wait went to the driver with no join for an event of an ended capture
            // (`CUDA_ERROR_INVALID_VALUE`, E5, with the graph perhaps destroyed by then, the
            // state G16-1 crashed in). An ended capture is `EventRecordedInCapture`.
            join = Some(captured.capture_to_join("Stream::wait_event")?);
            // A stream another library owns joins no capture of ferrocuda's (G16R-8): the owner's
            // work on it would be recorded into the graph, as `begin_capture` refuses for such
            // a stream (Q8).
            if self.others_may_capture() {
                return Err(Error::ForkOfBorrowedStream { operation: "Stream::wait_event" });
            }
        }
        // The wait joins a capture if the event was recorded in one (only a capture of
        // ferrocuda's can be running then): first a real point after this stream's work so
        // far, for streams outside the capture and the host to wait on while it runs (issue
        // 29's host item 1: an event recorded into the capture would be a graph node).
        let may_join = crate::context::any_capture_running();
        if may_join {
            self.open_capture_window()?;
        }
        let raw_event = event.raw;
        // The join and its bookkeeping under this stream's `driver_calls` (the door's work):
        // registered with the capture before the wait (its end locks this stream, so it cannot
        // take the stream out of the capture between the wait and the flags), the joined flag
        // and the capture's token (this handle's now) set after it, before any other door work
        // on the stream checks them again (G14-5). A wait the door refused (this stream already
        // joined by another handle's capture, `CapturedByAnotherThread`) joins nothing, and
        // does not make this handle the joined stream's (G14R-1).
        self.enqueue_with("cuStreamWaitEvent", &[], None, false, |s| {
            let thread = self.register_join(join.as_ref(), "Stream::wait_event")?;
            // SAFETY: both handles are alive; flags must be 0 (CU_EVENT_WAIT_DEFAULT).
            let waited = unsafe { driver::stream::wait_event(s.get(), raw_event, 0) };
            // `any_capture_running` again, after the wait: a capture begun since `may_join` was
            // read may have recorded the event (G15R-2).
            if may_join || join.is_some() || crate::context::any_capture_running() {
                self.settle_join(join.as_ref(), thread, waited.is_ok())?;
            }
            Ok::<_, Error>(waited?)
        })?;
        drop(captured_guard);
        Ok(())
    }
}
