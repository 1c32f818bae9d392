//! Streams: ordering, priorities, waiting, host callbacks and stream capture, and the
//! cross-stream ordering that buffers rely on ([`Stream::will_use`]).
//!
//! Driver reference: [stream management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html),
//! [`cuLaunchHostFunc`](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html).

use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use crate::context::{Context, Handle, HostCallbackScope};
use crate::driver;
use crate::driver::DriverError;
use crate::error::{Error, Result};
use crate::graph::Graph;

mod door;
mod hold_off;
mod owner;
mod relaxed;

pub use door::RawStream;
pub(crate) use door::{in_door_work, refuse_inside_door_work};
pub use hold_off::NoCapture;
pub(crate) use relaxed::RelaxedCaptureMode;

/// A queue of work on one context. [`Stream::default_of`] is CUDA's legacy default stream.
///
/// Cloning shares the stream (the handle is destroyed when the last clone goes); buffers
/// allocated on a stream keep it alive until they are freed there.
///
/// While a capture of ferrocuda's records the stream, only the `Stream` value that began it
/// (or a clone made from that value during the capture, or any handle inside the capture's
/// [`Stream::capture`] closure) queues work there; other handles are refused
/// ([`Error::CapturedByAnotherThread`]), on any thread (audit 2026-11-28b G14-5, G14R-4).
pub struct Stream {
    inner: Arc<StreamInner>,
    /// Shared by the handles the caller holds (`None` in the records ferrocuda keeps of the
    /// streams that used a buffer): when the last of them drops while the stream is being
    /// captured, the capture ends (N11), even though records still hold the stream.
    user: Option<Arc<()>>,
    /// The capture this value began ([`Stream::begin_capture`]) or joined another stream to
    /// ([`Stream::wait_event`]), as `owner`'s token (0: none): while that capture runs, work
    /// through this value is the capture's own. Copied by `clone` (a clone made during the
    /// capture is lent the capture), not by ferrocuda's records.
    token: AtomicU64,
}

impl Clone for Stream {
    fn clone(&self) -> Self {
        Stream { inner: self.inner.clone(), user: self.user.clone(), token: AtomicU64::new(self.token.load(Ordering::Relaxed)) }
    }
}

struct StreamInner {
    raw: sys::CUstream,
    context: Context,
    owned: bool,
    /// Created here with `CU_STREAM_DEFAULT` ([`StreamOrdering::WithLegacyDefault`]): CUDA
    /// orders its work and the legacy default stream's both ways, so [`Stream::wait_for`]
    /// between the two has nothing to add. False for the legacy stream itself and for
    /// non-blocking streams.
    with_legacy: bool,
    /// True while [`Stream::begin_capture`] is capturing it: buffer tracking then stays out of
    /// the way (captured work runs later, when the graph is launched).
    capturing: AtomicBool,
    /// True when another library may capture this stream behind ferrocuda's back (Q8): a
    /// borrowed stream (`crate::borrowed`: its owner holds the handle), or a stream that waited
    /// on another library's raw event (which may have joined it to that library's capture).
    /// Work through the door on such a stream asks the driver whether it is captured.
    others_may_capture: AtomicBool,
    /// True for a borrowed stream made with [`Stream::from_raw_in_owner_captures`]: while its
    /// owner captures it, work through the door is recorded into the owner's graph, untracked,
    /// instead of being refused (the constructor's contract covers what the graph uses).
    joins_owner_captures: bool,
    /// Set by [`Stream::end_loan`]: every handle of this stream refuses kernel launches from
    /// then on ([`Error::StreamLoanEnded`]).
    loan_ended: AtomicBool,
    /// Held (shared) by work whose capture check must still hold when it is queued (an
    /// allocation, a buffer's free), and exclusively by what can make this stream start
    /// capturing (`begin_capture`, a wait on an event, which may join another capture): so
    /// another thread cannot begin a capture between the check and the work (P2).
    capture_gate: RwLock<()>,
    /// The [`Stream::hold_off_capture`] stretches open now and the captures starting: what
    /// may make the stream capture waits for the stretches to end before it takes the gate,
    /// and a stretch refuses while one is starting (audit 2026-11-28, S1).
    hold_off: hold_off::HoldOff,
    /// The context's mark of postponed releases when the running capture began
    /// (`Context::deferred_mark`): what was dropped during it, for [`Error::CaptureFailed`].
    capture_mark: AtomicU64,
    /// True from just before the stream may enter a capture through ferrocuda (the tail event
    /// is recorded for real first, see [`Stream::open_capture_window`]) until the capture flag
    /// is set (`begin_capture`) or, for a wait that joined a capture, until the stream is seen
    /// out of it: work queued through the door from outside a capture that finds it set may
    /// have landed after that record, and clears `tail_covers`.
    capture_window: AtomicBool,
    /// While the stream is captured: the tail event's last record is real (never a graph node)
    /// and covers every piece of work queued on the stream outside the capture, so streams
    /// outside the capture and the host can still be ordered after that work (issue 29's host
    /// item 1). Set when the record is made at the start of the capture, cleared by door work
    /// that raced it (another thread queuing on the stream while the capture began).
    tail_covers: AtomicBool,
    /// Joined to a capture of ferrocuda's by [`Stream::wait_event`] (a fork of a graph): work
    /// through the door is then captured work, like work on a capturing stream (not ordered,
    /// not tracked), until the capture ends: set by the join's wait and cleared by the
    /// capture's end, both under this stream's `driver_calls` (the end locks every stream on
    /// its list), so it is exact there (G14-5). No driver query per piece of work.
    joined: AtomicBool,
    /// The token of the capture of ferrocuda's that records this stream (`owner::new_token`;
    /// 0 before the first): the one it began ([`Stream::begin_capture`]) or was joined to
    /// ([`Stream::wait_event`]). Door work is let in only through a handle holding it
    /// ([`Stream::token`]) or inside that capture's [`Stream::capture`] closure (audit
    /// 2026-11-28b G14-5, G14R-4). Written under `driver_calls`, with the flags.
    capture_owner: AtomicU64,
    /// The thread that began that capture with `begin_capture` (`owner::this_thread`): forks
    /// into it from that thread are allowed outside its closure (`owner::join_rule`).
    capture_thread: AtomicU64,
    /// For the stream's own capture: the streams joined to it, which its end locks.
    joined_streams: owner::JoinedStreams<StreamInner>,
    /// For a stream joined to a capture: the capturing stream (the origin), for forks made
    /// from this stream.
    joined_to: Mutex<Weak<StreamInner>>,
    /// Held around each driver call the door makes on this stream (with its second capture
    /// check), around `cuStreamBeginCapture`/`cuStreamEndCapture` with the capture flag's and
    /// token's stores, and around a join's wait with the joined flag's: so the capture state
    /// the door reads under it is the one its driver call meets (G14-5). The driver crashed (a
    /// null read inside libcuda, audit 2026-11-28b G14-6) when a launch on a stream raced
    /// another thread's begin/end of its capture. The innermost lock (docs/host-safety.md, "The
    /// locks"): only a capture's end takes others under it, its joined streams'.
    driver_calls: Mutex<()>,
    /// The event other streams and the host wait on to order themselves after this stream's
    /// work so far: created on first need, re-recorded each time (see [`Stream::wait_for`]).
    tail: OnceLock<TailEvent>,
    /// For a stream borrowed from another library: what keeps its handle alive
    /// (`crate::borrowed`); dropped after the tail event is destroyed.
    _keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// A `CUevent` owned by its stream (destroyed with it).
struct TailEvent(sys::CUevent);

// SAFETY: a CUstream may be used from any thread that binds its context; every use binds it.
unsafe impl Send for StreamInner {}
// SAFETY: as above; the driver serialises work submitted to one stream.
unsafe impl Sync for StreamInner {}

/// How a new stream orders itself with the legacy default stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOrdering {
    /// Like `cudaStreamCreate`: work on the legacy default stream (the synchronous copies of
    /// [`DeviceBuffer`](crate::DeviceBuffer)) and on this stream wait for each other.
    WithLegacyDefault,
    /// `CU_STREAM_NON_BLOCKING`: independent of the legacy default stream; order work against
    /// synchronous copies yourself.
    NonBlocking,
}

impl Stream {
    /// A new stream, ordered with the legacy default stream like `cudaStreamCreate`'s: the
    /// synchronous copies of [`DeviceBuffer`](crate::DeviceBuffer) (which run there) finish
    /// before later launches on it start, and wait for earlier ones. Because CUDA keeps that
    /// order itself, a buffer passed between the two needs no event wait from the buffer
    /// tracking (a [`Stream::non_blocking`] stream gets one), so nothing comes between two
    /// launches here, which a programmatic dependent launch needs to start early.
    pub fn new(context: &Context) -> Result<Self> {
        Self::with_priority(context, StreamOrdering::WithLegacyDefault, 0)
    }

    /// A new stream that does not synchronise with the legacy default stream: order its work
    /// against synchronous copies yourself (for example with [`Stream::synchronize`]).
    pub fn non_blocking(context: &Context) -> Result<Self> {
        Self::with_priority(context, StreamOrdering::NonBlocking, 0)
    }

    /// A new stream with a scheduling priority. Lower numbers run first; the valid range is
    /// [`Context::stream_priority_range`] (0 is the default; out-of-range values are clamped
    /// by the driver).
    pub fn with_priority(context: &Context, ordering: StreamOrdering, priority: i32) -> Result<Self> {
        let _bound = context.bind()?;
        let flags = match ordering {
            StreamOrdering::WithLegacyDefault => sys::CUstream_flags::CU_STREAM_DEFAULT,
            StreamOrdering::NonBlocking => sys::CUstream_flags::CU_STREAM_NON_BLOCKING,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle; destroyed in Drop of the last clone.
        unsafe { driver::stream::create_with_priority(&mut raw, flags as u32, priority) }?;
        Ok(Self::wrap(raw, context, true, ordering == StreamOrdering::WithLegacyDefault))
    }

    fn wrap(raw: sys::CUstream, context: &Context, owned: bool, with_legacy: bool) -> Self {
        Self::wrap_kept(raw, context, owned, with_legacy, None)
    }

    /// `wrap`, holding `keep_alive` as long as the stream (`crate::borrowed`: a handle owned by
    /// another library, never destroyed here when `owned` is false).
    pub(crate) fn wrap_kept(
        raw: sys::CUstream,
        context: &Context,
        owned: bool,
        with_legacy: bool,
        keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
    ) -> Self {
        Self::wrap_borrowed(raw, context, owned, with_legacy, keep_alive, false)
    }

    /// `wrap_kept`, with [`StreamInner::joins_owner_captures`] set as given.
    pub(crate) fn wrap_borrowed(
        raw: sys::CUstream,
        context: &Context,
        owned: bool,
        with_legacy: bool,
        keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
        joins_owner_captures: bool,
    ) -> Self {
        let inner = StreamInner {
            raw,
            context: context.clone(),
            owned,
            with_legacy,
            capturing: AtomicBool::new(false),
            // The legacy default stream (null) cannot be captured; ferrocuda's own streams'
            // handles leave ferrocuda only inside the door's closures.
            others_may_capture: AtomicBool::new(!owned && !raw.is_null()),
            joins_owner_captures,
            loan_ended: AtomicBool::new(false),
            capture_mark: AtomicU64::new(0),
            capture_window: AtomicBool::new(false),
            tail_covers: AtomicBool::new(false),
            joined: AtomicBool::new(false),
            capture_owner: AtomicU64::new(0),
            capture_thread: AtomicU64::new(0),
            joined_streams: owner::JoinedStreams::default(),
            joined_to: Mutex::new(Weak::new()),
            driver_calls: Mutex::new(()),
            capture_gate: RwLock::new(()),
            hold_off: hold_off::HoldOff::default(),
            tail: OnceLock::new(),
            _keep_alive: keep_alive,
        };
        Stream { inner: Arc::new(inner), user: Some(Arc::new(())), token: AtomicU64::new(0) }
    }

    /// The legacy default stream (`0` in CUDA) of `context`.
    pub fn default_of(context: &Context) -> Self {
        Self::wrap(std::ptr::null_mut(), context, false, false)
    }

    /// The legacy default stream of the calling thread's current context.
    pub fn current_default() -> Result<Self> {
        Context::current().map(|c| Self::default_of(&c)).ok_or(Error::NoCurrentContext)
    }

    /// Waits for all work queued so far; reports a kernel fault if one happened (with the
    /// kernel's panic report when a `#[kernel]` panicked).
    ///
    /// Safe to call while another thread captures a stream in the driver's global mode (the
    /// default of `cudaStreamBeginCapture`, and PyTorch's `torch.cuda.graph`): the wait runs in
    /// relaxed capture mode for this thread, as [`Event::synchronize`](crate::Event::synchronize)
    /// (session 20; in global mode `cuStreamSynchronize` is a "potentially unsafe" call, refused
    /// while any thread captures and invalidating that capture). Waiting on a stream that is
    /// itself being captured is refused by the driver in every mode, as before.
    pub fn synchronize(&self) -> Result<()> {
        let _bound = self.context().bind()?;
        let _relaxed = RelaxedCaptureMode::enter();
        // SAFETY: the stream is alive.
        unsafe { driver::stream::synchronize(self.handle()) }.map_err(crate::panic_report::with_kernel_panic)?;
        Ok(())
    }

    /// Like [`Stream::synchronize`], but gives up after `timeout` with [`Error::Timeout`]
    /// (a kernel that never ends, e.g. one spinning on a flag nobody sets, H1). The work keeps
    /// running: a later `synchronize` still waits for it. Polls `cuStreamQuery`, sleeping up
    /// to 1 ms between polls.
    ///
    /// After a timeout nothing implicit blocks on the context's work any more (P12): drops of
    /// buffers, pinned buffers, plans and modules that would wait for unfinished work leak what
    /// they own instead ([`Error::WorkStillRunning`] where a call reports it), and dropping the
    /// last handle of the context leaves the context to the process's exit instead of waiting
    /// in its teardown, so a program that returns the error ends. Explicit waits
    /// ([`Stream::synchronize`], [`Context::synchronize`], the synchronous copies) still wait;
    /// the state ends when the work it gave up on ends (an event recorded after it completes)
    /// or a [`Context::synchronize`] returns.
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let mut pause = Duration::from_micros(10);
        loop {
            if self.is_idle()? {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= timeout {
                // Until the work queued so far ends, drops and the teardown of this context do
                // not block on it (P12).
                self.mark_hung();
                return Err(Error::Timeout { operation: "Stream::synchronize_timeout", waited });
            }
            std::thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// Records an event after the work queued so far and hands it to the context as a marker
    /// of work reported as hung (P12): while it has not completed, releases and teardown do not
    /// wait for the context's work. Without an event (a refused call), the context counts as
    /// hung until a [`Context::synchronize`] returns.
    pub(crate) fn mark_hung(&self) {
        self.context().note_hung(self.hung_marker());
    }

    /// An event recorded after the work queued on this stream so far, for the context's list of
    /// hung markers (owned by the caller until it hands it there, or destroys it); null when
    /// none could be recorded (inside a capture, or a failed call).
    pub(crate) fn hung_marker(&self) -> sys::CUevent {
        let context = self.context();
        let mut event = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: writes one handle, owned by the caller from here on (then by the context's
        // list of hung markers, which destroys it once it completes or at a `Context::synchronize`).
        // Never recorded inside a capture (item 1): a captured record is a graph node, whose
        // query fails, which `Context::timed_out` would take for finished work.
        // A stream of `from_raw_in_owner_captures` in its owner's capture too (G15R-7's class):
        // the marker would be a node of the owner's graph, and its query would invalidate it.
        let capturing = self.captured_for_ordering().unwrap_or(true) || self.records_for_owner();
        let bound = if capturing { None } else { context.bind().ok() };
        let created = bound.is_some() && unsafe { driver::event::create(&mut event, flags) }.is_ok();
        // SAFETY: event and stream are alive and of the same context (bound by the door).
        let recorded = created && self.enqueue("cuEventRecord", &[], |stream| Ok::<_, Error>(unsafe { driver::event::record(event, stream.get()) }?)).is_ok();
        if created && !recorded {
            // SAFETY: created above, never recorded or shared.
            let _ = unsafe { driver::event::destroy(event) };
            event = std::ptr::null_mut();
        }
        event
    }

    /// True when `self` and `other` are the same CUDA stream.
    pub(crate) fn same_as(&self, other: &Stream) -> bool {
        self.handle() == other.handle() && (!self.handle().is_null() || self.context().raw() == other.context().raw())
    }

    /// True when the driver records work queued on this stream into a graph now, whoever
    /// began the capture: [`Stream::begin_capture`] (known without a driver call), a capture
    /// this stream joined by waiting on an event of a capturing stream, or another library's
    /// capture of a borrowed stream. The legacy default stream is never captured itself; it
    /// counts as capturing while ferrocuda captures a stream ordered with it (work queued on
    /// it then would invalidate that capture). A failed query (a faulted context) is the
    /// error, not a capture (Q10).
    pub(crate) fn capture_now(&self) -> Result<bool> {
        if self.is_capturing_fast() {
            return Ok(true);
        }
        if self.handle().is_null() {
            return Ok(self.context().legacy_blocked_by_capture());
        }
        driver_capture_status(self.context(), self.handle())
    }

    /// The capture check of every piece of work through the door (Q8): `Ok(true)` while
    /// ferrocuda's own capture ([`Stream::begin_capture`]) records this stream, `Ok(false)` when
    /// the work runs directly, [`Error::ForeignCapture`] when the driver records the stream
    /// into a graph ferrocuda did not begin. The driver is asked only for streams another
    /// library may capture (borrowed ones); for ferrocuda's own streams this is two atomic
    /// loads.
    #[inline]
    pub(crate) fn capture_check(&self, operation: &str) -> Result<bool> {
        self.capture_state(operation).map(|(captured, _)| captured)
    }

    /// [`Stream::capture_check`], and whether a capture of ferrocuda's records the stream (the
    /// state the door checks again under `driver_calls`, [`Stream::recheck_locked`]).
    #[inline]
    pub(crate) fn capture_state(&self, operation: &str) -> Result<(bool, bool)> {
        let ours = self.ours_captured();
        if ours {
            self.member_check(operation)?;
        }
        let captured = capture_rule(
            ours,
            self.inner.others_may_capture.load(Ordering::Relaxed),
            self.inner.joins_owner_captures,
            || self.foreign_capture_query(),
            operation,
        )?;
        Ok((captured, ours))
    }

    /// True while a capture of ferrocuda's records this stream: its own ([`Stream::begin_capture`])
    /// or one it was joined to ([`Stream::wait_event`]). Exact under `driver_calls`, where both
    /// flags are written (G14-5).
    #[inline]
    pub(crate) fn ours_captured(&self) -> bool {
        self.inner.capturing.load(Ordering::Relaxed) || self.inner.joined.load(Ordering::Relaxed)
    }

    /// The door's second capture check, made with this stream's `driver_calls` held, right
    /// before its driver call (`owner::recheck_rule`): `ours` is what the first check saw.
    /// Closes G14-5's window: a capture begun, ended or joined by another handle since the first
    /// check refuses the work ([`Error::CaptureChangedWhileQueued`]) instead of recording it
    /// untracked, or running it untracked. Two relaxed loads (the mutex orders them).
    #[inline]
    pub(crate) fn recheck_locked(&self, ours: bool, operation: &str) -> Result<()> {
        owner::recheck_rule(ours, self.ours_captured(), || self.member_check(operation), operation)
    }

    /// For a wait on an event last recorded on this stream while it was captured
    /// ([`Stream::wait_event`]): the capture of ferrocuda's that records this stream now, read
    /// once under this stream's `driver_calls` (where its flags, token, thread and origin are
    /// written), with the G14-5 rule for the fork applied to that one read.
    ///
    /// Session 19: `wait_event` used to read the state three times, apart (whether the stream
    /// is captured, the owner rule, then the capture's origin), so a capture that ended or
    /// changed between two reads gave answers about two captures (G16-2 was one such case:
    /// the owner rule saw no capture and let any thread through). One read under the lock
    /// cannot disagree with itself.
    ///
    /// # Errors
    /// [`Error::EventRecordedInCapture`] when ferrocuda captures this stream no more (the
    /// capture ended, or it was another library's); [`Error::CapturedByAnotherThread`] when
    /// the fork is not the capture's own code's (`owner::join_rule`: a stream is forked into a
    /// capture inside its [`Stream::capture`] closure, or on the thread that began it, G14R-1,
    /// G14R-4).
    pub(crate) fn capture_to_join(&self, operation: &'static str) -> Result<Join> {
        let _driver = self.driver_calls();
        let (capturing, joined) = (self.inner.capturing.load(Ordering::SeqCst), self.inner.joined.load(Ordering::SeqCst));
        let (token, thread) = (self.inner.capture_owner.load(Ordering::SeqCst), self.inner.capture_thread.load(Ordering::SeqCst));
        let origin = if capturing {
            Some(self.inner.clone())
        } else if joined {
            self.inner.joined_to.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).upgrade()
        } else {
            None
        };
        // Not captured by ferrocuda now (or the capturing stream is gone, its capture ended
        // with its drop, N11): the event is a node of an ended (or foreign) capture's graph.
        let Some(origin) = origin else { return Err(Error::EventRecordedInCapture { operation }) };
        owner::join_rule(token, owner::in_scope, thread == owner::this_thread(), operation)?;
        Ok(Join { origin, token, thread })
    }

    /// [`owner::member_rule`] for work through this handle, once a capture flag was seen set.
    /// The flags may have been read relaxed: without the fence the owner read may be older than
    /// the capture they announce, on a machine that reorders loads (audit 2026-11-28b review2,
    /// G14R-2). Free on x86; only on the captured path.
    fn member_check(&self, operation: &str) -> Result<()> {
        std::sync::atomic::fence(Ordering::Acquire);
        let (capture, thread) = (self.inner.capture_owner.load(Ordering::SeqCst), self.inner.capture_thread.load(Ordering::SeqCst));
        owner::member_rule(capture, self.token.load(Ordering::Relaxed), owner::in_scope, thread, owner::this_thread(), operation)
    }

    /// The stream's capture window closes (a wait that may have joined a capture did not).
    fn close_capture_window(&self) {
        self.inner.capture_window.store(false, Ordering::SeqCst);
    }

    /// True while the owner of a stream made with [`Stream::from_raw_in_owner_captures`]
    /// captures it (one driver query; false for every other stream, without one): launches
    /// then take only modules already loaded, as in ferrocuda's own captures.
    pub(crate) fn records_for_owner(&self) -> bool {
        self.inner.joins_owner_captures && matches!(self.foreign_capture_query(), Ok(true))
    }

    /// True for a stream made with [`Stream::from_raw_in_owner_captures`] (no driver query).
    #[inline]
    pub(crate) fn joins_owner_captures(&self) -> bool {
        self.inner.joins_owner_captures
    }

    /// Ends a loan of this stream: from now on every handle of it (this one and all its
    /// clones) refuses kernel launches with [`Error::StreamLoanEnded`]. For a lender that hands
    /// a borrowed stream to code it does not control for the length of one call (a torch op's
    /// launch: audit 2026-11-29d, G23R-2), so that a clone kept past the call cannot launch on a
    /// handle its owner may destroy, or capture, later. Only launches are refused: the buffer
    /// tracking still orders other streams after work queued here during the loan (an event
    /// recorded on it), which must keep working. Cannot be undone.
    pub fn end_loan(&self) {
        self.inner.loan_ended.store(true, Ordering::Relaxed);
    }

    /// [`Error::StreamLoanEnded`] once [`Stream::end_loan`] was called on any handle of this
    /// stream (one relaxed load, in the launch paths).
    #[inline]
    pub(crate) fn loan_check(&self, operation: &str) -> Result<()> {
        if self.inner.loan_ended.load(Ordering::Relaxed) { Err(Error::StreamLoanEnded { operation: operation.to_string() }) } else { Ok(()) }
    }

    /// The driver's answer for [`Stream::capture_check`] (one `cuStreamIsCapturing`, plus a
    /// context bind).
    #[cold]
    #[inline(never)]
    fn foreign_capture_query(&self) -> Result<bool> {
        driver_capture_status(self.context(), self.handle())
    }

    /// True when another library may capture this stream (a borrowed stream, or one that
    /// waited on another library's raw event): its door asks the driver.
    pub(crate) fn others_may_capture(&self) -> bool {
        self.inner.others_may_capture.load(Ordering::Relaxed)
    }

    /// Marks this stream as one another library may have joined to its capture (a wait on
    /// its raw event): work on it asks the driver from now on.
    pub(crate) fn note_foreign_wait(&self) {
        self.inner.others_may_capture.store(true, Ordering::Relaxed);
    }

    /// Refuses a stream-ordered allocation on this stream while it is captured (P2): the
    /// driver would make it a graph allocation ([`Error::AllocationInCapture`]).
    /// Keeps this stream from starting to capture (through ferrocuda) while the guard lives:
    /// taken around a capture check and the work that relies on it (P2). Take the gates of
    /// several streams only in one go, for distinct streams, and never [`Stream::wait_event`]
    /// on a stream whose gate this thread holds.
    pub(crate) fn capture_gate(&self) -> RwLockReadGuard<'_, ()> {
        self.inner.capture_gate.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Serialises the door's driver calls on this stream with the beginning and end of its
    /// captures and joins (G14-6, G14-5). Hold it only around one driver call (and the capture
    /// state it relies on), and take no other stream lock inside.
    pub(crate) fn driver_calls(&self) -> MutexGuard<'_, ()> {
        self.inner.driver_calls()
    }

    /// The exclusive side of [`Stream::capture_gate`]: what may make this stream capture.
    /// Taken only once no [`Stream::hold_off_capture`] stretch runs on the stream (new ones are
    /// refused from the start of the wait), so a call's stretch never ends up in a graph (S1).
    pub(crate) fn capture_gate_exclusive(&self, operation: &str) -> Result<hold_off::ExclusiveGate<'_>> {
        hold_off::ExclusiveGate::take(self, operation)
    }

    /// The write lock itself (for `hold_off`).
    fn capture_gate_write(&self) -> RwLockWriteGuard<'_, ()> {
        self.inner.capture_gate.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The legacy default stream is never captured: an allocation there during a capture of
    /// a stream ordered with it is the driver's to refuse (it invalidates that capture; it
    /// cannot escape it).
    pub(crate) fn refuse_capture(&self, operation: &'static str) -> Result<()> {
        // A failed query is the context's fault, reported as such (Q10), not as a capture.
        if !self.handle().is_null() && self.capture_now()? { Err(Error::AllocationInCapture { operation }) } else { Ok(()) }
    }

    /// The key ([`Stream::key`]) of the stream whose capture of ferrocuda's records work queued
    /// on this stream now: this stream's own while it captures, the capturing stream's while
    /// this one is joined to its capture ([`Stream::wait_event`], a fork); `None` otherwise.
    /// Exact under this stream's `driver_calls` (in the door's work), where both flags are
    /// written. What a launch keeps for the graph is kept under this key, the one
    /// [`Stream::end_capture`] takes (audit 2026-11-28d review, G16R-1: a module launched on a
    /// forked stream was kept for no graph, and unloaded under the one that held its kernel).
    pub(crate) fn capture_key(&self) -> Option<usize> {
        if self.inner.capturing.load(Ordering::SeqCst) {
            Some(self.key())
        } else if self.inner.joined.load(Ordering::SeqCst) {
            let origin = self.inner.joined_to.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).upgrade();
            // The capturing stream is gone: its capture ended with its drop (N11), so the work
            // queued now is in no graph.
            origin.map(|origin| origin.raw as usize)
        } else {
            None
        }
    }

    /// True while being captured through [`Stream::begin_capture`].
    #[inline]
    pub(crate) fn is_capturing_fast(&self) -> bool {
        self.inner.capturing.load(Ordering::Relaxed)
    }

    /// Records this stream's tail event for real at the current end of the stream and returns
    /// it. The caller has made sure that the stream is not captured by ferrocuda (a record
    /// inside a capture would be a graph node, not a point in the stream) and holds its capture
    /// gate ([`Stream::tail_for`], [`Stream::open_capture_window`]); a foreign capture of a
    /// borrowed stream is refused by the door ([`Error::ForeignCapture`]).
    fn record_tail_now(&self) -> Result<sys::CUevent> {
        let context = self.context();
        let event = match self.inner.tail.get() {
            Some(tail) => tail.0,
            None => {
                let _bound = context.bind()?;
                let mut raw = std::ptr::null_mut();
                let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
                // SAFETY: writes one handle, destroyed with the stream (or right below when
                // another thread won the race).
                unsafe { driver::event::create(&mut raw, flags) }?;
                if let Err(TailEvent(lost)) = self.inner.tail.set(TailEvent(raw)) {
                    // SAFETY: created above, never shared.
                    let _ = unsafe { driver::event::destroy(lost) };
                }
                self.inner.tail.get().expect("set above").0
            }
        };
        // Not noted as racing a capture's start (`note_capture_race`): this record is the
        // start's own, or made with the gate held, when no capture can start.
        // SAFETY: event and stream are alive and of the same context (bound by the door: the
        // legacy stream is the current context's).
        self.enqueue_with("cuEventRecord", &[], None, false, |stream| Ok::<_, Error>(unsafe { driver::event::record(event, stream.get()) }?))?;
        Ok(event)
    }

    /// True when work queued on this stream now is recorded into a capture of ferrocuda's: its
    /// own (the flag) or, while such a capture runs anywhere, one it joined by waiting on an
    /// event recorded in it (a driver query). The legacy default stream is never captured; a
    /// stream another library may capture is left to the door, which refuses work on it while
    /// it is captured ([`Error::ForeignCapture`]).
    pub(crate) fn captured_for_ordering(&self) -> Result<bool> {
        if self.is_capturing_fast() {
            return Ok(true);
        }
        if self.handle().is_null() || self.inner.others_may_capture.load(Ordering::Relaxed) || !crate::context::any_capture_running() {
            return Ok(false);
        }
        driver_capture_status(self.context(), self.handle())
    }

    /// What orders `waiter` (a stream, or the host) after the work queued on this stream so
    /// far (issue 29's host item 1: an event recorded into a capture is a graph node, not a
    /// point in the stream; a stream waiting on it joins the capture and the host cannot wait
    /// on it at all):
    /// - this stream is not captured: its tail event, recorded now;
    /// - it is captured and so is the waiting stream: the ordering is a dependency inside the
    ///   graph ([`Tail::InCapture`]);
    /// - it is captured and the waiter is not: the tail event as recorded for real when the
    ///   capture began, which covers all the work on this stream that is not part of the
    ///   capture; refused ([`Error::OrderingAfterCapture`]) when work of another thread raced
    ///   that record.
    ///
    /// `gate_held`: the caller holds this stream's capture gate (a release); else it is taken
    /// here, so that no capture begins between the check and the record.
    fn tail_for(&self, waiter: Option<&Stream>, gate_held: bool, operation: &'static str) -> Result<Tail> {
        // The gate and this stream's door may be held by threads waiting for the door whose
        // work this thread may be running (G15R-6).
        refuse_inside_door_work(operation)?;
        let _gate = (!gate_held).then(|| self.capture_gate());
        // A stream of `from_raw_in_owner_captures` records into its owner's capture, which
        // `captured_for_ordering` does not report: its tail recorded now would be a node of the
        // owner's graph, and a ferrocuda stream waiting on it would join that capture unseen
        // (audit 2026-11-28c review2, G15R-7). Captured, with no point recorded at its start:
        // refused for waiters outside it (one driver query, only for such streams; `tail_covers`
        // may be left from an old window and says nothing about the owner's capture).
        let ours = self.captured_for_ordering()?;
        let owners = !ours && self.records_for_owner();
        let captured = ours || owners;
        let waiter_captured = match waiter {
            Some(waiter) if captured => waiter.captured_for_ordering()?,
            _ => false,
        };
        let covered = !owners && self.inner.tail_covers.load(Ordering::Acquire);
        match tail_rule(captured, waiter_captured, covered) {
            TailRule::RecordNow => {
                // Out of any capture: a window left open by a wait that joined one can close
                // (the gate excludes a new window meanwhile).
                self.close_capture_window();
                self.record_tail_now().map(Tail::Event)
            }
            TailRule::InCapture => Ok(Tail::InCapture),
            TailRule::Recorded => self.inner.tail.get().map(|tail| Tail::Event(tail.0)).ok_or(Error::OrderingAfterCapture { operation }),
            TailRule::Refuse => Err(Error::OrderingAfterCapture { operation }),
        }
    }

    /// Before this stream may enter a capture through ferrocuda (`begin_capture`, a wait on an
    /// event that may join one), with its capture gate held exclusively: records the tail event
    /// for real, the point that streams outside the capture and the host wait on while it runs
    /// ([`Stream::tail_for`]), and opens the window in which door work from outside a capture
    /// clears `tail_covers` (it may land after the record). Nothing to do on a stream already
    /// captured (nothing real can be queued on it any more).
    pub(crate) fn open_capture_window(&self) -> Result<()> {
        if self.handle().is_null() || self.is_capturing_fast() || driver_capture_status(self.context(), self.handle())? {
            return Ok(());
        }
        // Both before the record: work that lands after it sees the window (ordered through
        // the driver's own serialisation of the two calls) and clears `tail_covers` after this.
        self.inner.tail_covers.store(true, Ordering::SeqCst);
        self.inner.capture_window.store(true, Ordering::SeqCst);
        if let Err(error) = self.record_tail_now() {
            self.inner.tail_covers.store(false, Ordering::SeqCst);
            self.inner.capture_window.store(false, Ordering::SeqCst);
            return Err(error);
        }
        Ok(())
    }

    /// Makes `raw_waiter`, a stream of another library in this stream's context (not captured
    /// by ferrocuda), wait for the work queued on this stream so far, outside any capture: the
    /// join back of a [`BorrowedStream`](crate::borrowed::BorrowedStream)'s drop. While this
    /// stream is captured the wait is for the point recorded when its capture began (item 1: a
    /// record into the capture would join the owner's stream to it, and the owner's later work
    /// would be recorded into ferrocuda's graph instead of running).
    ///
    /// # Safety
    /// `raw_waiter` is a live stream of this stream's context.
    pub(crate) unsafe fn order_raw_after(&self, raw_waiter: sys::CUstream, operation: &'static str) -> Result<()> {
        let Tail::Event(event) = self.tail_for(None, false, operation)? else { unreachable!("no waiter stream of ferrocuda's") };
        // Through the door with no memory (a wait orders streams and touches none); nothing is
        // queued on this stream itself, so its capture is not touched.
        // SAFETY: the event is alive (this stream's); `raw_waiter` per the caller.
        self.enqueue_with(operation, &[], None, false, |_| Ok::<_, Error>(unsafe { driver::stream::wait_event(raw_waiter, event, 0) }?))
    }

    /// Inside the door's work of a wait that may join a capture ([`Stream::wait_event`]), with
    /// this stream's `driver_calls` held: registers this stream with the capture `join` names
    /// before the wait (false: that capture has ended or changed; refuse the wait, which has
    /// not been made). Nothing to do when `join` is `None` or this stream is captured by
    /// ferrocuda already (a join back to the capturing stream, or a second wait of a stream
    /// already joined).
    ///
    /// The owner rule of the fork (`owner::join_rule`) is applied here again, to the thread the
    /// capture's list keeps with its token (G15R-8: `join.thread` was read apart from
    /// `join.token`, and may be an earlier capture's). `Ok(Some(thread))`: registered, the
    /// capture's thread; `Ok(None)`: nothing to register.
    pub(crate) fn register_join(&self, join: Option<&Join>, operation: &str) -> Result<Option<u64>> {
        let changed = || Error::CaptureChangedWhileQueued { operation: operation.to_string() };
        match join {
            // This stream is captured by another capture of ferrocuda's (session 18): the wait
            // would merge the two graphs, which CUDA forbids, and nothing here keeps `join`'s
            // capture from ending (and its graph from being destroyed) under the driver's wait:
            // its end locks the streams on its list, and this one is not on it.
            Some(join) if self.ours_captured() && self.inner.capture_owner.load(Ordering::SeqCst) != join.token => {
                Err(Error::WaitAcrossCaptures { operation: "Stream::wait_event" })
            }
            Some(join) if !self.ours_captured() && !self.handle().is_null() => {
                let list = &join.origin.joined_streams;
                let thread = list.thread_of(join.token).ok_or_else(changed)?;
                owner::join_rule(join.token, owner::in_scope, thread == owner::this_thread(), operation)?;
                if list.register(join.token, &self.inner) { Ok(Some(thread)) } else { Err(changed()) }
            }
            _ => Ok(None),
        }
    }

    /// After that wait, still under `driver_calls`: a stream the driver says is captured now
    /// joined `join`'s capture: its work is captured work from here on, through this handle
    /// (which now holds the capture's token) or inside the capture's closure, and its window
    /// stays open until it is out (door work from outside the capture that raced the join is
    /// noticed). Otherwise it is taken off the capture's list again and the window closes. A
    /// failed query counts as joined (as a failed query counts as capturing elsewhere: the
    /// context has faulted).
    ///
    /// A stream the driver says is captured after a wait that named no capture of ferrocuda's
    /// (`join` is `None`: the event's record into a capture was not seen when the wait was
    /// checked, G15R-2) joined a capture whose owner never checked this code: the stream is
    /// marked as one that others may capture (its door asks the driver from now on, and refuses
    /// work while it is captured, [`Error::ForeignCapture`]), and the wait is reported as
    /// [`Error::CapturedByAnotherThread`].
    pub(crate) fn settle_join(&self, join: Option<&Join>, thread: Option<u64>, waited: bool) -> Result<()> {
        if self.ours_captured() || self.handle().is_null() {
            return Ok(());
        }
        let captured = waited && driver_capture_status(self.context(), self.handle()).unwrap_or(true);
        match join {
            Some(join) if captured => {
                // Before `joined`: door work that sees the join sees its capture.
                self.inner.capture_owner.store(join.token, Ordering::SeqCst);
                self.inner.capture_thread.store(thread.unwrap_or(join.thread), Ordering::SeqCst);
                *self.inner.joined_to.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::downgrade(&join.origin);
                self.token.store(join.token, Ordering::Relaxed);
                self.inner.joined.store(true, Ordering::SeqCst);
            }
            Some(join) => join.origin.joined_streams.unregister(&self.inner),
            // A stream of `from_raw_in_owner_captures` waits inside its owner's capture, as its
            // door let it (a dependency of the owner's graph, not a fork).
            None if captured && !self.inner.joins_owner_captures => {
                self.note_foreign_wait();
                return Err(Error::CapturedByAnotherThread { operation: "Stream::wait_event".to_string() });
            }
            None => {}
        }
        if !captured {
            self.close_capture_window();
        }
        Ok(())
    }

    /// After door work queued from outside a capture: if a capture of this stream began
    /// meanwhile (its window is open, or it runs), the work may have landed after the tail
    /// event recorded for that capture, which then no longer covers the stream's work outside
    /// it. Two atomic loads.
    #[inline]
    pub(crate) fn note_capture_race(&self) {
        if self.inner.capture_window.load(Ordering::SeqCst) || self.inner.capturing.load(Ordering::SeqCst) {
            self.inner.tail_covers.store(false, Ordering::SeqCst);
        }
    }

    /// Makes later work on `self`, which is captured like `other`, depend on the work captured
    /// on `other` so far: an event recorded inside the capture (a graph node) and waited on.
    fn edge_in_capture(&self, other: &Stream) -> Result<()> {
        let _bound = self.context().bind()?;
        let mut event = std::ptr::null_mut();
        // SAFETY: writes one handle, destroyed below (a queued wait keeps what it needs).
        unsafe { driver::event::create(&mut event, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) }?;
        // SAFETY: event and streams alive, of one context (bound by the door).
        let outcome =
            other.enqueue_with("cuEventRecord", &[], None, false, |s| Ok::<_, Error>(unsafe { driver::event::record(event, s.get()) }?)).and_then(|()| {
                self.enqueue_with("cuStreamWaitEvent", &[], None, false, |s| Ok::<_, Error>(unsafe { driver::stream::wait_event(s.get(), event, 0) }?))
            });
        // SAFETY: created above, destroyed once.
        let _ = unsafe { driver::event::destroy(event) };
        outcome
    }

    /// True when CUDA itself orders later work on `self` after the work queued on `other` so
    /// far: one is the legacy default stream of a context and the other a stream of that
    /// context created with [`StreamOrdering::WithLegacyDefault`] (work on the legacy stream
    /// waits for all earlier work on such streams, and work on them waits for all earlier work
    /// on the legacy stream).
    fn implicitly_after(&self, other: &Stream) -> bool {
        let one_legacy_one_blocking = (self.handle().is_null() && other.inner.with_legacy) || (other.handle().is_null() && self.inner.with_legacy);
        one_legacy_one_blocking && self.context().raw() == other.context().raw()
    }

    /// Makes later work on this stream wait until the work queued on `other` so far is done
    /// (no-op for the same stream, and between the legacy default stream and a stream ordered
    /// with it, which CUDA orders already: no event is recorded between two launches there, so
    /// a programmatic dependent launch after a synchronous copy can still start early). The
    /// host does not wait. Works across contexts.
    ///
    /// While `other` is captured and `self` is not, the wait is for the work `other` queued
    /// outside the capture (see [`Stream::tail_for`]); both captured: a dependency in the graph.
    pub(crate) fn wait_for(&self, other: &Stream) -> Result<()> {
        self.wait_for_gated(other, false)
    }

    /// [`Stream::wait_for`], where the caller may already hold `other`'s capture gate (a
    /// release holds the gates of the streams it orders).
    pub(crate) fn wait_for_gated(&self, other: &Stream, other_gate_held: bool) -> Result<()> {
        if self.same_as(other) || self.implicitly_after(other) {
            return Ok(());
        }
        match other.tail_for(Some(self), other_gate_held, "ordering after another stream's work")? {
            // SAFETY: both handles are alive; waiting on another context's event is allowed.
            Tail::Event(event) => self.enqueue("cuStreamWaitEvent", &[], |stream| Ok(unsafe { driver::stream::wait_event(stream.get(), event, 0) }?)),
            Tail::InCapture => self.edge_in_capture(other),
        }
    }

    /// Blocks the host until the work queued on this stream so far is done (through the tail
    /// event, so work queued later by other threads is not waited for).
    /// After a reported timeout in the context (P12) it does not block: it fails with
    /// [`Error::WorkStillRunning`] while that work is unfinished.
    pub(crate) fn host_wait(&self) -> Result<()> {
        self.host_wait_gated(false)
    }

    /// [`Stream::host_wait`], where the caller may already hold this stream's capture gate.
    /// While the stream is captured, waits for the work it queued outside the capture (the
    /// captured work runs only when the graph is launched).
    pub(crate) fn host_wait_gated(&self, gate_held: bool) -> Result<()> {
        let Tail::Event(event) = self.tail_for(None, gate_held, "a host wait for a stream's work")? else { unreachable!("the host is never captured") };
        if self.context().timed_out() {
            // SAFETY: the event is alive (owned by the stream, which we hold).
            let done = not_ready_is_false(unsafe { driver::event::query(event) })?;
            return if done { Ok(()) } else { Err(Error::WorkStillRunning { operation: "a release's wait for a stream" }) };
        }
        // SAFETY: the event is alive (owned by the stream, which we hold).
        unsafe { driver::event::synchronize(event) }.map_err(crate::panic_report::with_kernel_panic)?;
        Ok(())
    }

    /// True when all work queued so far has finished, false while some is still running.
    /// Never blocks. Like [`Stream::synchronize`], safe to call while another thread captures a
    /// stream in global mode (the query runs in relaxed capture mode for this thread).
    pub fn is_idle(&self) -> Result<bool> {
        let _bound = self.context().bind()?;
        // Relaxed capture mode for this thread, as `synchronize` (session 20): a query in global
        // mode would be refused, and invalidate another thread's global-mode capture.
        let _relaxed = RelaxedCaptureMode::enter();
        // SAFETY: the stream is alive.
        not_ready_is_false(unsafe { driver::stream::query(self.handle()) })
    }

    /// The stream's priority (lower runs first).
    pub fn priority(&self) -> Result<i32> {
        let _bound = self.context().bind()?;
        let mut priority = 0;
        // SAFETY: writes one int.
        unsafe { driver::stream::get_priority(self.handle(), &mut priority) }?;
        Ok(priority)
    }

    /// How the stream orders itself with the legacy default stream.
    pub fn ordering(&self) -> Result<StreamOrdering> {
        let _bound = self.context().bind()?;
        let mut flags = 0;
        // SAFETY: writes one int.
        unsafe { driver::stream::get_flags(self.handle(), &mut flags) }?;
        Ok(if flags & sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 != 0 { StreamOrdering::NonBlocking } else { StreamOrdering::WithLegacyDefault })
    }

    /// Queues `callback` to run on a driver thread once all work queued before it has
    /// finished; work queued after it waits for it to return.
    ///
    /// The closure is boxed and freed exactly once: after it runs, or right here if the driver
    /// refuses the call. A panic inside it is caught and printed (it cannot unwind into the
    /// driver). Calls that need CUDA fail inside it (the driver forbids API calls from
    /// callbacks; ferrocuda returns its error instead of deadlocking): signal another thread
    /// instead. Dropping ferrocuda values inside it is fine: the release of what they own on
    /// the GPU is handed to a release thread and performed once the callback has returned
    /// (N10; [`Context::deferred_releases`] counts it until then). Borrows of another
    /// library's stream or memory are the exception: their end must order the owner's stream
    /// now, which nothing can do inside a callback, so a
    /// [`BorrowedStream`](crate::BorrowedStream) (or a borrowed slice) dropped there aborts the
    /// process with a message (audit 2026-11-28d review3, G16S-1).
    ///
    /// Refused with [`Error::HostCallbackInCapture`] while the stream is being captured: a
    /// graph replays its host nodes many times, and a `FnOnce` can run only once; and with
    /// [`Error::NestedDoorCall`] inside the `work` of a [`Stream::enqueue`] (G15R-6).
    pub fn launch_host_fn<F: FnOnce() + Send + 'static>(&self, callback: F) -> Result<()> {
        refuse_inside_door_work("Stream::launch_host_fn")?;
        // Held from the check to the queuing: no capture of this stream (through
        // `begin_capture`, or a `wait_event` that joins one) begins in between, which would
        // record the callback into another thread's graph (audit 2026-11-28b G14-3).
        let _gate = self.capture_gate();
        if self.is_capturing()? {
            return Err(Error::HostCallbackInCapture);
        }
        let boxed: Box<HostCallback> = Box::new(Box::new(callback));
        let user_data = Box::into_raw(boxed);
        // SAFETY: the trampoline matches CUhostFn and takes ownership of `user_data` exactly
        // once, when the driver runs it.
        let queued = self.enqueue("cuLaunchHostFunc", &[], |stream| {
            Ok::<_, Error>(unsafe { driver::stream::launch_host_func(stream.get(), Some(run_host_callback), user_data.cast()) }?)
        });
        if let Err(error) = queued {
            // SAFETY: the driver refused the call, so it will never run the trampoline: the
            // box is still ours, and this is its only release.
            drop(unsafe { Box::from_raw(user_data) });
            return Err(error);
        }
        Ok(())
    }

    /// Starts capturing: work queued on this stream from now on is recorded into a graph
    /// instead of running, until [`Stream::end_capture`]. Prefer [`Stream::capture`], which
    /// always ends the capture.
    ///
    /// Uses `CU_STREAM_CAPTURE_MODE_RELAXED`, so that any thread may end the capture: the
    /// stream can move to another thread and be ended there ([`Stream::end_capture`]), or
    /// dropped there, which ends the capture too (issue 21). What a stricter mode would refuse
    /// on the capturing thread is covered by ferrocuda itself: releases (frees, destruction,
    /// unloads, their synchronisations) are postponed while a capture runs in the context,
    /// and loading a module inside a capture is refused ([`Error::ModuleNotLoadedInCapture`]).
    /// Capture a [`StreamOrdering::NonBlocking`] stream: the legacy default stream cannot be
    /// captured, and synchronous copies on it would invalidate a capture on a stream ordered
    /// with it.
    ///
    /// The capture is this `Stream` value's: while it runs, work is queued on the stream only
    /// through this value (or a clone made from it during the capture) on this thread, or
    /// inside the capture's [`Stream::capture`] closure; other handles, clones made before
    /// the capture on any thread included, are refused ([`Error::CapturedByAnotherThread`];
    /// audit 2026-11-28b G14-5, G14R-4). A library value holding a clone made earlier (a
    /// cuBLAS handle) therefore records into the capture only inside [`Stream::capture`].
    ///
    /// # Errors
    /// [`Error::CaptureOfBorrowedStream`] on a stream borrowed from another library (Q8): its
    /// owner could end the capture and keep the graph beyond the lifetimes of the buffers it
    /// uses; capture on a stream of ferrocuda's, ordered with the borrowed one through events.
    /// [`Error::NestedDoorCall`] inside the `work` of a [`Stream::enqueue`] (G15R-6);
    /// [`Error::WaitWhileDeclarationHeld`] inside the `work` of a [`Stream::will_use_for`] that
    /// holds shared records (it waits for other threads' stretches, session 17).
    pub fn begin_capture(&self) -> Result<()> {
        refuse_inside_door_work("Stream::begin_capture")?;
        if self.inner.others_may_capture.load(Ordering::Relaxed) {
            return Err(Error::CaptureOfBorrowedStream);
        }
        let _gate = self.capture_gate_exclusive("Stream::begin_capture")?;
        let _bound = self.context().bind()?;
        // Taken before the capture begins: every release postponed for it comes after.
        let mark = self.context().deferred_mark();
        // The point outside the capture that others wait on while it runs (item 1).
        self.open_capture_window()?;
        let begun = {
            // One critical section with the door's second check (G14-5): door work on this
            // stream is queued either before the driver's begin, having seen no capture, or
            // after the flag and token below, and checked against them.
            let _driver = self.driver_calls();
            // SAFETY: the stream is alive; the mode is a valid enum value.
            let begun = unsafe { driver::stream::begin_capture(self.handle(), sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED) };
            if begun.is_ok() {
                let token = owner::new_token();
                self.inner.capture_mark.store(mark, Ordering::Relaxed);
                // Before the flag: door work that sees the capture sees whose it is (G14-5):
                // this value's (G14R-4), and the thread's for forks outside `capture`'s closure.
                self.inner.capture_owner.store(token, Ordering::SeqCst);
                self.inner.capture_thread.store(owner::this_thread(), Ordering::SeqCst);
                self.inner.joined_streams.open(token, owner::this_thread());
                self.token.store(token, Ordering::Relaxed);
                // Set before the window closes: door work that began outside sees one or the other.
                self.inner.capturing.store(true, Ordering::SeqCst);
            }
            begun
        };
        if let Err(error) = begun {
            self.inner.capture_window.store(false, Ordering::SeqCst);
            return Err(error.into());
        }
        self.context().capture_started(self.inner.with_legacy);
        self.inner.capture_window.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Ends a capture begun with [`Stream::begin_capture`] (on any thread) and returns the
    /// recorded graph.
    ///
    /// # Errors
    /// [`Error::CaptureFailed`] when the driver refuses (the capture was invalidated), naming
    /// what was dropped during the capture and is released after it.
    /// [`Error::NestedDoorCall`] inside the `work` of a [`Stream::enqueue`] (G15R-6): end the
    /// capture after that work returns (the capture still runs).
    pub fn end_capture(&self) -> Result<Graph> {
        self.end_capture_of(None)
    }

    /// [`Stream::end_capture`]; with `own`, only the capture of that token (a capture that
    /// other code ended and replaced by its own is left to that code:
    /// [`Error::CaptureEndedElsewhere`], G16R-10).
    fn end_capture_of(&self, own: Option<u64>) -> Result<Graph> {
        // It takes this stream's and its joined streams' `driver_calls`: inside a door call's
        // work on a joined stream it would wait for its own thread (G15R-6).
        refuse_inside_door_work("Stream::end_capture")?;
        let _bound = self.context().bind()?;
        let mut raw = std::ptr::null_mut();
        // The modules kept for the capture are taken under the same lock as the end, whether or
        // not it succeeds (audit 2026-11-28d review, G16R-2: a failed end left them on the
        // context's list for its life, loaded after their last handle dropped), and before a
        // capture begun since could keep its own under this stream's key.
        let ended_here = self.inner.end_capture_locked(own, || {
            // SAFETY: writes one graph handle (owned by the returned Graph).
            let ended = unsafe { driver::stream::end_capture(self.handle(), &mut raw) };
            (ended, self.context().take_captured_modules(self.key()))
        });
        let Some(((ended, modules), was_capturing)) = ended_here else { return Err(Error::CaptureEndedElsewhere) };
        // Named before they are performed (below): what the error reports.
        let dropped = match (&ended, was_capturing) {
            (Err(_), true) => self.context().deferred_since(self.inner.capture_mark.load(Ordering::Relaxed)).iter().map(ToString::to_string).collect(),
            _ => Vec::new(),
        };
        if was_capturing {
            // Frees the buffers dropped during the capture (E1b), now that it is over.
            self.context().capture_ended(self.inner.with_legacy);
        }
        // On failure the modules go here, after the capture's end was counted: unloaded now
        // unless another capture of the context runs.
        ended.map_err(|source| Error::CaptureFailed { source, dropped })?;
        Ok(Graph::from_raw(raw, self.context().clone(), modules))
    }

    /// Records what `work` queues on this stream into a [`Graph`] (nothing runs yet). The
    /// capture is ended even when `work` fails, and `work`'s error is returned.
    ///
    /// Inside `work`, work this thread queues through any handle of the captured stream (and
    /// of streams `work` forks into the capture) is the capture's: a library value holding a
    /// clone of the stream made before the capture (`Cublas`, a GEMM engine) records into it.
    /// Other threads do not queue into it: their work through any handle of the stream, `work`'s
    /// own `&Stream` lent to a scoped thread included, is refused
    /// ([`Error::CapturedByAnotherThread`]; audit 2026-11-28c review2 G15R-4).
    ///
    /// **Everything that runs on this thread while `work` runs is `work`** (audit 2026-11-28c
    /// review2 G15R-3): the capture cannot tell a library value's pre-capture clone from
    /// another piece of code's (both are clones made before the capture, used on this thread
    /// inside the closure), so code that `work` lets run on this thread records into the graph
    /// as the closure's own, through any handle it holds: tasks of an executor polled inside
    /// `work` (`block_on`, `run_until`), jobs that a work-stealing `join` or `scope` (rayon, on
    /// a worker thread) runs while it waits. That work is not tracked, like all captured work,
    /// and the graph's launcher vouches for its buffers ([`GraphExec::launch`](crate::GraphExec::launch)'s
    /// contract names it). So inside `work` call nothing that runs other tasks or jobs on this
    /// thread; where that cannot be avoided, capture with [`Stream::begin_capture`] /
    /// [`Stream::end_capture`] instead, which let in only the capturing value and clones made
    /// from it during the capture (other code's clones are refused, on this thread too), and
    /// queue through that value (a library value holding an older clone is refused then).
    ///
    /// # Errors
    /// `work`'s error; [`Error::CaptureFailed`] when the driver refuses the end;
    /// [`Error::CaptureEndedElsewhere`] when the capture this call began was ended before
    /// `work` returned ([`Stream::end_capture`] through another handle, or inside `work`): a
    /// capture running on the stream then is another code's and is left to it (audit
    /// 2026-11-28d review, G16R-10).
    pub fn capture(&self, work: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        /// Ends the capture if `work` panics, so the stream stays usable: this call's capture
        /// only (G16R-10).
        /// Dropped only by an unwind out of `work`: a normal return forgets it. Not
        /// `std::thread::panicking()`, which is also true for a `capture` made by a destructor
        /// while another panic unwinds: that capture was ended right after its `work` returned,
        /// and reported as [`Error::CaptureEndedElsewhere`] (audit 2026-11-28d review3, G16S-3).
        struct EndOnUnwind<'s>(&'s Stream, u64);
        impl Drop for EndOnUnwind<'_> {
            fn drop(&mut self) {
                let _ = self.0.end_capture_of(Some(self.1));
            }
        }
        self.begin_capture()?;
        let token = self.token.load(Ordering::Relaxed);
        let guard = EndOnUnwind(self, token);
        // Every handle this thread queues through inside `work` is the capture's (a library's
        // clone of the stream made before the capture, say): `work` is synchronous, so no other
        // code runs on this thread meanwhile (G14R-4). Ends before the capture does.
        let scope = owner::CaptureScope::enter(token);
        let outcome = work(self);
        drop(scope);
        std::mem::forget(guard);
        // This call's capture, not whatever capture runs on the stream now (audit 2026-11-28d
        // review, G16R-10: other code that ended it and began its own had its work, recorded
        // through its own handle, handed to this caller as the closure's graph).
        let graph = self.end_capture_of(Some(token));
        outcome?;
        graph
    }

    /// True while this stream is being captured.
    pub fn is_capturing(&self) -> Result<bool> {
        let _bound = self.context().bind()?;
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: writes one enum value.
        unsafe { driver::stream::is_capturing(self.handle(), &mut status) }?;
        Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// The stream's context.
    pub fn context(&self) -> &Context {
        &self.inner.context
    }

    /// The raw `CUstream` (null for the default stream), for the calls of this module that
    /// queue nothing (queries, synchronisation, capture). Work goes through [`Stream::enqueue`].
    fn handle(&self) -> sys::CUstream {
        self.inner.raw
    }

    /// A handle for ferrocuda's own records of the streams that used a buffer: it keeps the
    /// stream alive but does not count as the caller's (see `Stream::user`).
    pub(crate) fn record(&self) -> Stream {
        Stream { inner: self.inner.clone(), user: None, token: AtomicU64::new(0) }
    }

    /// A key naming this CUDA stream among the live ones of its context: its raw handle as a
    /// number, 0 for the legacy default stream (for the buffer tracking's fast path and the
    /// capture bookkeeping; nothing can be queued with it).
    pub(crate) fn key(&self) -> usize {
        self.inner.raw as usize
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // The last handle of the caller's (exactly one drop gets the count to zero).
        let last_user_handle = self.user.take().is_some_and(|user| Arc::into_inner(user).is_some());
        if last_user_handle && self.inner.capturing.load(Ordering::Relaxed) {
            if crate::context::hand_off_releases() {
                // In a host callback (CUDA refused) or a door call's work (which must wait for
                // no stream lock, G15R-6): the end happens on the release thread, at once. Not
                // through `Context::release`, which would wait for the end of the context's
                // captures, this one among them, for ever.
                let keep = self.record();
                self.inner.context.hand_off(move |_| {
                    abandon_capture(&keep.inner);
                    drop(keep);
                });
            } else {
                abandon_capture(&self.inner);
            }
        }
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        let capturing = self.capturing.swap(false, Ordering::Relaxed);
        // The streams joined to the capture, locked when it ends (below, maybe later).
        let joined = if capturing { self.joined_streams.close() } else { Vec::new() };
        let token = self.capture_owner.load(Ordering::Relaxed);
        if !capturing && !self.owned && self.tail.get().is_none() {
            // A default or borrowed stream that never needed a tail event: nothing to release
            // (the legacy stream's wrappers made by every synchronous call end here).
            return;
        }
        let parts = Handle((self.raw, self.owned, self.tail.take()));
        let with_legacy = self.with_legacy;
        let context = self.context.clone();
        let destroy = move |context: &Context| {
            let (raw, owned, tail) = parts.into_inner();
            if capturing {
                end_abandoned_capture(context, raw, with_legacy, &joined, token);
            }
            let Ok(_bound) = context.bind() else {
                return; // a faulted context: its teardown reclaims the handles
            };
            if let Some(TailEvent(event)) = tail {
                // SAFETY: created by `record_tail`, destroyed once; a queued wait on it stays valid.
                let _ = unsafe { driver::event::destroy(event) };
            }
            if owned {
                // SAFETY: created by us, destroyed once (last clone); queued work still completes.
                let _ = unsafe { driver::stream::destroy(raw) };
            }
        };
        // A stream no capture records can go now even while another stream of the context is
        // captured (P5: a capture that never ends must not strand every stream dropped after it).
        let recorded_by_a_capture = context.is_capturing() && !self.raw.is_null() && capturing_per_driver(&context, self.raw);
        if capturing || !recorded_by_a_capture {
            // Capturing: its own capture must end first (N11), or the release below would wait
            // for the end of this very capture, forever (in a host callback too, G16R-7: on the
            // release thread right after it, not after the context's captures).
            context.release_outside_captures(destroy);
        } else {
            context.release(crate::context::Released::Stream, destroy);
        }
    }
}

/// True when the driver records work queued on the stream `raw` of `context` into a graph now
/// (whoever began the capture); a failed query counts as capturing (a stream's destruction
/// is then postponed, which is harmless).
fn capturing_per_driver(context: &Context, raw: sys::CUstream) -> bool {
    driver_capture_status(context, raw).unwrap_or(true)
}

/// Whether the driver records work queued on the stream `raw` of `context` into a graph now
/// (whoever began the capture; an invalidated capture counts); a failed query (a faulted
/// context) is the error.
fn driver_capture_status(context: &Context, raw: sys::CUstream) -> Result<bool> {
    let _bound = context.bind()?;
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: writes one enum value; the stream is alive (its handle is not destroyed yet).
    unsafe { driver::stream::is_capturing(raw, &mut status) }?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// The rule of [`Stream::capture_check`] (unit-tested without a GPU): ferrocuda's own capture
/// (`own`) is known without the driver; a stream no other library can capture is not asked;
/// any other stream is refused while the driver (`query`) says it is captured, unless it
/// joins its owner's captures (`joins_owner`, [`Stream::from_raw_in_owner_captures`]: then the
/// work is recorded untracked, as in ferrocuda's own capture), and a failed query is reported
/// as what it is.
#[inline(always)]
fn capture_rule(own: bool, others_may_capture: bool, joins_owner: bool, query: impl FnOnce() -> Result<bool>, operation: &str) -> Result<bool> {
    if own {
        return Ok(true);
    }
    if !others_may_capture {
        return Ok(false);
    }
    if query()? {
        if joins_owner {
            return Ok(true);
        }
        return Err(Error::ForeignCapture { operation: operation.to_string() });
    }
    Ok(false)
}

/// What orders later work after the work queued on a stream so far ([`Stream::tail_for`]).
enum Tail {
    /// A real event (never recorded inside a capture): it completes once that work has.
    Event(sys::CUevent),
    /// The stream and its waiter are both captured: the ordering is a dependency of the graph.
    InCapture,
}

/// The decision of [`Stream::tail_for`] (unit-tested without a GPU).
#[derive(Debug, PartialEq, Eq)]
enum TailRule {
    /// Not captured: record the tail event now.
    RecordNow,
    /// Both captured: an event recorded inside the capture, as a graph dependency.
    InCapture,
    /// Captured, the waiter is not: the tail event as recorded when the capture began.
    Recorded,
    /// Captured, the waiter is not, and that record may miss work: refuse.
    Refuse,
}

/// The rule of [`Stream::tail_for`]: an event is never recorded into a capture for a waiter
/// outside it (the waiter would join the capture, and the host cannot wait on such an event).
fn tail_rule(captured: bool, waiter_captured: bool, covered: bool) -> TailRule {
    match (captured, waiter_captured, covered) {
        (false, _, _) => TailRule::RecordNow,
        (true, true, _) => TailRule::InCapture,
        (true, false, true) => TailRule::Recorded,
        (true, false, false) => TailRule::Refuse,
    }
}

/// Ends the capture of a stream dropped while capturing (N11): the partial graph is
/// discarded, the modules kept for it are let go, and the context's count of captures goes
/// down, so that the releases postponed for it happen. `joined`: the streams joined to the
/// capture (closed off its list), locked around the driver's end, and `token` the capture's.
fn end_abandoned_capture(context: &Context, raw: sys::CUstream, with_legacy: bool, joined: &[Arc<StreamInner>], token: u64) {
    {
        let _members: Vec<_> = joined.iter().map(|member| member.driver_calls()).collect();
        end_in_driver(context, raw);
        clear_joined(joined, token);
    }
    drop(context.take_captured_modules(raw as usize));
    context.capture_ended(with_legacy);
}

/// The driver's end of an abandoned capture of `raw`, its graph discarded.
fn end_in_driver(context: &Context, raw: sys::CUstream) {
    if let Ok(_bound) = context.bind() {
        let mut graph = std::ptr::null_mut();
        // SAFETY: the stream is alive (destroyed after this); writes one graph handle. On
        // another thread than the capturing one this fails, and destroying the stream ends
        // the capture for the driver.
        if unsafe { driver::stream::end_capture(raw, &mut graph) }.is_ok() && !graph.is_null() {
            // SAFETY: made by the end of the capture just above, owned here, destroyed once.
            let _ = unsafe { driver::graph::destroy(graph) };
        }
    }
}

/// The streams `joined` to the capture `token` are out of it (its end, under their
/// `driver_calls`): ordinary streams again.
fn clear_joined(joined: &[Arc<StreamInner>], token: u64) {
    for member in joined {
        if member.capture_owner.load(Ordering::Relaxed) == token {
            member.joined.store(false, Ordering::SeqCst);
            member.capture_window.store(false, Ordering::SeqCst);
        }
    }
}

/// Ends the capture of `inner`, dropped by the last of the caller's handles (N11), if it still
/// runs: under its `driver_calls` and those of its joined streams, as `end_capture`; then, with
/// no lock held, lets the modules and releases that waited for it go.
fn abandon_capture(inner: &StreamInner) {
    let joined;
    {
        let _driver = inner.driver_calls();
        if !inner.capturing.swap(false, Ordering::Relaxed) {
            return;
        }
        joined = inner.joined_streams.close();
        let _members: Vec<_> = joined.iter().map(|member| member.driver_calls()).collect();
        end_in_driver(&inner.context, inner.raw);
        clear_joined(&joined, inner.capture_owner.load(Ordering::Relaxed));
    }
    drop(joined);
    drop(inner.context.take_captured_modules(inner.raw as usize));
    inner.context.capture_ended(inner.with_legacy);
}

impl StreamInner {
    /// The `driver_calls` mutex (see the field).
    fn driver_calls(&self) -> MutexGuard<'_, ()> {
        self.driver_calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `end` (the driver's end of this stream's capture) with this stream's `driver_calls`
    /// held, and those of every stream joined to the capture (taken after its own: the lock
    /// order of docs/host-safety.md), closing the capture's list of joined streams first so
    /// that no join comes in unlocked; then clears the capture flag (returned: whether it was
    /// set) and the joined streams' flags, still under the mutexes (G14-5).
    ///
    /// `own`: end only the capture of this token (`Stream::capture`'s own, G16R-10); `None`
    /// when another capture (or none) runs, and nothing is done.
    fn end_capture_locked<R>(&self, own: Option<u64>, end: impl FnOnce() -> R) -> Option<(R, bool)> {
        let joined;
        let outcome = {
            let _driver = self.driver_calls();
            if let Some(token) = own
                && (!self.capturing.load(Ordering::Relaxed) || self.capture_owner.load(Ordering::Relaxed) != token)
            {
                return None;
            }
            joined = self.joined_streams.close();
            let _members: Vec<_> = joined.iter().map(|member| member.driver_calls()).collect();
            let ended = end();
            let was_capturing = self.capturing.swap(false, Ordering::Relaxed);
            clear_joined(&joined, self.capture_owner.load(Ordering::Relaxed));
            (ended, was_capturing)
        };
        // The joined streams' handles go with no lock held (the last one destroys its stream).
        drop(joined);
        Some(outcome)
    }
}

/// A capture of ferrocuda's as a wait on an event recorded into it sees it
/// ([`Stream::capture_origin`]): a stream waiting on the event joins it.
pub(crate) struct Join {
    /// The capturing stream.
    origin: Arc<StreamInner>,
    /// The capture's token.
    token: u64,
    /// The thread that began it (`owner::this_thread`).
    thread: u64,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("raw", &self.inner.raw).field("context", &self.inner.context).finish()
    }
}

/// The streams that used a released resource, held by its postponed release. A stream that
/// is being captured is held weakly: a strong handle in a release that waits for the end of
/// the capture would keep the stream, and so its capture, alive forever once the caller has
/// dropped it (N11 through a buffer used on the capturing stream).
pub(crate) struct UsedStreams(Vec<Held>);

enum Held {
    Strong(Stream),
    Weak(std::sync::Weak<StreamInner>),
    /// A stream held weakly was gone at an earlier [`UsedStreams::resolve`] whose wait for the
    /// whole context failed: the next one waits for the context again.
    Gone,
}

impl UsedStreams {
    /// Holds `streams` for a release.
    pub(crate) fn hold(streams: Vec<Stream>) -> Self {
        UsedStreams(streams.into_iter().map(|s| if s.is_capturing_fast() { Held::Weak(Arc::downgrade(&s.inner)) } else { Held::Strong(s) }).collect())
    }

    /// The streams to order the release after. When one of them is gone (destroyed since,
    /// with work perhaps still queued), waits for all the work of `context` first, which
    /// covers it. When that wait fails the release must not happen now: the error, with the
    /// streams held again (and the gone one noted) for a release postponed after it
    /// ([`UsedStreams::resolve_or_postpone`]).
    pub(crate) fn resolve(self, context: &Context) -> std::result::Result<Vec<Stream>, (Error, UsedStreams)> {
        let mut live = Vec::with_capacity(self.0.len());
        let mut gone = false;
        for held in self.0 {
            match held {
                Held::Strong(stream) => live.push(stream),
                Held::Weak(weak) => match weak.upgrade() {
                    Some(inner) => live.push(Stream { inner, user: None, token: AtomicU64::new(0) }),
                    None => gone = true,
                },
                Held::Gone => gone = true,
            }
        }
        if gone && let Err(error) = context.synchronize_queued_work() {
            let mut kept = UsedStreams::hold(live);
            kept.0.push(Held::Gone);
            return Err((error, kept));
        }
        Ok(live)
    }

    /// [`UsedStreams::resolve`] for a release of `what` that can be postponed: when the wait
    /// for the whole context fails while a capture of ferrocuda's runs in it (the driver refuses
    /// that wait during a capture), `again` is postponed until the captures end
    /// ([`Context::release`]) with the streams held again, and `None` is returned; any other
    /// failure is a leak, counted and said ([`leaked_after_failed_wait`](crate::memory::leaks::leaked_after_failed_wait)),
    /// never silent (audit 2026-11-28d review3, G16S-4's related case: it returned with no word).
    pub(crate) fn resolve_or_postpone(
        self,
        context: &Context,
        what: crate::context::Released,
        again: impl FnOnce(&Context, UsedStreams) + Send + 'static,
    ) -> Option<Vec<Stream>> {
        match self.resolve(context) {
            Ok(streams) => Some(streams),
            Err((_, kept)) if context.is_capturing() => {
                context.release(what, move |context| again(context, kept));
                None
            }
            Err((error, _)) => {
                crate::memory::leaks::leaked_after_failed_wait(&what.to_string(), &error);
                None
            }
        }
    }
}

/// What [`Stream::launch_host_fn`] boxes: a second box, so the pointer handed to the driver
/// is thin.
type HostCallback = Box<dyn FnOnce() + Send>;

/// Called by the driver, once, for each [`Stream::launch_host_fn`].
unsafe extern "C" fn run_host_callback(user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Box<HostCallback>` leaked by `launch_host_fn`; the driver
    // calls this trampoline exactly once per successful cuLaunchHostFunc.
    let callback = unsafe { Box::from_raw(user_data.cast::<HostCallback>()) };
    // Drops inside the callback (of what it owns, too) hand their CUDA calls to the release
    // thread: the driver refuses them here (N10).
    let _scope = HostCallbackScope::enter();
    if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(callback)) {
        // The payload's drop may panic too: never inside this `extern "C"` function (E7).
        let described = crate::panic_report::dispose_of_caught_panic(payload);
        eprintln!("ferrocuda: a stream host callback panicked{described} (the panic was caught; the stream goes on)");
    }
}

/// Maps `CUDA_SUCCESS` to true and `CUDA_ERROR_NOT_READY` to false (query calls).
pub(crate) fn not_ready_is_false(result: Result<(), DriverError>) -> Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.code == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        // A query may be the first call to see a device panic: report it with the panicking
        // thread's record, as `synchronize` does (audit 2026-11-27b Q5: `synchronize_timeout`
        // said only "a kernel faulted").
        Err(e) => Err(crate::panic_report::with_kernel_panic(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// The rule's answer and whether it asked the driver, for a driver answering `driver`.
    fn rule(own: bool, others_may_capture: bool, driver: Result<bool>) -> (Result<bool>, bool) {
        rule_joining(own, others_may_capture, false, driver)
    }

    /// [`rule`] for a stream that may join its owner's captures (`joins_owner`).
    fn rule_joining(own: bool, others_may_capture: bool, joins_owner: bool, driver: Result<bool>) -> (Result<bool>, bool) {
        let asked = Cell::new(false);
        let answer = capture_rule(
            own,
            others_may_capture,
            joins_owner,
            || {
                asked.set(true);
                driver
            },
            "saxpy",
        );
        (answer, asked.get())
    }

    /// Q8: work on a borrowed stream that the driver says is captured, by a capture ferrocuda
    /// did not begin, is refused by name; the same stream not captured runs the work.
    #[test]
    fn q8_work_on_a_borrowed_stream_in_a_foreign_capture_is_refused() {
        let (answer, asked) = rule(false, true, Ok(true));
        assert!(asked, "a borrowed stream must be asked about");
        let error = answer.unwrap_err();
        assert!(matches!(&error, Error::ForeignCapture { operation } if operation == "saxpy"), "{error}");
        let message = error.to_string();
        assert!(message.contains("did not begin") && message.contains("Stream::capture"), "{message}");
        let (answer, asked) = rule(false, true, Ok(false));
        assert!(asked && matches!(answer, Ok(false)), "not captured: the work runs and is tracked");
    }

    /// Q8: ferrocuda's own capture and its own streams cost no driver call (the launch fast
    /// path): two atomic loads.
    #[test]
    fn q8_own_captures_and_own_streams_never_ask_the_driver() {
        let (answer, asked) = rule(true, false, Err(Error::NoCurrentContext));
        assert!(!asked && matches!(answer, Ok(true)), "ferrocuda's own capture: captured, known without the driver");
        let (answer, asked) = rule(true, true, Ok(true));
        assert!(!asked && matches!(answer, Ok(true)));
        let (answer, asked) = rule(false, false, Err(Error::NoCurrentContext));
        assert!(!asked && matches!(answer, Ok(false)), "an owned stream: no other library can capture it");
    }

    /// Issue 29 host item 1: an ordering never rests on an event recorded into a capture for a
    /// waiter outside it. A captured stream's waiter outside the capture gets the tail recorded
    /// for real when the capture began, or a refusal when work raced that record; a waiter in
    /// the capture gets a graph dependency; an uncaptured stream records its tail now.
    #[test]
    fn s9_tail_event_is_never_recorded_into_a_capture_for_a_waiter_outside_it() {
        assert_eq!(tail_rule(false, false, false), TailRule::RecordNow);
        assert_eq!(tail_rule(false, true, true), TailRule::RecordNow, "a real event, whoever waits");
        assert_eq!(tail_rule(true, true, false), TailRule::InCapture, "both captured: a dependency in the graph");
        assert_eq!(tail_rule(true, false, true), TailRule::Recorded, "outside waiter: the point recorded at the capture's start");
        assert_eq!(tail_rule(true, false, false), TailRule::Refuse, "that point may miss raced work: refuse, never record in the capture");
        let message = Error::OrderingAfterCapture { operation: "a host wait for a stream's work" }.to_string();
        assert!(message.contains("end_capture") && message.contains("captured into a graph"), "{message}");
    }

    /// Q10: a failed query on a borrowed stream is that failure, not a capture.
    #[test]
    fn q10_a_failed_query_is_reported_as_the_failure() {
        let (answer, asked) = rule(false, true, Err(Error::NoCurrentContext));
        assert!(asked && matches!(answer, Err(Error::NoCurrentContext)), "{answer:?}");
    }
}
