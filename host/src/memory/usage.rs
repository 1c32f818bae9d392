//! Which work still uses a buffer: its context, the stream that last wrote it and the streams
//! that read it since (U3, U4, C2).
//!
//! The borrow checker sees a launch's borrows end when the kernel is queued, not when it
//! finishes; this module covers the rest, like cudarc's `CudaSlice` in multi-stream mode but
//! without an event per launch:
//! The same record tracks every other memory with a GPU lifetime: pinned host buffers, a
//! cuFFT plan's work area, a module's globals. All stream work reaches it through one door,
//! [`Stream::enqueue`] (`stream/door.rs`, issue 21), which takes the accesses with the work:
//! - work (a launch, copy, library call, or [`Stream::will_use`]) on stream `S` first makes `S` wait for the
//!   buffer's earlier work on other streams: the last writer for a read, the last writer and
//!   every reader since for a write (`cuStreamWaitEvent` on the other stream's tail event,
//!   recorded at that moment: it covers all the work queued there so far, the buffer's
//!   included); then `S` is recorded as reader or writer. Nothing is recorded when the work
//!   stays on one stream: the common case costs one atomic load per buffer; nor between the
//!   legacy default stream and a stream ordered with it (`StreamOrdering::WithLegacyDefault`),
//!   which CUDA orders both ways already (`Stream::wait_for`);
//! - synchronous host copies are work on the legacy default stream like any other: it waits
//!   for the other streams first (a non-blocking stream's kernel included);
//! - dropping the buffer frees it stream-ordered (`cuMemFreeAsync`) on one of its streams,
//!   after making that stream wait for the others, or, while a capture runs in the context or
//!   inside a host callback, later (E1b, N10; `context::release`);
//! - a buffer of another context is refused, unless peer access makes it usable, and then
//!   the ordering above holds across the contexts (events work across contexts).
//!
//! Work queued inside a stream capture is not tracked: it runs when the graph is launched,
//! which [`GraphExec::launch`](crate::GraphExec::launch)'s contract covers.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use cudarc::driver::sys;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::stream::{Stream, UsedStreams};

/// The use state of one allocation (shared by every view of it).
pub struct BufferUsage {
    context: Context,
    /// `context.raw()` as a number, kept beside the fast-path keys: the context check of every
    /// access comes before the fast path (D4) and costs one load in this cache line.
    context_key: usize,
    /// Set once two views that may be used from two threads at once exist (`split_at_mut`,
    /// D2): work on the record then holds its lock from the ordering to the queuing (and never
    /// takes the fast path), so no other thread's ordering can come between them. It stays
    /// set for the record's life (a buffer split once takes an uncontended lock per use).
    shared: AtomicBool,
    /// Made by [`BufferUsage::for_library_state`]: a library's own state, which ferrocuda never
    /// frees. Only such a record forgets its streams when its work is given up on
    /// ([`BufferUsage::give_up_on_work`], audit 2026-11-28d review, G16R-11: a buffer's record,
    /// reached through the safe `DeviceSlice::usage`, forgot the kernel still writing it, and
    /// its host copies and its free no longer waited for that kernel).
    library: bool,
    /// Made by [`BufferUsage::lent`]: memory another library lent (a borrowed view: a torch
    /// tensor, a cudarc slice), which its owner keeps alive, not ferrocuda. Inside a capture by
    /// a borrowed stream's owner (torch.cuda.graph) such memory is the owner's to keep for the
    /// replays, and passes; ferrocuda-owned memory is refused there (G23R-2).
    lent: bool,
    state: Mutex<UseState>,
    /// The raw handle of a stream that may read the buffer with no wait and no bookkeeping
    /// (it is the last writer, or already ordered after it); 0 for none. The launch path
    /// checks it with one atomic load before taking the lock.
    fast_read: AtomicUsize,
    /// The raw handle of a stream that may write the buffer with no wait and no bookkeeping
    /// (it is the last writer and the only reader since); 0 for none.
    fast_write: AtomicUsize,
}

/// The key of `stream` in `fast_read` / `fast_write`: its raw handle, 0 for the legacy stream
/// (never fast). A stream in those fields is also held in the state, so its handle cannot be
/// destroyed and reused by another stream meanwhile.
#[inline]
fn key(stream: &Stream) -> usize {
    stream.key()
}

struct UseState<S = Stream> {
    /// The stream of the last work that wrote the buffer (a host copy's: the legacy stream).
    writer: Option<S>,
    /// Streams that read it since that write, each already ordered after it.
    readers: Vec<S>,
}

/// What the ordering rules need of a stream (a trait so that the rules are unit-tested
/// without a GPU).
trait Ordered {
    /// The same CUDA stream.
    fn same_as(&self, other: &Self) -> bool;
    /// Makes later work on `self` wait for the work queued on `other` so far.
    fn wait_for(&self, other: &Self) -> Result<()>;
    /// The fast-path key (see `BufferUsage::fast_read`); 0 for never fast.
    fn key(&self) -> usize;
    /// The handle the record keeps (not one of the caller's: see `Stream::record`).
    fn record(&self) -> Self;
}

impl Ordered for Stream {
    fn same_as(&self, other: &Self) -> bool {
        Stream::same_as(self, other)
    }
    fn wait_for(&self, other: &Self) -> Result<()> {
        Stream::wait_for(self, other)
    }
    fn key(&self) -> usize {
        key(self)
    }
    fn record(&self) -> Self {
        Stream::record(self)
    }
}

impl<S: Ordered> UseState<S> {
    /// The ordering itself: waits for the conflicting earlier work, records `stream`.
    fn order(&mut self, stream: &S, access: Access) -> Result<()> {
        match access {
            Access::Read => {
                if self.readers.iter().any(|r| r.same_as(stream)) {
                    return Ok(()); // already ordered after the current writer
                }
                if let Some(writer) = &self.writer {
                    stream.wait_for(writer)?;
                }
                self.readers.push(stream.record());
            }
            Access::Write => {
                let writer_is_stream = self.writer.as_ref().is_some_and(|w| w.same_as(stream));
                if !writer_is_stream && let Some(writer) = &self.writer {
                    stream.wait_for(writer)?;
                }
                for reader in &self.readers {
                    stream.wait_for(reader)?;
                }
                self.readers.clear();
                if !writer_is_stream {
                    self.writer = Some(stream.record());
                }
            }
        }
        Ok(())
    }

    /// The fast-path keys after `stream`'s ordering (`ordered`: it succeeded): the stream that
    /// may write with no bookkeeping (the writer, when every reader since is the writer too)
    /// and the one that may read (`stream` if now ordered after the writer, else the writer).
    fn fast_keys(&self, stream: &S, ordered: bool) -> (usize, usize) {
        let writer = self.writer.as_ref().map_or(0, Ordered::key);
        let sole_writer = writer != 0 && self.readers.iter().all(|r| r.key() == writer);
        let fast_write = if sole_writer { writer } else { 0 };
        let is_ordered = ordered && (stream.key() == writer || self.readers.iter().any(|r| r.same_as(stream)));
        let fast_read = if is_ordered { stream.key() } else { writer };
        (fast_read, fast_write)
    }
}

/// How work uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only (`&[T]` kernel parameters, copy sources).
    Read,
    /// Writes, or reads and writes (`DisjointSlice`/`AtomicSlice` kernel parameters, copy
    /// destinations).
    Write,
}

/// One buffer used by work about to be queued on a stream, and how: the launchers of
/// `#[kernel]` pass one per slice argument, and [`Stream::will_use`] takes them from other
/// libraries' callers.
///
/// An access stays on the thread that made it (neither `Send` nor `Sync`, G16R-13): declare
/// it there, and make another on another thread.
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<ferrocuda_host::BufferAccess<'static>>();
/// ```
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<ferrocuda_host::BufferAccess<'static>>();
/// ```
#[derive(Clone, Copy)]
pub struct BufferAccess<'a> {
    usage: Option<&'a BufferUsage>,
    access: Access,
    /// Memory any context's work may use (pinned host memory, a peer copy's source): not
    /// refused for being of another context.
    any_context: bool,
    name: &'static str,
    /// Neither `Send` nor `Sync` (audit 2026-11-28d review, G16R-13): an access is declared
    /// on the thread that made it. A copy of one write access handed to two threads declared
    /// two writes of one record at once, and the second could erase the first's work from it.
    _one_thread: std::marker::PhantomData<*const ()>,
}

impl<'a> BufferAccess<'a> {
    /// The access of a kernel argument (see `SliceArg::read` / `SliceArg::write`).
    #[inline]
    pub(crate) fn new(usage: Option<&'a BufferUsage>, access: Access, name: &'static str) -> Self {
        BufferAccess { usage, access, any_context: false, name, _one_thread: std::marker::PhantomData }
    }

    /// The same access, to memory that work of any context may use (a copy engine reaches
    /// it without peer access).
    pub(crate) fn in_any_context(mut self) -> Self {
        self.any_context = true;
        self
    }

    /// Work that reads and writes the library state that `usage` tracks
    /// ([`BufferUsage::for_library_state`]). It is declared through a shared reference, so two
    /// threads may declare it at once: such a record is made shared (its lock is held from the
    /// ordering to the queuing, D2), and no lock of the caller's is needed for the record.
    ///
    /// # Panics
    /// When `usage` was not made by [`BufferUsage::for_library_state`] (a buffer's record,
    /// from [`DeviceSlice::usage`](crate::DeviceSlice::usage)): a write declared through a
    /// shared reference to a buffer's record would come between another thread's declaration
    /// on the buffer and its queuing, and erase that work from the record, which the buffer's
    /// free then no longer waits for (audit 2026-11-28d review, G16R-12). Declare a buffer's
    /// write with [`BufferAccess::write`], which takes it by `&mut`.
    pub fn library_state(usage: &'a BufferUsage) -> Self {
        assert!(
            usage.library,
            "BufferAccess::library_state: this record is not a library state's (`BufferUsage::for_library_state`) but a buffer's; \
             declare a write to a buffer with `BufferAccess::write(&mut buffer)`"
        );
        BufferAccess::new(Some(usage), Access::Write, "library state")
    }

    /// How the work uses the buffer.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether the memory's record is shared ([`BufferUsage::is_shared`]): the halves of a
    /// `split_at_mut`, which other threads and streams may use at once, or a library's state.
    /// A wrapper whose work is queued later than its declaration (an NCCL operation inside a
    /// group, which NCCL queues at the group's end) must refuse such memory, as
    /// [`Stream::will_use`] does: a write declared on another stream in between replaces it as
    /// the record's writer, and the memory's host reads and release stop waiting for it
    /// (audit 2026-11-28, G13-4).
    pub fn is_shared(&self) -> bool {
        self.usage.is_some_and(BufferUsage::is_shared)
    }
}

impl fmt::Debug for BufferAccess<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferAccess").field("name", &self.name).field("access", &self.access).finish()
    }
}

impl fmt::Debug for BufferUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `try_lock`: this thread may hold the record (inside `will_use_for`'s work, E8).
        match self.state.try_lock() {
            Ok(state) => f.debug_struct("BufferUsage").field("writer", &state.writer).field("readers", &state.readers.len()).finish(),
            Err(_) => f.debug_struct("BufferUsage").field("state", &"(locked)").finish(),
        }
    }
}

impl BufferUsage {
    /// A fresh allocation in `context`, last written by `writer` (the stream its allocation
    /// or initialisation was queued on).
    pub(crate) fn new(context: &Context, writer: Stream) -> Self {
        BufferUsage {
            context: context.clone(),
            context_key: context.raw() as usize,
            shared: AtomicBool::new(false),
            library: false,
            lent: false,
            state: Mutex::new(UseState { writer: Some(writer), readers: Vec::new() }),
            fast_read: AtomicUsize::new(0),
            fast_write: AtomicUsize::new(0),
        }
    }

    /// The record of memory another library lent ([`BufferUsage::new`] otherwise): its owner,
    /// not ferrocuda, keeps it alive, so a capture by that owner may record it (G23R-2's
    /// refusal is for ferrocuda-owned memory only).
    pub(crate) fn lent(context: &Context, writer: Stream) -> Self {
        BufferUsage { lent: true, ..Self::new(context, writer) }
    }

    /// Memory in `context` that no work has used yet (pinned host memory, a library's work
    /// area, a module's globals).
    pub(crate) fn idle(context: &Context) -> Self {
        BufferUsage {
            context: context.clone(),
            context_key: context.raw() as usize,
            shared: AtomicBool::new(false),
            library: false,
            lent: false,
            state: Mutex::new(UseState { writer: None, readers: Vec::new() }),
            fast_read: AtomicUsize::new(0),
            fast_write: AtomicUsize::new(0),
        }
    }

    /// The record of a library's internal state in `context` (a communicator's or a handle's
    /// own device buffers), for a wrapper to declare with [`BufferAccess::library_state`] in
    /// each call that uses the state: calls on different streams are then ordered.
    ///
    /// The record is shared from the start ([`BufferUsage::is_shared`]): a declaration through
    /// `&` may come from two threads at once, so each piece of work holds the record's lock
    /// from its ordering to its queuing (one uncontended lock per call).
    pub fn for_library_state(context: &Context) -> Self {
        let usage = BufferUsage { library: true, ..Self::idle(context) };
        usage.mark_shared();
        usage
    }

    /// The context that owns the allocation.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Blocks the host until the queued work that conflicts with a host `access` has
    /// finished: the last writer's for a read, every user's for a write. That work is then
    /// forgotten (for pinned host memory, which the host reads and writes directly).
    pub(crate) fn wait_on_host(&self, access: Access) -> Result<()> {
        // The record's lock and the streams' gates may be held by threads waiting for a door
        // call's work this thread may be running (G15R-6).
        crate::stream::refuse_inside_door_work("a host copy's wait")?;
        if held_by_this_thread(&self.state) {
            return Err(Error::DeclaredAgainWhileHeld { operation: "a host copy's wait".to_string(), argument: "the buffer" });
        }
        let mut state = self.lock();
        if let Some(writer) = &state.writer {
            writer.host_wait()?;
        }
        state.writer = None;
        if access == Access::Write {
            for reader in &state.readers {
                reader.host_wait()?;
            }
            state.readers.clear();
        }
        // No stream is the writer any more: no fast path until the next stream work.
        self.fast_read.store(0, Ordering::Release);
        self.fast_write.store(0, Ordering::Release);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, UseState> {
        // A named panic, not a deadlock (E8): the fallible paths return the error first.
        assert!(
            !held_by_this_thread(&self.state),
            "ferrocuda: a buffer's use record is locked again by the thread that holds it (inside `Stream::will_use_for`'s \
             work or a `Stream::enqueue` closure, which hold the records they declared): that would wait for itself. Do not \
             use memory declared there again inside the work"
        );
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes that views of this memory that two threads may use at once exist (the two halves
    /// of a `split_at_mut`, D2). From now on work on it holds the record's lock from its
    /// ordering to its queuing, and the fast path is off: without that, another thread's
    /// ordering could record this stream's tail event between our ordering and our queuing,
    /// wait for that (too early) event and replace us as the writer, and our work would be in
    /// nobody's record (host reads before it, the free under it).
    pub(crate) fn mark_shared(&self) {
        self.shared.store(true, Ordering::Relaxed);
        self.fast_read.store(0, Ordering::Release);
        self.fast_write.store(0, Ordering::Release);
    }

    /// True while views that two threads may use at once may exist (the halves of a
    /// `split_at_mut`, until the buffer itself is used again), and always for a library's state
    /// ([`BufferUsage::for_library_state`]): work on the memory then holds this record's lock
    /// from its ordering to its queuing (audit 2026-11-27d, D2).
    pub fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Relaxed)
    }

    /// The record's owner (the [`DeviceSlice`](crate::DeviceSlice) of a buffer, which holds
    /// it) is borrowed, shared or exclusively: the views of a `split_at_mut` borrow it
    /// exclusively, so none is alive now, and none can be made while this borrow lasts; every
    /// piece of work declared through them has been queued (its declaration held the view).
    /// So no other thread can declare work on the record between another declaration and its
    /// queuing any more, and the record goes back to the one-load fast path (its fast keys are
    /// set again by the next ordering). One load when the record is not shared. Never called
    /// for a library's state, which has no owner to borrow.
    #[inline]
    pub(crate) fn owner_borrowed(&self) {
        if self.shared.load(Ordering::Relaxed) {
            self.shared.store(false, Ordering::Relaxed);
        }
    }

    /// True when `stream` may do `access` with no wait and no bookkeeping (see `fast_read`).
    /// Concurrent changes cannot invalidate the answer: while the record is not shared
    /// (`BufferUsage::shared`), a write needs the memory borrowed exclusively, so no other
    /// work is being declared on it meanwhile; a shared record never has a fast key.
    #[inline]
    fn is_fast(&self, stream: &Stream, access: Access) -> bool {
        let field = match access {
            Access::Read => &self.fast_read,
            Access::Write => &self.fast_write,
        };
        let k = key(stream);
        k != 0 && field.load(Ordering::Acquire) == k
    }

    #[cold]
    fn before_stream_work_slow(&self, stream: &Stream, access: Access) -> Result<()> {
        let mut state = self.lock();
        let outcome = state.order(stream, access);
        // Recompute the fast paths from the new state, under the lock.
        let (fast_read, fast_write) = state.fast_keys(stream, outcome.is_ok());
        self.fast_write.store(fast_write, Ordering::Release);
        self.fast_read.store(fast_read, Ordering::Release);
        outcome
    }

    /// Gives up on the work queued so far on the memory this record tracks, as a
    /// [`Stream::synchronize_timeout`] that timed out does (P12): until that work ends (or a
    /// [`Context::synchronize`](crate::Context::synchronize) returns), releases and the
    /// context's teardown do not block on it, they leak instead. For a library wrapper whose
    /// teardown aborted work that may never finish (an NCCL communicator aborted because a peer
    /// is gone). A library state's record ([`BufferUsage::for_library_state`]) forgets those
    /// streams; any other record (a buffer's, reached through
    /// [`DeviceSlice::usage`](crate::DeviceSlice::usage)) keeps them, so that its host copies,
    /// other streams and its release still come after that work (on the GPU, or by leaking:
    /// audit 2026-11-28d review, G16R-11, a buffer that forgot the kernel still writing it was
    /// freed under it).
    pub fn give_up_on_work(&self) {
        let streams = if self.library { self.take_streams() } else { self.streams() };
        for stream in streams {
            stream.mark_hung();
        }
    }

    /// Handles for the streams of the record (its writer and the readers since), each once.
    fn streams(&self) -> Vec<Stream> {
        let state = self.lock();
        let mut streams: Vec<Stream> = state.writer.iter().map(Stream::record).collect();
        for reader in &state.readers {
            if !streams.iter().any(|s| s.same_as(reader)) {
                streams.push(reader.record());
            }
        }
        streams
    }

    /// Prepares [`BufferUsage::give_up_on_work`] for a teardown that may have to give up on
    /// the work later, at a point where it must make no CUDA call (one could block behind the
    /// very work given up on, while another thread is inside the library): records the markers
    /// now, after the work queued so far on this record's streams. [`GiveUp::commit`] then
    /// gives up with no CUDA call; dropping the [`GiveUp`] uncommitted destroys the markers.
    pub fn prepare_give_up(&self) -> GiveUp {
        let streams = self.streams();
        GiveUp { markers: streams.iter().map(|s| (s.context().clone(), s.hung_marker())).collect() }
    }

    /// Takes the streams that may still use the buffer (for its release).
    pub(crate) fn take_streams(&self) -> Vec<Stream> {
        let mut state = self.lock();
        self.fast_read.store(0, Ordering::Release);
        self.fast_write.store(0, Ordering::Release);
        let mut streams: Vec<Stream> = state.writer.take().into_iter().collect();
        for reader in state.readers.drain(..) {
            if !streams.iter().any(|s| s.same_as(&reader)) {
                streams.push(reader);
            }
        }
        streams
    }
}

/// Markers recorded ahead of a [`BufferUsage::give_up_on_work`] that may not happen
/// ([`BufferUsage::prepare_give_up`]).
#[must_use = "dropped uncommitted, it gives up on nothing"]
pub struct GiveUp {
    /// Each stream's context and its marker event (null: none could be recorded).
    markers: Vec<(Context, sys::CUevent)>,
}

impl GiveUp {
    /// Gives up on the work queued on `usage`'s memory before the markers were recorded, as
    /// [`BufferUsage::give_up_on_work`] does, but without a CUDA call: the markers go to their
    /// contexts' lists, and `usage`, if it is a library state's record, forgets its streams
    /// without releasing its handles to them (leaked: dropping the last handle of a stream
    /// would call CUDA to destroy it); any other record keeps them (G16R-11).
    pub fn commit(mut self, usage: &BufferUsage) {
        for (context, marker) in self.markers.drain(..) {
            context.note_hung(marker);
        }
        if usage.library {
            std::mem::forget(usage.take_streams());
        }
    }
}

impl fmt::Debug for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GiveUp").field("markers", &self.markers.len()).finish()
    }
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        for (context, marker) in self.markers.drain(..) {
            if !marker.is_null()
                && let Ok(_bound) = context.bind()
            {
                // SAFETY: created by `Stream::hung_marker`, never handed to the context, destroyed
                // once, here (a pending record still completes).
                let _ = unsafe { crate::driver::event::destroy(marker) };
            }
        }
    }
}

/// Buffer ordering on a stream lives here, with the tracking.
impl Stream {
    /// Declares that work queued next on this stream reads or writes `buffers`, without
    /// queuing anything: makes this stream wait for their earlier work on other streams,
    /// refuses buffers of another context (unless peer access was enabled), and records this
    /// stream as their user, so that later work on other streams, host copies and the buffers'
    /// drops wait for what is queued here after it.
    ///
    /// For work you queue yourself, use [`Stream::enqueue`], which declares and queues in one
    /// step (and is the only way to the raw stream handle). This call is for work queued by
    /// a typed launcher whose arguments are raw device pointers (`DevicePtr`), which the
    /// launcher cannot declare: `stream.will_use(&[BufferAccess::read(&x)])?`, then launch.
    ///
    /// The declaration holds only if no other thread declares work on the same buffer between
    /// it and the queuing. For a buffer or view only you hold (`&mut` for a write) that is
    /// given. Memory whose record other threads may reach at once (a half of a
    /// `split_at_mut`, [`BufferAccess::library_state`]) is refused
    /// ([`Error::SharedDeclarationNotHeld`]): another thread's declaration could overtake this
    /// one before its work is queued (D2). Declare and queue such memory with
    /// [`Stream::will_use_for`].
    ///
    /// Inside a capture of the stream the declaration orders and records nothing (captured work
    /// runs when the graph is launched). If the capture ends before the launch (another
    /// handle's [`Stream::end_capture`], on any thread), the launch runs for real with nothing
    /// recorded: host reads, other streams and the buffers' drops do not wait for it. The raw
    /// launch's own `unsafe` contract carries that (audit 2026-11-28c review2 G15R-5); inside a
    /// capture, prefer [`Stream::will_use_for`], which refuses the work then
    /// ([`Error::CaptureChangedWhileQueued`]).
    ///
    /// # Errors
    /// [`Error::SharedDeclarationNotHeld`]; [`Error::NestedDoorCall`] inside the `work` of a
    /// [`Stream::enqueue`] (G15R-6); the door's ordering errors
    /// ([`Error::ForeignCapture`], [`Error::CapturedByAnotherThread`],
    /// [`Error::BufferInOtherContext`], [`Error::OrderingAfterCapture`], the driver's).
    pub fn will_use(&self, buffers: &[BufferAccess<'_>]) -> Result<()> {
        crate::stream::refuse_inside_door_work("Stream::will_use")?;
        refuse_shared(buffers)?;
        before_work(self, "Stream::will_use", buffers)
    }

    /// [`Stream::will_use`], then `work` (which queues the declared work), with the ordering
    /// of buffers that other threads may reach at once (the halves of a `split_at_mut`) held
    /// until `work` returns, as [`Stream::enqueue`] holds it until its work is queued: no other
    /// thread's declaration on those buffers comes between (D2).
    ///
    /// While `work` runs holding such records, this thread waits for no other such record,
    /// nor for anything whose holder may wait for one (docs/host-safety.md, "The locks"): so
    /// two threads cannot wait for each other through their records. Inside `work`,
    /// - declaring the same memory again (a tracked launch argument, say) is refused
    ///   ([`Error::DeclaredAgainWhileHeld`]; it would wait for itself);
    /// - declaring other memory that other threads may reach at once (a half of another split
    ///   buffer) is refused ([`Error::SharedDeclarationWhileHeld`]): two threads whose works
    ///   declared crossed halves of two split buffers waited for each other for ever. Declare
    ///   all of the work's shared memory in this one call, and queue it inside through raw
    ///   pointers (`DevicePtr`);
    /// - [`Stream::begin_capture`], [`Stream::wait_event`] and `wait_raw_event` are refused
    ///   ([`Error::WaitWhileDeclarationHeld`]): they wait for other threads'
    ///   [`Stream::hold_off_capture`] stretches, whose work may wait for the held records.
    ///
    /// Memory no other thread can reach (a whole buffer, a view of one), launches, copies,
    /// host waits and drops are fine inside `work`; these refusals apply only while the call
    /// holds shared records (none are held when it declared none).
    ///
    /// Declared inside a capture of the stream (nothing ordered or recorded), door work on this
    /// stream inside `work` is refused ([`Error::CaptureChangedWhileQueued`]) once the capture
    /// has ended meanwhile, instead of running untracked (G15R-5).
    ///
    /// # Errors
    /// As [`Stream::will_use`] (without its refusal of shared records);
    /// [`Error::NestedDoorCall`] inside the `work` of a [`Stream::enqueue`] (G15R-6);
    /// [`Error::SharedDeclarationWhileHeld`] when called inside the `work` of another
    /// `will_use_for` that holds shared records and `buffers` holds one too.
    pub fn will_use_for<R>(&self, buffers: &[BufferAccess<'_>], work: impl FnOnce() -> R) -> Result<R> {
        crate::stream::refuse_inside_door_work("Stream::will_use_for")?;
        let own_capture = self.capture_check("Stream::will_use_for")?;
        let held = order_buffers(self, "Stream::will_use_for", &[buffers], own_capture)?;
        // Declared for a capture (nothing ordered or recorded): door work on this stream inside
        // `work` is refused if the capture has ended meanwhile (audit 2026-11-28c G15R-5).
        let outcome = if own_capture { self.with_declared_captured(work) } else { work() };
        drop(held);
        Ok(outcome)
    }
}

/// [`Stream::will_use`]'s refusal of records that other threads may reach at once: its
/// declaration comes apart from the queuing, which only [`Stream::will_use_for`] holds.
fn refuse_shared(buffers: &[BufferAccess<'_>]) -> Result<()> {
    match buffers.iter().find(|b| b.usage.is_some_and(BufferUsage::is_shared)) {
        Some(shared) => Err(Error::SharedDeclarationNotHeld { argument: shared.name }),
        None => Ok(()),
    }
}

/// What every piece of stream work does first: refuses work on a stream captured into a graph
/// ferrocuda did not begin ([`Error::ForeignCapture`], Q8: for borrowed streams this asks the
/// driver), then refuses buffers of another context (unless peer access was enabled), then
/// orders `stream` after their earlier work and records it as their user. Inside ferrocuda's
/// own capture only the context check is made (Q9): captured work runs when the graph is
/// launched, which [`GraphExec::launch`](crate::GraphExec::launch)'s contract covers.
///
/// The locks of shared records ([`Held`]) are released on return: for [`Stream::will_use`],
/// whose work is queued later by its caller.
#[inline]
pub(crate) fn before_work(stream: &Stream, operation: &str, buffers: &[BufferAccess<'_>]) -> Result<()> {
    let own_capture = stream.capture_check(operation)?;
    order_buffers(stream, operation, &[buffers], own_capture).map(drop)
}

/// The locks of the shared records ([`BufferUsage::mark_shared`]) that a piece of work was
/// ordered under: the door holds them until the work is queued, so that no other thread's
/// ordering on the same record comes between this work's ordering and its queuing (D2).
/// Empty (no allocation, no lock) when no record is shared.
#[must_use = "dropping it releases the records before the work is queued"]
pub(crate) struct Held<'a, S = Stream> {
    _guards: Vec<MutexGuard<'a, UseState<S>>>,
    /// The records' addresses, registered in [`HELD`] while the guards are held.
    registered: Vec<usize>,
}

impl<S> Drop for Held<'_, S> {
    fn drop(&mut self) {
        if self.registered.is_empty() {
            return;
        }
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            for address in &self.registered {
                if let Some(at) = held.iter().rposition(|a| a == address) {
                    held.swap_remove(at);
                }
            }
        });
    }
}

std::thread_local! {
    /// The shared records this thread holds locked (a [`Held`] of `Stream::enqueue` or
    /// `Stream::will_use_for` while its work runs), by address: locking one of them again on
    /// this thread would wait for itself (E8, audit 2026-11-27e). std's `Mutex` blocks for
    /// ever then; the door refuses instead ([`Error::DeclaredAgainWhileHeld`]).
    static HELD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// True when this thread holds `record` locked through a [`Held`] (E8).
fn held_by_this_thread<T>(record: &Mutex<T>) -> bool {
    let address = std::ptr::from_ref(record) as usize;
    HELD.with(|held| held.borrow().contains(&address))
}

/// The buffer part of [`before_work`], after its capture check (`own_capture`: ferrocuda's
/// own capture records `stream`), over the access lists of one piece of work.
///
/// For each access, in this order: the context check (before the fast path, D4: a fast key
/// names a stream, and must never let a stream of another context through), the fast path
/// (one atomic load: `stream` is already ordered), then the ordering under the record's lock.
/// The records that two threads may reach at once (shared, D2) are ordered last, under locks
/// taken in address order (no deadlock between two pieces of work that share several) and
/// returned in [`Held`], for the caller to keep until its work is queued.
#[inline]
pub(crate) fn order_buffers<'a>(stream: &Stream, operation: &str, lists: &[&[BufferAccess<'a>]], own_capture: bool) -> Result<Held<'a>> {
    let context = stream.context();
    let context_key = context.raw() as usize;
    // G23R-2 (audit 2026-11-29d): captured, but not by ferrocuda: the owner of a
    // `from_raw_in_owner_captures` stream records it (torch.cuda.graph). Its graph keeps the
    // owner's memory alive for its replays, never ferrocuda's, so ferrocuda-owned memory (every
    // access with a use record but a lent view's, `BufferUsage::lent`: torch's own tensors lent
    // to an op pass) is refused there instead of being recorded untracked.
    let owner_capture = own_capture && stream.joins_owner_captures() && !stream.ours_captured();
    let mut any_shared = false;
    for buffer in lists.iter().flat_map(|list| list.iter()) {
        let Some(usage) = buffer.usage else { continue };
        let step = door_step(
            || !buffer.any_context && usage.context_key != context_key && !context.can_use_memory_of(usage.context.raw()),
            own_capture,
            owner_capture && !usage.lent,
            || usage.is_fast(stream, buffer.access),
            || usage.is_shared(),
        );
        match step {
            Step::Refuse => return Err(Error::BufferInOtherContext { operation: operation.to_string(), argument: buffer.name }),
            Step::RefuseOwned => return Err(Error::OwnedMemoryInOwnerCapture { operation: operation.to_string(), argument: buffer.name }),
            Step::Skip => {}
            Step::Shared => any_shared = true,
            Step::Order => usage.before_stream_work_slow(stream, buffer.access)?,
        }
    }
    if !any_shared {
        return Ok(Held { _guards: Vec::new(), registered: Vec::new() });
    }
    order_shared(stream, operation, lists)
}

/// What the door does with one access.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Memory of another context the stream may not use.
    Refuse,
    /// Ferrocuda-owned memory in a capture of the stream's owner (G23R-2).
    RefuseOwned,
    /// Nothing to do: captured work (not tracked), or the stream is the fast one.
    Skip,
    /// Ordered under the record's lock, held until the work is queued ([`order_shared`]).
    Shared,
    /// Ordered under the record's lock now.
    Order,
}

/// The door's decision for one access, its checks in this order: the context first (D4: a
/// fast key names a stream, never a context, and a handle such as `CU_STREAM_PER_THREAD` was
/// the same number in every context), then ferrocuda's own capture, then the fast path (one
/// load; never set while the record is shared), then whether the record is shared.
#[inline(always)]
fn door_step(other_context: impl FnOnce() -> bool, own_capture: bool, owner_capture: bool, fast: impl FnOnce() -> bool, shared: impl FnOnce() -> bool) -> Step {
    if other_context() {
        Step::Refuse
    } else if owner_capture {
        Step::RefuseOwned
    } else if own_capture || fast() {
        Step::Skip
    } else if shared() {
        Step::Shared
    } else {
        Step::Order
    }
}

/// The shared records of one piece of work ([`order_buffers`]): each locked once, in address
/// order, ordered under its lock, and the locks returned ([`hold_shared`]).
#[cold]
#[inline(never)]
fn order_shared<'a>(stream: &Stream, operation: &str, lists: &[&[BufferAccess<'a>]]) -> Result<Held<'a>> {
    let shared = lists.iter().flat_map(|list| list.iter()).filter_map(|b| b.usage.filter(|u| u.is_shared()).map(|u| (&u.state, b.access, b.name)));
    hold_shared(stream, operation, shared)
}

/// True while this thread holds shared records locked ([`Held`]): inside the `work` of a
/// `Stream::will_use_for` (or of a `Stream::enqueue`, where every wait is refused anyway,
/// G15R-6) whose declaration held some.
pub(crate) fn holds_shared_records() -> bool {
    HELD.with(|held| !held.borrow().is_empty())
}

/// [`Error::WaitWhileDeclarationHeld`] naming `operation` while this thread holds shared
/// records ([`holds_shared_records`]): for the calls that wait for other threads'
/// `hold_off_capture` stretches, whose work may wait for those records (session 17).
pub(crate) fn refuse_while_holding_shared(operation: &str) -> Result<()> {
    if holds_shared_records() { Err(Error::WaitWhileDeclarationHeld { operation: operation.to_string() }) } else { Ok(()) }
}

/// Orders `stream` for `accesses` (shared records, with the accesses' names) under their
/// locks, taken in one go ([`order_locked`]), and returns the locks, registered as this
/// thread's in [`HELD`]. Generic over the stream for the unit tests.
///
/// Two refusals first, so that a thread never waits for a record's lock while it holds
/// another's (the lock order of docs/host-safety.md, "The locks"):
/// - a record this thread already holds (declared by the `will_use_for` or `enqueue` whose work
///   is running) would be locked again and wait for itself: [`Error::DeclaredAgainWhileHeld`]
///   (E8);
/// - any shared record while this thread holds others (inside `will_use_for`'s work): the
///   thread would wait for it while holding those, and another thread holding it may be
///   waiting for one of those (two works declaring crossed halves of two split buffers waited
///   for each other for ever): [`Error::SharedDeclarationWhileHeld`] (session 17). So every
///   thread that waits for a record's lock holds no record but the lower-addressed ones of the
///   same call, and no cycle of such waits can close.
fn hold_shared<'a, S: Ordered + 'a>(
    stream: &S,
    operation: &str,
    accesses: impl Iterator<Item = (&'a Mutex<UseState<S>>, Access, &'static str)> + Clone,
) -> Result<Held<'a, S>> {
    if let Some((_, _, again)) = accesses.clone().find(|(record, _, _)| held_by_this_thread(*record)) {
        return Err(Error::DeclaredAgainWhileHeld { operation: operation.to_string(), argument: again });
    }
    if holds_shared_records()
        && let Some((_, _, another)) = accesses.clone().next()
    {
        return Err(Error::SharedDeclarationWhileHeld { operation: operation.to_string(), argument: another });
    }
    let guards = order_locked(stream, accesses.clone().map(|(record, access, _)| (record, access)))?;
    let mut registered: Vec<usize> = accesses.map(|(record, _, _)| std::ptr::from_ref(record) as usize).collect();
    registered.sort_unstable();
    registered.dedup();
    HELD.with(|held| held.borrow_mut().extend_from_slice(&registered));
    Ok(Held { _guards: guards, registered })
}

/// Locks each record of `accesses` once, in address order (two pieces of work that share
/// several records lock them in the same order: no deadlock), orders `stream` for each access
/// under its record's lock, and returns the locks: the caller holds them until its work is
/// queued (D2). Generic over the stream for the unit tests.
fn order_locked<'a, S: Ordered + 'a>(
    stream: &S,
    accesses: impl Iterator<Item = (&'a Mutex<UseState<S>>, Access)> + Clone,
) -> Result<Vec<MutexGuard<'a, UseState<S>>>> {
    let mut records: Vec<&'a Mutex<UseState<S>>> = accesses.clone().map(|(record, _)| record).collect();
    records.sort_by_key(|record| std::ptr::from_ref(*record) as usize);
    records.dedup_by_key(|record| std::ptr::from_ref(*record) as usize);
    let mut guards: Vec<MutexGuard<'a, UseState<S>>> = records.iter().map(|record| record.lock().unwrap_or_else(|poisoned| poisoned.into_inner())).collect();
    for (record, access) in accesses {
        let at = records.iter().position(|r| std::ptr::eq(*r, record)).expect("every record was locked above");
        guards[at].order(stream, access)?;
    }
    Ok(guards)
}

/// The stream a pooled allocation is freed on: a stream of its own context that used it, or
/// the context's legacy default stream if none did.
pub(crate) fn free_stream(context: &Context, streams: &[Stream]) -> Stream {
    streams.iter().find(|s| s.context().raw() == context.raw()).cloned().unwrap_or_else(|| Stream::default_of(context))
}

/// True when releasing memory that `streams` used would queue work on a stream that is being
/// captured (one of them, or the stream the free goes on): that work would become part of the
/// graph (a free node, an event record) or invalidate the capture (P5, P2).
pub(crate) fn involves_capture(context: &Context, streams: &[Stream]) -> bool {
    !matches!(release_blocked(streams.iter().map(capture_of), capture_of(&free_stream(context, streams))), Blocked::No)
}

/// Whose capture records a stream, for a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Captured {
    /// None.
    No,
    /// One of ferrocuda's: it ends through ferrocuda, and a release postponed until the
    /// context's captures end ([`Context::release`]) then happens.
    Ours,
    /// One ferrocuda does not know of: another library's capture of a borrowed stream.
    Foreign,
}

/// [`Captured`] for `stream` (the driver is asked only as [`Stream::capture_now`] does). A
/// captured stream is in one of ferrocuda's captures when its own flags say so (it began the
/// capture, or joined one), and also when no other library can capture it at all: a stream
/// of ferrocuda's whose handle never left its door closures, and the legacy stream (seen as
/// captured only while a capture of ferrocuda's on a stream ordered with it runs). Only a
/// stream another library may capture (borrowed, or one that waited on another library's raw
/// event), captured without ferrocuda's flags, is in a foreign capture (G16S-4: every capture
/// seen there was taken for a foreign one).
fn capture_of(stream: &Stream) -> Result<Captured> {
    if !stream.capture_now()? {
        Ok(Captured::No)
    } else if stream.ours_captured() || !stream.others_may_capture() {
        Ok(Captured::Ours)
    } else {
        Ok(Captured::Foreign)
    }
}

/// Why a release cannot happen now.
#[derive(Debug)]
enum Blocked {
    /// Nothing holds it back.
    No,
    /// A stream involved is being captured by ferrocuda: the release waits for the end of the
    /// context's captures.
    OurCapture,
    /// A stream involved is being captured by another library (and none by ferrocuda): the
    /// memory is leaked rather than freed into that graph.
    ForeignCapture,
    /// A capture query failed: the context faulted (Q10), and nothing may be freed while the
    /// GPU's state is unknown.
    Fault(Error),
}

/// The rule of [`involves_capture`] and [`release`] on the capture states alone (unit-tested
/// without a GPU): the states of the streams that used the memory and of the stream it is
/// freed on. A failed query is a fault, not a capture (Q10), and wins; then a capture of
/// ferrocuda's (the release waits for it and decides again after it, when a foreign capture
/// may have ended too); then a foreign one.
fn release_blocked(used: impl Iterator<Item = Result<Captured>>, free_on: Result<Captured>) -> Blocked {
    let (mut ours, mut foreign) = (false, false);
    for state in std::iter::once(free_on).chain(used) {
        match state {
            Err(error) => return Blocked::Fault(error),
            Ok(Captured::Ours) => ours = true,
            Ok(Captured::Foreign) => foreign = true,
            Ok(Captured::No) => {}
        }
    }
    if ours {
        Blocked::OurCapture
    } else if foreign {
        Blocked::ForeignCapture
    } else {
        Blocked::No
    }
}

/// Releases an allocation of `bytes` once the streams that used it are done with it:
/// stream-ordered (`cuMemFreeAsync` on one of them after it waits for the others) for pool
/// memory, else after the host waited for them (`cuMemFree`). Errors (a faulted context, a
/// wait refused after a timeout, P12) leak the memory: freeing what the GPU may still touch
/// would be worse. So does a stream captured by someone ferrocuda does not know of (another
/// library's capture of a borrowed stream): a free queued there would become a node of their
/// graph. A capture of ferrocuda's found here postpones the release until the context's
/// captures end (G16S-4).
pub(crate) fn release(context: &Context, ptr: u64, bytes: usize, streams: UsedStreams, pooled: bool) {
    let what = crate::context::Released::DeviceBuffer(bytes);
    let again = move |context: &Context, streams: UsedStreams| release(context, ptr, bytes, streams, pooled);
    let Some(mut streams) = streams.resolve_or_postpone(context, what, again) else { return };
    let Ok(_bound) = context.bind() else {
        return;
    };
    // No capture may begin on these streams between the check below and the free (another
    // thread's `begin_capture`): the free, or a wait recorded for it, would join the graph.
    // Each stream once (a second shared lock of one gate could wait behind a writer).
    let own = free_stream(context, &streams);
    streams.retain(|s| !s.same_as(&own));
    let gates: Vec<_> = streams.iter().chain(std::iter::once(&own)).map(Stream::capture_gate).collect();
    match release_blocked(streams.iter().map(capture_of), capture_of(&own)) {
        Blocked::No => {}
        // A capture of ferrocuda's involves the buffer: it began on one of these streams after
        // `Context::release_after_streams` looked without the gates (or on a stream ordered
        // with the legacy stream, the free's, which these gates do not hold off). The release
        // waits for the end of the context's captures, as that first look would have made it
        // (P5). It used to take this for another library's capture, and leaked the memory
        // with that message (audit 2026-11-28d review3, G16S-4). The gates go first: the
        // release may run again at once (the capture ended meanwhile) and take them again.
        Blocked::OurCapture => {
            drop(gates);
            streams.push(own);
            let held = UsedStreams::hold(streams);
            context.release(what, move |context| release(context, ptr, bytes, held, pooled));
            return;
        }
        Blocked::ForeignCapture => {
            super::leaks::leaked_into_foreign_capture("DeviceBuffer");
            return;
        }
        // The context faulted: the memory goes with the context's teardown or the process, and
        // the fault is named, not a capture (Q10).
        Blocked::Fault(error) => {
            // Once per process: after a fault every buffer's drop ends here.
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "ferrocuda: a DeviceBuffer was dropped after its context failed ({error}); its memory, and that of every \
                     buffer dropped after it in a failed context, is left to the context's teardown or the process's exit \
                     rather than freed while the GPU's state is unknown"
                );
            }
            return;
        }
    }
    if pooled {
        // Free on a stream of the buffer's own context (the legacy one if none used it).
        for other in &streams {
            if own.wait_for_gated(other, true).is_err()
                && let Err(error) = other.host_wait_gated(true)
            {
                super::leaks::leaked_after_failed_wait("DeviceBuffer", &error);
                return;
            }
        }
        // SAFETY: allocated from the pool by us, freed once; the free is ordered after every
        // stream that used the buffer (waited for above), on a stream no capture records.
        let _ = own.enqueue("cuMemFreeAsync", &[], |stream| Ok::<_, Error>(unsafe { crate::driver::memory::free_async(ptr, stream.get()) }?));
    } else {
        for stream in streams.iter().chain(std::iter::once(&own)) {
            if let Err(error) = stream.host_wait_gated(true) {
                super::leaks::leaked_after_failed_wait("DeviceBuffer", &error);
                return;
            }
        }
        let _bound_again = match context.bind() {
            Ok(bound) => bound,
            Err(error) => {
                super::leaks::leaked_after_failed_wait("DeviceBuffer", &error);
                return;
            }
        };
        // cuMemFree may wait for the whole device (F12-2): not after a reported timeout.
        if !super::leaks::may_release("DeviceBuffer", context.timed_out(), "cuMemFree without memory pools (it may wait for the whole device)") {
            return;
        }
        // SAFETY: allocated by us with cuMemAlloc, freed once, after the work of every stream
        // that used it (waited for above).
        let _ = unsafe { crate::driver::memory::free(ptr) };
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;

    use super::*;

    /// A stream for the rules alone: an id (0 = the legacy stream) and a shared log of waits.
    #[derive(Clone)]
    struct Fake {
        id: usize,
        waits: Rc<RefCell<Vec<(usize, usize)>>>,
    }

    impl Ordered for Fake {
        fn same_as(&self, other: &Self) -> bool {
            self.id == other.id
        }
        fn wait_for(&self, other: &Self) -> Result<()> {
            if self.id != other.id {
                self.waits.borrow_mut().push((self.id, other.id));
            }
            Ok(())
        }
        fn key(&self) -> usize {
            self.id
        }
        fn record(&self) -> Self {
            self.clone()
        }
    }

    /// The (waiting stream, awaited stream) pairs the fakes recorded.
    type Waits = Rc<RefCell<Vec<(usize, usize)>>>;

    fn streams() -> (Fake, Fake, Fake, Waits) {
        let waits = Rc::new(RefCell::new(Vec::new()));
        let s = |id| Fake { id, waits: waits.clone() };
        (s(0), s(1), s(2), waits)
    }

    /// E8 (audit 2026-11-27e): the records a `Held` holds are known to this thread while it
    /// holds them (and to no other thread), and forgotten when it drops: the door then refuses
    /// a second declaration from inside `will_use_for`'s work by name instead of locking the
    /// record again (which blocked the thread for ever), and the error says what to do.
    #[test]
    fn e8_a_record_held_by_this_thread_is_known_until_its_hold_drops() {
        let record = Mutex::new(UseState::<Stream> { writer: None, readers: Vec::new() });
        let other = Mutex::new(UseState::<Stream> { writer: None, readers: Vec::new() });
        assert!(!held_by_this_thread(&record));
        let address = std::ptr::from_ref(&record) as usize;
        HELD.with(|held| held.borrow_mut().push(address));
        let hold = Held::<Stream> { _guards: Vec::new(), registered: vec![address] };
        assert!(held_by_this_thread(&record) && !held_by_this_thread(&other));
        let seen_elsewhere = std::thread::scope(|scope| scope.spawn(|| held_by_this_thread(&record)).join().unwrap());
        assert!(!seen_elsewhere, "another thread's declarations may lock it (and wait, as intended)");
        drop(hold);
        assert!(!held_by_this_thread(&record));
        let message = Error::DeclaredAgainWhileHeld { operation: "launch: saxpy".into(), argument: "x" }.to_string();
        assert!(message.contains("`x` was already declared by the `Stream::will_use_for`") && message.contains("Declare it once"), "{message}");
    }

    /// U4: a reader on another stream waits for the last writer, once.
    #[test]
    fn a_read_on_another_stream_waits_for_the_writer_once() {
        let (legacy, s1, s2, waits) = streams();
        let mut state = UseState { writer: Some(legacy), readers: Vec::new() };
        state.order(&s1, Access::Write).unwrap();
        state.order(&s2, Access::Read).unwrap();
        state.order(&s2, Access::Read).unwrap();
        assert_eq!(*waits.borrow(), vec![(1, 0), (2, 1)]);
    }

    /// U4: a writer waits for the last writer and for every reader since.
    #[test]
    fn a_write_waits_for_the_writer_and_every_reader_since() {
        let (legacy, s1, s2, waits) = streams();
        let mut state = UseState { writer: Some(s1.clone()), readers: Vec::new() };
        state.order(&s2, Access::Read).unwrap();
        state.order(&legacy, Access::Read).unwrap();
        waits.borrow_mut().clear();
        state.order(&s1, Access::Write).unwrap();
        assert_eq!(*waits.borrow(), vec![(1, 2), (1, 0)], "s1 waits for both readers (it was the writer)");
        assert!(state.readers.is_empty() && state.writer.as_ref().unwrap().id == 1);
    }

    /// Work that stays on one stream waits for nothing and takes the fast paths.
    #[test]
    fn work_on_one_stream_waits_for_nothing_and_becomes_fast() {
        let (legacy, s1, _, waits) = streams();
        let mut state = UseState { writer: Some(legacy), readers: Vec::new() };
        state.order(&s1, Access::Write).unwrap();
        waits.borrow_mut().clear();
        for access in [Access::Read, Access::Write, Access::Read] {
            state.order(&s1, access).unwrap();
        }
        assert!(waits.borrow().is_empty());
        assert_eq!(state.fast_keys(&s1, true), (1, 1));
    }

    /// P5: a buffer's release waits for a capture only when the capture involves it (a stream
    /// that used it, or the stream it is freed on); a capture elsewhere, even one that never
    /// ends, does not hold it back.
    #[test]
    fn p5_a_release_waits_only_for_a_capture_that_involves_the_buffer() {
        use Captured::{No, Ours};
        assert!(matches!(release_blocked([Ok(No), Ok(No)].into_iter(), Ok(No)), Blocked::No), "no stream of the buffer captures: freed now");
        assert!(matches!(release_blocked(std::iter::empty(), Ok(No)), Blocked::No), "an unused buffer is freed now");
        assert!(matches!(release_blocked([Ok(No), Ok(Ours)].into_iter(), Ok(No)), Blocked::OurCapture), "a stream that used it captures: the release waits");
        assert!(matches!(release_blocked([Ok(No)].into_iter(), Ok(Ours)), Blocked::OurCapture), "the stream it is freed on captures: the release waits");
    }

    /// Q10: a failed capture query (a faulted context) blocks the release as a fault, never
    /// as a capture (which printed a message blaming another library's capture).
    #[test]
    fn q10_a_failed_capture_query_is_a_fault_not_a_capture() {
        use Captured::{Foreign, No, Ours};
        let fault = || Err(Error::NoCurrentContext);
        assert!(matches!(release_blocked([Ok(No), fault()].into_iter(), Ok(No)), Blocked::Fault(_)));
        assert!(matches!(release_blocked([Ok(Ours)].into_iter(), fault()), Blocked::Fault(_)), "a fault wins over a capture");
        assert!(matches!(release_blocked([Ok(Foreign)].into_iter(), fault()), Blocked::Fault(_)), "and over a foreign one");
        assert!(matches!(release_blocked(std::iter::empty(), fault()), Blocked::Fault(_)));
    }

    /// G16S-4 (audit 2026-11-28d review3): a release that finds, under the streams' gates, a
    /// capture that began since its first look (which holds no gate) took every capture for
    /// another library's, and leaked the memory with that message. Now a capture of
    /// ferrocuda's postpones the release until the context's captures end (and wins over a
    /// foreign one, which may have ended by then too); only a foreign capture alone leaks.
    #[test]
    fn g16s_4_a_release_meeting_our_capture_waits_for_it_and_only_a_foreign_one_leaks() {
        use Captured::{Foreign, No, Ours};
        assert!(matches!(release_blocked([Ok(Ours)].into_iter(), Ok(No)), Blocked::OurCapture));
        assert!(matches!(release_blocked([Ok(No)].into_iter(), Ok(Ours)), Blocked::OurCapture), "the free's own stream (the legacy one, say)");
        assert!(
            matches!(release_blocked([Ok(Foreign), Ok(Ours)].into_iter(), Ok(No)), Blocked::OurCapture),
            "ours and a foreign one: wait, decide again after"
        );
        assert!(matches!(release_blocked([Ok(Foreign), Ok(No)].into_iter(), Ok(No)), Blocked::ForeignCapture), "a foreign capture alone: leaked");
        assert!(matches!(release_blocked([Ok(No)].into_iter(), Ok(Foreign)), Blocked::ForeignCapture));
    }

    /// D4 (audit 2026-11-27d): the context check comes before the fast path. A buffer of
    /// context A, last written on a stream whose key a stream of context B shares, was accepted
    /// on B by the fast path (`CU_STREAM_PER_THREAD` had the key 2 in every context); it is
    /// refused now, also inside ferrocuda's own capture (Q9), and only a same-context (or
    /// peer-enabled) access reaches the fast path.
    #[test]
    fn d4_the_context_is_checked_before_the_fast_path() {
        let fast = || true;
        assert_eq!(door_step(|| true, false, false, fast, || false), Step::Refuse, "another context's buffer, fast key equal: refused");
        assert_eq!(door_step(|| true, true, false, fast, || false), Step::Refuse, "refused inside our own capture too");
        assert_eq!(door_step(|| false, false, false, fast, || false), Step::Skip, "same context, fast: nothing to do");
        assert_eq!(door_step(|| false, true, false, || panic!("captured work takes no fast path"), || false), Step::Skip);
        assert_eq!(door_step(|| false, false, false, || false, || true), Step::Shared);
        assert_eq!(door_step(|| false, false, false, || false, || false), Step::Order);
    }

    /// G23R-2 (audit 2026-11-29d): in a capture by the owner of a `from_raw_in_owner_captures`
    /// stream (torch.cuda.graph), ferrocuda-owned memory was skipped like any captured work and
    /// recorded, untracked, into the owner's graph, whose replays used it after it was freed.
    /// Now it is refused, whatever the fast path and sharing say; another context's buffer is
    /// still refused as such first.
    #[test]
    fn g23r_2_owned_memory_is_refused_in_an_owner_capture() {
        let never = || -> bool { panic!("an owner's capture decides before the fast path and the sharing") };
        assert_eq!(door_step(|| false, true, true, never, never), Step::RefuseOwned);
        assert_eq!(door_step(|| true, true, true, never, never), Step::Refuse, "the context check comes first");
        assert_eq!(door_step(|| false, true, false, never, || false), Step::Skip, "ferrocuda's own capture: skipped as before");
    }

    /// A stream for the two-thread tests: `queued` counts the work queued on it, and each
    /// wait logs (waiting stream, awaited stream, the awaited stream's work queued so far),
    /// which is what an event recorded on the awaited stream at that moment covers.
    #[derive(Clone)]
    struct Queue {
        id: usize,
        queued: Arc<AtomicUsize>,
        waits: Arc<Mutex<Vec<(usize, usize, usize)>>>,
    }

    impl Ordered for Queue {
        fn same_as(&self, other: &Self) -> bool {
            self.id == other.id
        }
        fn wait_for(&self, other: &Self) -> Result<()> {
            if self.id != other.id {
                self.waits.lock().unwrap().push((self.id, other.id, other.queued.load(Ordering::SeqCst)));
            }
            Ok(())
        }
        fn key(&self) -> usize {
            self.id
        }
        fn record(&self) -> Self {
            self.clone()
        }
    }

    /// One round of the audit's D2 race on one shared record: thread 1 does `first` on stream
    /// 1, thread 2 a write on stream 2, at once; each orders under `order_locked`, then queues
    /// its work (a pause, then its count goes up). `hold`: the locks are kept until the work is
    /// queued (the door's rule), else dropped before it (the old behaviour). Returns whether
    /// the ordering missed a queued piece of work: the stream that came second waited for an
    /// event that did not cover the first one's work (so host reads and the free, which follow
    /// the record, would not wait for it either).
    fn d2_round(first: Access, hold: bool) -> bool {
        let waits = Arc::new(Mutex::new(Vec::new()));
        let stream = |id| Queue { id, queued: Arc::new(AtomicUsize::new(0)), waits: waits.clone() };
        let (s0, s1, s2) = (stream(0), stream(1), stream(2));
        s0.queued.store(1, Ordering::SeqCst); // the buffer's first write, done before the split
        let record = Mutex::new(UseState { writer: Some(s0), readers: Vec::new() });
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            for (stream, access) in [(&s1, first), (&s2, Access::Write)] {
                let (record, barrier) = (&record, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let held = order_locked(stream, std::iter::once((record, access))).unwrap();
                    if !hold {
                        drop(held);
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        stream.queued.fetch_add(1, Ordering::SeqCst);
                    } else {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        stream.queued.fetch_add(1, Ordering::SeqCst);
                        drop(held);
                    }
                });
            }
        });
        let waits = waits.lock().unwrap();
        // Between streams 1 and 2, whichever ordered second must have seen the other's work.
        let between: Vec<_> = waits.iter().filter(|(a, b, _)| *a != 0 && *b != 0).collect();
        between.is_empty() || between.iter().any(|&&(_, _, seen)| seen == 0)
    }

    /// D2 (audit 2026-11-27d): the two halves of a `split_at_mut` share one record and may be
    /// used on two threads at once. With the record's lock released between the ordering and
    /// the queuing, the second thread recorded the first one's stream tail before the first
    /// one's work was queued, and the work fell out of the record (25 of 100 rounds on an
    /// H200: a host read before a write, a free under it). Held until the work is queued, no
    /// round misses it, for a write against a write and a write against a read of the other
    /// half. The unheld control shows the race the test can catch.
    #[test]
    fn d2_an_ordering_held_until_the_work_is_queued_never_misses_the_other_threads_work() {
        let rounds = 100;
        for first in [Access::Write, Access::Read] {
            let missed = (0..rounds).filter(|_| d2_round(first, true)).count();
            assert_eq!(missed, 0, "{first:?} vs a write: {missed} of {rounds} rounds missed the other thread's queued work");
            let control = (0..rounds).filter(|_| d2_round(first, false)).count();
            eprintln!("d2 control ({first:?} vs a write, locks dropped before the work): {control} of {rounds} rounds missed the other thread's work");
            assert!(control > 0, "the control never raced: the test would not catch the old behaviour");
        }
    }

    /// D2: the records of one piece of work are locked once each (a kernel reading one half
    /// and writing the other passes the record twice: a second lock of a `Mutex` on one thread
    /// would deadlock), and each access is ordered.
    #[test]
    fn d2_a_record_passed_twice_is_locked_once_and_ordered_for_both_accesses() {
        let waits = Arc::new(Mutex::new(Vec::new()));
        let stream = |id| Queue { id, queued: Arc::new(AtomicUsize::new(0)), waits: waits.clone() };
        let (s1, s2) = (stream(1), stream(2));
        let (a, b) = (Mutex::new(UseState { writer: Some(s1.clone()), readers: Vec::new() }), Mutex::new(UseState { writer: None, readers: Vec::new() }));
        let held = order_locked(&s2, [(&a, Access::Read), (&b, Access::Write), (&a, Access::Write)].into_iter()).unwrap();
        assert_eq!(held.len(), 2);
        drop(held);
        assert_eq!(a.lock().unwrap().writer.as_ref().unwrap().id, 2);
        assert_eq!(b.lock().unwrap().writer.as_ref().unwrap().id, 2);
        let waits = waits.lock().unwrap();
        assert!(!waits.is_empty() && waits.iter().all(|&w| w == (2, 1, 0)), "only waits for the old writer of `a`: {waits:?}");
    }

    /// Session 17 (README's known gaps, session 16): `Stream::will_use_for`'s work runs holding
    /// the shared records it declared, and two threads whose works then declared crossed halves
    /// of two split buffers waited for each other's record for ever. A thread that holds shared
    /// records is now refused any other ([`Error::SharedDeclarationWhileHeld`]) instead of
    /// waiting, and so are its waits for stretches ([`Error::WaitWhileDeclarationHeld`]). Here
    /// two threads each hold one record (the outer declaration) and, while both hold (a
    /// barrier), declare the other's: both are refused at once, nothing of the other record is
    /// touched, and the control shows that the setup crosses (the other record is locked by the
    /// other thread then, so a plain lock would wait). Once the holds end, the same declaration
    /// goes through. A 10 s limit reports a hang instead of hanging the run.
    #[test]
    fn s17_crossed_shared_records_are_refused_not_deadlocked() {
        type Records = [Mutex<UseState<Queue>>; 2];
        let waits = Arc::new(Mutex::new(Vec::new()));
        let stream = |id| Queue { id, queued: Arc::new(AtomicUsize::new(0)), waits: waits.clone() };
        let records: Arc<Records> = Arc::new([0, 1].map(|_| Mutex::new(UseState { writer: Some(stream(0)), readers: Vec::new() })));
        let (both_hold, both_tried) = (Arc::new(std::sync::Barrier::new(2)), Arc::new(std::sync::Barrier::new(2)));
        let (done, finished) = std::sync::mpsc::channel();
        for first in [0usize, 1] {
            let (records, both_hold, both_tried, done, queue) = (records.clone(), both_hold.clone(), both_tried.clone(), done.clone(), stream(first + 1));
            std::thread::spawn(move || {
                let (mine, other) = (&records[first], &records[1 - first]);
                assert!(!holds_shared_records() && refuse_while_holding_shared("outside").is_ok());
                let outer = hold_shared(&queue, "outer will_use_for", std::iter::once((mine, Access::Write, "mine"))).unwrap();
                both_hold.wait();
                let crossed = other.try_lock().is_err();
                let inner = hold_shared(&queue, "inner launch", std::iter::once((other, Access::Write, "other"))).map(drop);
                let again = hold_shared(&queue, "inner launch", std::iter::once((mine, Access::Read, "mine"))).map(drop);
                let wait = refuse_while_holding_shared("Stream::begin_capture");
                both_tried.wait();
                drop(outer);
                assert!(!holds_shared_records());
                let after = hold_shared(&queue, "after the work", std::iter::once((other, Access::Write, "other"))).map(drop);
                let _ = done.send((crossed, inner, again, wait, after));
            });
        }
        for _ in 0..2 {
            let (crossed, inner, again, wait, after) =
                finished.recv_timeout(std::time::Duration::from_secs(10)).expect("HUNG: two threads declaring crossed shared records deadlocked");
            assert!(crossed, "control: the other thread did not hold its record, so the test did not cross");
            assert!(matches!(&inner, Err(Error::SharedDeclarationWhileHeld { operation, argument: "other" }) if operation == "inner launch"), "{inner:?}");
            assert!(matches!(&again, Err(Error::DeclaredAgainWhileHeld { argument: "mine", .. })), "the held record itself: E8's error first: {again:?}");
            assert!(matches!(&wait, Err(Error::WaitWhileDeclarationHeld { operation }) if operation == "Stream::begin_capture"), "{wait:?}");
            assert!(after.is_ok(), "{after:?}");
        }
        // Each record's last writer is the stream of the thread that declared it after its hold.
        let writers: Vec<usize> = records.iter().map(|r| r.lock().unwrap().writer.as_ref().unwrap().id).collect();
        assert!(writers.iter().all(|&w| w == 1 || w == 2), "{writers:?}");
        let message = Error::SharedDeclarationWhileHeld { operation: "launch: saxpy".into(), argument: "x" }.to_string();
        assert!(message.contains("`x` is memory other threads may use at once") && message.contains("in the one `will_use_for`"), "{message}");
    }

    /// A write elsewhere revokes both fast paths of the old stream; the legacy stream is never
    /// fast.
    #[test]
    fn a_write_on_another_stream_revokes_the_fast_paths() {
        let (legacy, s1, s2, _) = streams();
        let mut state = UseState { writer: Some(s1.clone()), readers: Vec::new() };
        assert_eq!(state.fast_keys(&s1, true), (1, 1));
        state.order(&s2, Access::Read).unwrap();
        assert_eq!(state.fast_keys(&s2, true), (2, 0), "s2 may read; nobody may write without waiting");
        state.order(&legacy, Access::Write).unwrap();
        assert_eq!(state.fast_keys(&legacy, true), (0, 0));
        state.order(&s1, Access::Read).unwrap();
        assert_eq!(state.fast_keys(&s1, true), (1, 0));
    }
}
