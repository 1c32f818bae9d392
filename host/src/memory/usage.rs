//! Which work still uses a buffer: its context, the stream that last wrote it and the streams
//! that read it since (U3, U4, C2).
//!
//! The borrow checker sees a launch's borrows end when the kernel is queued, not when it
//! finishes; this module covers the rest, like cudarc's `CudaSlice` in multi-stream mode but
//! without an event per launch:
//! - a launch (or copy, or [`Stream::will_use`]) on stream `S` first makes `S` wait for the
//!   buffer's earlier work on other streams: the last writer for a read, the last writer and
//!   every reader since for a write (`cuStreamWaitEvent` on the other stream's tail event,
//!   recorded at that moment: it covers all the work queued there so far, the buffer's
//!   included); then `S` is recorded as reader or writer. Nothing is recorded when the work
//!   stays on one stream, so the common case costs a lock and a pointer compare per buffer;
//! - synchronous host copies are work on the legacy default stream like any other: it waits
//!   for the other streams first (a non-blocking stream's kernel included);
//! - dropping the buffer frees it stream-ordered (`cuMemFreeAsync`) on one of its streams,
//!   after making that stream wait for the others, or, while a capture runs in the context,
//!   later (E1b);
//! - a buffer of another context is refused, unless peer access makes it usable, and then
//!   the ordering above holds across the contexts (events work across contexts).
//!
//! Work queued inside a stream capture is not tracked: it runs when the graph is launched,
//! which [`GraphExec::launch`](crate::GraphExec::launch)'s contract covers.

use std::fmt;
use std::sync::Mutex;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::stream::Stream;

/// The use state of one allocation (shared by every view of it).
pub struct BufferUsage {
    context: Context,
    state: Mutex<UseState>,
}

#[derive(Default)]
struct UseState {
    /// The stream of the last work that wrote the buffer (a host copy's: the legacy stream).
    writer: Option<Stream>,
    /// Streams that read it since that write, each already ordered after it.
    readers: Vec<Stream>,
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
#[derive(Clone, Copy)]
pub struct BufferAccess<'a> {
    usage: Option<&'a BufferUsage>,
    access: Access,
    name: &'static str,
}

impl<'a> BufferAccess<'a> {
    /// The access of a kernel argument (see `SliceArg::read` / `SliceArg::write`).
    #[inline]
    pub(crate) fn new(usage: Option<&'a BufferUsage>, access: Access, name: &'static str) -> Self {
        BufferAccess { usage, access, name }
    }

    /// How the work uses the buffer.
    pub fn access(&self) -> Access {
        self.access
    }
}

impl fmt::Debug for BufferAccess<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferAccess").field("name", &self.name).field("access", &self.access).finish()
    }
}

impl fmt::Debug for BufferUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("BufferUsage").field("writer", &state.writer).field("readers", &state.readers.len()).finish()
    }
}

impl BufferUsage {
    /// A fresh allocation in `context`, last written by `writer` (the stream its allocation
    /// or initialisation was queued on).
    pub(crate) fn new(context: &Context, writer: Stream) -> Self {
        BufferUsage { context: context.clone(), state: Mutex::new(UseState { writer: Some(writer), readers: Vec::new() }) }
    }

    /// The context that owns the allocation.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, UseState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Orders `stream` after the buffer's earlier work and records it as a user. No driver
    /// call and no allocation when the buffer's work stays on `stream`.
    #[inline]
    fn before_stream_work(&self, stream: &Stream, access: Access) -> Result<()> {
        let mut state = self.lock();
        match access {
            Access::Read => {
                if state.readers.iter().any(|r| r.same_as(stream)) {
                    return Ok(()); // already ordered after the current writer
                }
                if let Some(writer) = &state.writer {
                    stream.wait_for(writer)?;
                }
                state.readers.push(stream.clone());
            }
            Access::Write => {
                let writer_is_stream = state.writer.as_ref().is_some_and(|w| w.same_as(stream));
                if !writer_is_stream && let Some(writer) = &state.writer {
                    stream.wait_for(writer)?;
                }
                for reader in &state.readers {
                    stream.wait_for(reader)?;
                }
                state.readers.clear();
                if !writer_is_stream {
                    state.writer = Some(stream.clone());
                }
            }
        }
        Ok(())
    }

    /// Takes the streams that may still use the buffer (for its release).
    pub(crate) fn take_streams(&self) -> Vec<Stream> {
        let mut state = self.lock();
        let mut streams: Vec<Stream> = state.writer.take().into_iter().collect();
        for reader in state.readers.drain(..) {
            if !streams.iter().any(|s| s.same_as(&reader)) {
                streams.push(reader);
            }
        }
        streams
    }
}

/// Buffer ordering on a stream lives here, with the tracking.
impl Stream {
    /// Declares work about to be queued on this stream that reads or writes `buffers`
    /// (a cuBLAS, cuFFT or NCCL call, a raw driver call): makes this stream wait for their
    /// earlier work on other streams, refuses buffers of another context (unless peer access
    /// was enabled), and records this stream as their user, so that later work on other
    /// streams, host copies and the buffers' drops wait for what is queued here.
    ///
    /// Call it once, right before queuing the work:
    /// `stream.will_use(&[BufferAccess::read(&x), BufferAccess::write(&mut y)])?`.
    /// The launchers of `#[kernel]` do this for their slice arguments.
    pub fn will_use(&self, buffers: &[BufferAccess<'_>]) -> Result<()> {
        before_work(self, "Stream::will_use", buffers)
    }
}

/// What every piece of stream work on buffers does first: refuses buffers of another context
/// (unless peer access was enabled), then orders `stream` after their earlier work and records
/// it as their user. Skipped while `stream` is being captured.
#[inline]
pub(crate) fn before_work(stream: &Stream, operation: &str, buffers: &[BufferAccess<'_>]) -> Result<()> {
    if buffers.is_empty() || stream.is_capturing_fast() {
        return Ok(());
    }
    let context = stream.context();
    for buffer in buffers {
        let Some(usage) = buffer.usage else { continue };
        if usage.context.raw() != context.raw() && !context.can_use_memory_of(usage.context.raw()) {
            return Err(Error::BufferInOtherContext { operation: operation.to_string(), argument: buffer.name });
        }
        usage.before_stream_work(stream, buffer.access)?;
    }
    Ok(())
}

/// [`before_work`] for a buffer that may be in another context without peer access: a copy
/// engine reaches it either way (`cuMemcpyPeerAsync`).
pub(crate) fn before_work_any_context(stream: &Stream, buffers: &[BufferAccess<'_>]) -> Result<()> {
    if stream.is_capturing_fast() {
        return Ok(());
    }
    for buffer in buffers {
        if let Some(usage) = buffer.usage {
            usage.before_stream_work(stream, buffer.access)?;
        }
    }
    Ok(())
}

/// Releases an allocation once the streams that used it are done with it: stream-ordered
/// (`cuMemFreeAsync` on one of them after it waits for the others) for pool memory, else
/// after the host waited for them (`cuMemFree`). Errors (a faulted context) leak the memory:
/// freeing what the GPU may still touch would be worse.
pub(crate) fn release(context: &Context, ptr: u64, streams: Vec<Stream>, pooled: bool) {
    if context.bind_to_thread().is_err() {
        return;
    }
    if pooled {
        // Free on a stream of the buffer's own context (the legacy one if none used it).
        let own = streams.iter().find(|s| s.context().raw() == context.raw()).cloned().unwrap_or_else(|| Stream::default_of(context));
        for other in &streams {
            if own.wait_for(other).is_err() && other.host_wait().is_err() {
                return;
            }
        }
        if context.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: allocated from the pool by us, freed once; the free is ordered after every
        // stream that used the buffer (waited for above).
        let _ = unsafe { crate::driver::memory::free_async(ptr, own.raw()) };
    } else {
        for stream in &streams {
            if stream.host_wait().is_err() {
                return;
            }
        }
        if context.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: allocated by us with cuMemAlloc, freed once, after the work of every stream
        // that used it (waited for above).
        let _ = unsafe { crate::driver::memory::free(ptr) };
    }
}
