//! Streams owned by another library: PyTorch's current stream, a cudarc or candle stream.

use std::any::Any;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;

use cudarc::driver::sys;

use super::problem;
use crate::context::Context;
use crate::driver;
use crate::error::Result;
use crate::stream::{Stream, StreamOrdering};

/// `CU_STREAM_LEGACY`: the legacy default stream, under any compilation mode.
const LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the calling thread's default stream.
const PER_THREAD: usize = 0x2;

/// A stream another library owns, usable for `'a` wherever a [`Stream`] is (it dereferences
/// to one): `saxpy::launch(&borrowed, config, a, &x, &mut y)`.
///
/// Work queued through it runs in the order it would on the owner's stream: on a stream of
/// ferrocuda's that first waits for everything queued on the owner's stream so far, and that
/// the owner's stream waits for when this value drops (events, recorded once each way; see the
/// [module docs](super) for why the owner's handle itself is not used). The legacy default
/// stream (null, `CU_STREAM_LEGACY`), one stream for every thread that lives as long as the
/// context, is used directly.
///
/// `CU_STREAM_PER_THREAD` names a different stream on each host thread (D1): it is borrowed
/// like an owner's stream, on the calling thread (a stream of ferrocuda's waits for that
/// thread's per-thread stream), and when the value drops the host waits for the work queued
/// through it, so that the per-thread stream's later work comes after it. Nothing of ours is
/// left queued on the per-thread stream: the driver does not let a thread exit while its
/// per-thread stream has unfinished work (D1, measured on driver 580), so an event join there
/// would hang a thread that exits right after the borrow ends. The drop therefore blocks until
/// that work is done; for work that may never end, call
/// [`Stream::synchronize_timeout`] first: once it reported the work as still running, the
/// drop neither waits nor joins (the per-thread stream is then not ordered after that work,
/// as for a leaked borrow, and a message says so).
///
/// Do not drop it inside a stream host callback ([`Stream::launch_host_fn`]): CUDA refuses
/// every call there, so neither the join nor a host wait can order the owner's stream, and
/// the drop aborts the process with a message rather than hand the owner's stream back
/// unordered (audit 2026-11-28d review3, G16S-1). Send it to another thread to drop.
pub struct BorrowedStream<'a> {
    stream: Stream,
    /// The handle the owner gave (a default stream handle or the owner's stream).
    handle: sys::CUstream,
    /// The owner's stream, for the join back when the borrow ends (`None`: used directly).
    owner: Option<sys::CUstream>,
    /// A borrow of `CU_STREAM_PER_THREAD`: its end waits on the host instead of joining the
    /// per-thread stream (`end_per_thread_borrow`).
    per_thread: bool,
    _owner: PhantomData<&'a ()>,
}

// SAFETY: the owner's handle is used only in `drop`, from any thread, with the context bound
// (CUDA streams may be used from any thread); the rest is a `Stream`, which is Send + Sync.
unsafe impl Send for BorrowedStream<'_> {}
// SAFETY: as above; `&self` methods do not touch the owner's handle.
unsafe impl Sync for BorrowedStream<'_> {}

impl<'a> BorrowedStream<'a> {
    /// Borrows the stream `raw` of `context`.
    ///
    /// Refused when `raw` belongs to another context, or is being captured into a graph.
    ///
    /// # Safety
    /// `raw` is a live stream (or one of the default stream handles), and its owner does not
    /// destroy it before the returned value drops.
    ///
    /// The owner's stream is ordered after the work queued through this value only when it
    /// drops. Leaked (`mem::forget`, an `Rc` cycle), it never drops: the owner's later work on
    /// its stream is then not ordered after ours, and memory that work shares with ours (a
    /// [`BorrowedSlice`](super::BorrowedSlice) whose home is this value) must be ordered by
    /// the owner with events, as the slice's own contract says. The same holds for a borrow of
    /// `CU_STREAM_PER_THREAD` that ends while its work is still running after
    /// [`Stream::synchronize_timeout`] gave up on it (the host may not wait then, and the
    /// per-thread stream is not joined after it: see the type's documentation).
    pub unsafe fn new(context: &'a Context, raw: sys::CUstream) -> Result<Self> {
        if raw as usize == PER_THREAD {
            // A stream of ours, after the calling thread's per-thread stream (D1).
            let stream = Stream::new(context)?;
            // SAFETY: `ours` is live and of `context`, which the door binds; there the
            // per-thread handle names the calling thread's per-thread stream of `context`.
            stream.enqueue("BorrowedStream::new", &[], |ours| unsafe { join(ours.get(), raw) })?;
            return Ok(BorrowedStream { stream, handle: raw, owner: Some(raw), per_thread: true, _owner: PhantomData });
        }
        if let Some(stream) = default_stream(context, raw)? {
            return Ok(BorrowedStream { stream, handle: raw, owner: None, per_thread: false, _owner: PhantomData });
        }
        // SAFETY: `raw` is live (the caller's contract).
        let flags = unsafe { check_stream(context, raw) }?;
        let ordering =
            if flags & sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 != 0 { StreamOrdering::NonBlocking } else { StreamOrdering::WithLegacyDefault };
        let mut priority = 0;
        // SAFETY: writes one int; `raw` is live.
        unsafe { driver::stream::get_priority(raw, &mut priority) }?;
        let stream = Stream::with_priority(context, ordering, priority)?;
        // Through the door with no memory: the join orders two streams and touches none.
        // SAFETY: both streams are live and of `context` (checked), which the door binds.
        stream.enqueue("BorrowedStream::new", &[], |ours| unsafe { join(ours.get(), raw) })?;
        Ok(BorrowedStream { stream, handle: raw, owner: Some(raw), per_thread: false, _owner: PhantomData })
    }

    /// The owner's stream handle this borrows.
    pub fn owner_raw(&self) -> sys::CUstream {
        self.handle
    }
}

impl Deref for BorrowedStream<'_> {
    type Target = Stream;
    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl Drop for BorrowedStream<'_> {
    fn drop(&mut self) {
        let Some(owner) = self.owner else { return };
        let outcome = if self.per_thread {
            self.end_per_thread_borrow()
        } else {
            // The owner's later work waits for ours, never through an event recorded into a
            // capture of ours (issue 29's host item 1: the owner's stream would join our capture
            // and its later work would be recorded instead of run).
            // SAFETY: `owner` is live until we return (the contract of `new`), of our context.
            unsafe { self.stream.order_raw_after(owner, "BorrowedStream::drop") }
        };
        match outcome {
            Ok(()) => {}
            Err(crate::Error::OrderingAfterCapture { .. }) => {
                eprintln!(
                    "ferrocuda: a BorrowedStream is dropped while its stream is being captured, and the work it queued outside \
                     the capture cannot be named (another thread queued work on it while the capture began): the owner's later \
                     work would race with it, so the process is aborted. End the capture before the borrow ends, and do not \
                     queue work on a stream from one thread while another begins capturing it"
                );
                std::process::abort();
            }
            // Inside a stream host callback nothing can order the owner's stream: the driver
            // refuses every call there (the join, a host wait), and the owner may reuse its
            // memory or destroy its stream as soon as this drop returns. Handing the borrow back
            // unordered let the owner's next work race ferrocuda's (audit 2026-11-28d review3,
            // G16S-1: the fallback wait below was refused too, and its error dropped).
            Err(_) if crate::context::in_host_callback() => {
                eprintln!(
                    "ferrocuda: a BorrowedStream is dropped inside a stream host callback, where CUDA refuses every call: the \
                     owner's stream cannot be ordered after the work queued through the borrow, which may still run, so the \
                     process is aborted. Drop the borrow outside the callback (send it to another thread)"
                );
                std::process::abort();
            }
            // The ordering could not be queued (a faulted context; inside a door call's work,
            // which waits for no lock, G15R-6): wait on the host instead, as the owner may
            // destroy its stream right after this. A wait that fails for another reason than a
            // fault (the stream captured meanwhile) orders nothing: not handed back (G16S-1).
            Err(_) => {
                let waited = self.stream.synchronize();
                if let super::view::AfterFailedWait::Abort(why) = super::view::after_failed_wait(&waited) {
                    eprintln!(
                        "ferrocuda: a BorrowedStream is dropped, and the owner's stream can be ordered after the work queued \
                         through it neither on the GPU nor from the host ({}): {why}. The owner would get its stream back while \
                         that work may still run, so the process is aborted",
                        waited.as_ref().err().map(ToString::to_string).unwrap_or_default()
                    );
                    std::process::abort();
                }
            }
        }
    }
}

impl BorrowedStream<'_> {
    /// The end of a borrow of `CU_STREAM_PER_THREAD`: the host waits for the work queued
    /// through it, so the per-thread stream's later work comes after it. Nothing is queued on
    /// the per-thread stream itself: with the driver (580, H200) a thread whose per-thread
    /// stream still has unfinished work at its exit does not finish exiting (the D1 test's
    /// writer thread, which ended the borrow with an event join, then exited while the 200 ms
    /// kernel ran, was still in the driver's thread teardown 5 s later, long after the kernel
    /// ended; a plain `cuMemsetD32Async` on the per-thread stream just before the exit does
    /// the same). A drop on another thread (whose `CU_STREAM_PER_THREAD` is another stream)
    /// waits the same way.
    ///
    /// After a reported timeout (P12) the work may never end and the host does not wait, and a
    /// join would keep the thread from exiting: the per-thread stream is then left unordered
    /// after that work, as for a leaked borrow (said on standard error; the contract of
    /// [`BorrowedStream::new`] covers it).
    fn end_per_thread_borrow(&self) -> Result<()> {
        match per_thread_end(self.stream.host_wait()) {
            PerThreadEnd::Done(outcome) => outcome,
            PerThreadEnd::Unordered => {
                eprintln!(
                    "ferrocuda: a borrow of a per-thread stream (CU_STREAM_PER_THREAD) ends while work queued through it is \
                     still running after Stream::synchronize_timeout gave up on it: the host does not wait for it, and the \
                     per-thread stream is not joined after it either (the driver would not let the thread exit while it \
                     runs), so the per-thread stream's later work is not ordered after it, as for a leaked borrow"
                );
                Ok(())
            }
        }
    }
}

/// What ends a borrow of `CU_STREAM_PER_THREAD` ([`BorrowedStream::end_per_thread_borrow`]),
/// given the outcome of the host's wait for its work.
#[derive(Debug)]
enum PerThreadEnd {
    /// The wait's outcome is the end: done (the per-thread stream's later work comes after
    /// ours), or an error for the drop to handle (a faulted context, a raced capture).
    Done(Result<()>),
    /// The work is still running after a reported timeout: the host may not wait, and nothing
    /// may be queued on the per-thread stream (the thread could not exit while it runs).
    Unordered,
}

fn per_thread_end(waited: Result<()>) -> PerThreadEnd {
    match waited {
        Err(crate::Error::WorkStillRunning { .. }) => PerThreadEnd::Unordered,
        other => PerThreadEnd::Done(other),
    }
}

impl Stream {
    /// A [`Stream`] for the stream `raw` of `context` that another library owns, used
    /// directly (work queued on it runs on that very stream), holding `keep_alive` (for example
    /// an `Arc` of the owner's stream object) until its last clone drops. It is never
    /// destroyed here.
    ///
    /// Refused when `raw` belongs to another context, or is being captured into a graph.
    ///
    /// # Safety
    /// `raw` is a live stream of `context` (or a default stream handle) that stays valid while
    /// `keep_alive` lives, that is while the returned stream or any clone of it lives. Clones
    /// are made by you and by the buffer tracking: a [`DeviceBuffer`](crate::DeviceBuffer) used
    /// on the stream keeps one until it is used on another stream or dropped. Handles that live
    /// as long as the process (the default streams, PyTorch's pooled streams) need nothing
    /// (`keep_alive = ()`); for a shorter-lived stream, pass what owns it, or use
    /// [`BorrowedStream`].
    ///
    /// # Errors
    /// [`Error::PerThreadStream`](crate::Error::PerThreadStream) for `CU_STREAM_PER_THREAD`,
    /// which names a different stream on each thread (D1).
    pub unsafe fn from_raw(context: &Context, raw: sys::CUstream, keep_alive: impl Any + Send + Sync) -> Result<Stream> {
        if let Some(stream) = default_stream(context, raw)? {
            return Ok(stream);
        }
        // SAFETY: `raw` is live (the caller's contract).
        let flags = unsafe { check_stream(context, raw) }?;
        let with_legacy = flags & sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 == 0;
        Ok(Stream::wrap_kept(raw, context, false, with_legacy, Some(Arc::new(keep_alive))))
    }

    /// [`Stream::from_raw`] for a stream whose owner may capture it into a CUDA graph of its
    /// own (PyTorch's `torch.cuda.graph`): while the owner captures it, ferrocuda's work on it
    /// is recorded into the owner's graph, untracked (as in [`Stream::begin_capture`]), instead
    /// of being refused with [`Error::ForeignCapture`](crate::Error::ForeignCapture). The
    /// stream may be captured already when this is called. Allocations on it during a capture
    /// are still refused ([`Error::AllocationInCapture`](crate::Error::AllocationInCapture)), a
    /// module must be loaded before the capture
    /// ([`Error::ModuleNotLoadedInCapture`](crate::Error::ModuleNotLoadedInCapture)), and
    /// ferrocuda still never begins a capture on it.
    ///
    /// # Safety
    /// As for [`Stream::from_raw`], and besides: the owner's graph may be launched at any time,
    /// untracked, so everything that work queued here during a capture uses must stay valid for
    /// every launch of that graph. The caller guarantees that such work uses only memory the
    /// owner keeps alive for its graphs (borrowed memory, such as the tensors of a
    /// `torch.cuda.graph`), never a ferrocuda [`DeviceBuffer`](crate::DeviceBuffer), module
    /// global or library work area, and that `context` (whose loaded modules the graph's
    /// kernels are) outlives the graph (keep it for the life of the process). A kernel of an
    /// explicitly loaded [`Module`](crate::Module) (`launch_in`) queued here during the
    /// owner's capture is in the owner's graph too, and nothing keeps that module loaded for
    /// it: keep the `Module` alive as long as the owner's graph (audit 2026-11-28d review,
    /// G16R-9; the embedded modules of `#[kernel]` crates live as long as the context).
    ///
    /// The door enforces the memory part for what goes through it (session 23, audit
    /// 2026-11-29d G23R-2): while the owner captures the stream, work that declares
    /// ferrocuda-owned memory (a `DeviceBuffer`, an explicit module's globals, a library's work
    /// area) is refused with [`Error::OwnedMemoryInOwnerCapture`](crate::Error::OwnedMemoryInOwnerCapture)
    /// instead of being recorded untracked. A lender that hands the stream to code it does not
    /// control for one call ends the loan after it ([`Stream::end_loan`]).
    ///
    /// # Errors
    /// As [`Stream::from_raw`] (`CU_STREAM_PER_THREAD` refused).
    pub unsafe fn from_raw_in_owner_captures(context: &Context, raw: sys::CUstream, keep_alive: impl Any + Send + Sync) -> Result<Stream> {
        if default_stream(context, raw)?.is_some() {
            // The default streams are never captured: nothing to join.
            // SAFETY: the caller's contract covers `from_raw`'s.
            return unsafe { Stream::from_raw(context, raw, keep_alive) };
        }
        // SAFETY: `raw` is live (the caller's contract).
        let flags = unsafe { stream_flags(context, raw, true) }?;
        // The driver does not tell a captured stream's flags (cuStreamGetFlags fails with
        // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture): the stream is then
        // taken as not ordered with the legacy default stream, which at worst adds event waits.
        let with_legacy = flags.is_some_and(|flags| flags & sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 == 0);
        Ok(Stream::wrap_borrowed(raw, context, false, with_legacy, Some(Arc::new(keep_alive)), true))
    }

    /// Makes later work on this stream wait for `event`, an event another library recorded
    /// (`cudaEventRecord` on its stream). The host does not wait.
    ///
    /// # Safety
    /// `event` is a live event of this stream's context (or of a peer context).
    pub unsafe fn wait_raw_event(&self, event: sys::CUevent) -> Result<()> {
        // Inside a door call's work it would wait for locks whose holders may wait for it
        // (G15R-6).
        crate::stream::refuse_inside_door_work("Stream::wait_raw_event")?;
        // As `Stream::wait_event`: a wait may join a capture (P2).
        let _gate = self.capture_gate_exclusive("Stream::wait_raw_event")?;
        // The event may be of another library's capture, which this wait would join: work on
        // this stream asks the driver about captures from now on (Q8).
        self.note_foreign_wait();
        // Through the door with no memory: a wait orders streams and touches none.
        // SAFETY: the stream is alive; `event` per the caller's contract; flags must be 0.
        self.enqueue("Stream::wait_raw_event", &[], |ours| Ok(unsafe { driver::stream::wait_event(ours.get(), event, 0) }?))
    }
}

/// The legacy default stream, which needs no lifetime (it lives as long as the context) and is
/// one stream for every thread; `None` for other handles. `CU_STREAM_PER_THREAD` is refused
/// (D1): it names a different stream on each host thread, while a [`Stream`] is one stream
/// wherever it is used (its handle is its identity in the buffer records, which take the fast
/// path, order and free on it from any thread).
fn default_stream(context: &Context, raw: sys::CUstream) -> Result<Option<Stream>> {
    Ok(is_legacy(raw as usize)?.then(|| Stream::default_of(context)))
}

/// True for the legacy default stream's handles (null, `CU_STREAM_LEGACY`), false for an
/// ordinary stream, [`Error::PerThreadStream`](crate::Error::PerThreadStream) for
/// `CU_STREAM_PER_THREAD`.
fn is_legacy(raw: usize) -> Result<bool> {
    match raw {
        0 | LEGACY => Ok(true),
        PER_THREAD => Err(crate::Error::PerThreadStream),
        _ => Ok(false),
    }
}

/// Checks that `raw` belongs to `context` and is not being captured; returns its flags.
///
/// # Safety
/// `raw` is a live stream.
unsafe fn check_stream(context: &Context, raw: sys::CUstream) -> Result<u32> {
    // SAFETY: the caller's contract.
    let flags = unsafe { stream_flags(context, raw, false) }?;
    flags.ok_or_else(|| problem(format!("the stream {raw:?} is being captured into a CUDA graph: borrow it before or after the capture")))
}

/// Checks that `raw` belongs to `context` and, unless `captured_ok`, is not being captured;
/// returns its flags, or `None` for a stream being captured (whose flags the driver does not
/// tell during the capture).
///
/// # Safety
/// `raw` is a live stream.
unsafe fn stream_flags(context: &Context, raw: sys::CUstream, captured_ok: bool) -> Result<Option<u32>> {
    let _bound = context.bind()?;
    let mut owner = std::ptr::null_mut();
    // SAFETY: writes one context handle; `raw` is live.
    unsafe { driver::stream::get_ctx(raw, &mut owner) }?;
    if owner != context.raw() {
        return Err(problem(format!(
            "the borrowed stream {raw:?} belongs to context {owner:?}, not to {:?}: borrow that context (BorrowedContext::new) and the stream with it",
            context.raw()
        )));
    }
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: writes one enum value; `raw` is live.
    unsafe { driver::stream::is_capturing(raw, &mut status) }?;
    if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        if captured_ok {
            return Ok(None);
        }
        return Err(problem(format!("the stream {raw:?} is being captured into a CUDA graph: borrow it before or after the capture")));
    }
    let mut flags = 0;
    // SAFETY: writes one uint; `raw` is live.
    unsafe { driver::stream::get_flags(raw, &mut flags) }?;
    Ok(Some(flags))
}

/// Makes later work on `waiter` wait for the work queued on `awaited` so far: one event,
/// recorded on `awaited`, waited on by `waiter`, then destroyed (the wait keeps what it needs).
///
/// # Safety
/// Both streams are live and of the current context.
unsafe fn join(waiter: sys::CUstream, awaited: sys::CUstream) -> Result<()> {
    let mut event = std::ptr::null_mut();
    // SAFETY: writes one handle, destroyed below.
    unsafe { driver::event::create(&mut event, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) }?;
    // SAFETY: the event and both streams are live (the caller's contract).
    let outcome = unsafe { driver::event::record(event, awaited) }.and_then(|()| unsafe { driver::stream::wait_event(waiter, event, 0) });
    // SAFETY: created above, destroyed once; a queued wait on it stays valid.
    let _ = unsafe { driver::event::destroy(event) };
    Ok(outcome?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// D1 (audit 2026-11-27d): `CU_STREAM_PER_THREAD` is a different stream on each thread, and
    /// was adopted as one `Stream` (a read on thread 2 skipped the wait for thread 1's write, and
    /// the free went after thread 2's stream only). Every path that makes a `Stream` from a
    /// handle (`Stream::from_raw`, `from_raw_in_owner_captures`, `borrowed::cudarc::stream`)
    /// goes through `default_stream`, which refuses it, saying what to pass instead.
    #[test]
    fn d1_the_per_thread_stream_handle_is_refused_saying_what_to_pass_instead() {
        assert!(matches!(is_legacy(PER_THREAD), Err(crate::Error::PerThreadStream)));
        assert!(is_legacy(0).unwrap() && is_legacy(LEGACY).unwrap(), "the legacy stream is one stream on every thread");
        assert!(!is_legacy(0x7f00_1234_5000).unwrap());
        let message = crate::Error::PerThreadStream.to_string();
        for what in ["different CUDA stream on each host thread", "new_stream()", "Stream::new", "BorrowedStream::new"] {
            assert!(message.contains(what), "{what} missing from: {message}");
        }
    }

    /// D1, the thread exit (issue 29, class 7): the end of a per-thread borrow waits on the
    /// host and queues nothing on the per-thread stream (a thread whose per-thread stream still
    /// had unfinished work never finished exiting on driver 580); when the host may not wait
    /// (work still running after a reported timeout) nothing is joined either, and the other
    /// failures go to the drop's own handling.
    #[test]
    fn d1_a_per_thread_borrow_ends_with_a_host_wait_and_never_a_join() {
        assert!(matches!(per_thread_end(Ok(())), PerThreadEnd::Done(Ok(()))));
        let running = per_thread_end(Err(crate::Error::WorkStillRunning { operation: "a host wait for a stream's work" }));
        assert!(matches!(running, PerThreadEnd::Unordered), "{running:?}");
        let raced = per_thread_end(Err(crate::Error::OrderingAfterCapture { operation: "a host wait for a stream's work" }));
        assert!(matches!(raced, PerThreadEnd::Done(Err(crate::Error::OrderingAfterCapture { .. }))), "{raced:?}");
    }
}
