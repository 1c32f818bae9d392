//! Page-locked ("pinned") host memory: the only host memory that asynchronous copies can
//! read or write while the host goes on, and the fastest to copy.
//!
//! A [`PinnedBuffer`] is tracked like a device buffer ([`BufferUsage`], N4): an asynchronous
//! copy on stream `S` that reads it first makes `S` wait for the copies on other streams that
//! write it, and one that writes it waits for every earlier copy, so copies on different
//! streams never race on it. Reading or writing it from the host waits for the copies that
//! conflict, and dropping it waits for all of them (or, inside a host callback or a capture,
//! is postponed, see `context::release`), so the host never sees a half-finished copy and the
//! GPU never copies from freed memory.
//!
//! Driver reference: [`cuMemHostAlloc`](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html),
//! [`cuMemcpyHtoDAsync`](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html).

use std::marker::PhantomData;

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::context::{Context, Handle};
use crate::driver;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::memory::usage::{Access, BufferAccess, BufferUsage};
use crate::stream::Stream;

/// `len` values of `T` in page-locked host memory, zero-filled at allocation.
pub struct PinnedBuffer<T: Pod> {
    ptr: *mut T,
    len: usize,
    /// The streams whose copies read or write this memory (it holds the context).
    usage: BufferUsage,
    _element: PhantomData<T>,
}

// SAFETY: the buffer owns its memory like a `Vec<T>` (T: Pod is Send + Sync); host access
// goes through `&self` / `&mut self` and first waits for queued copies.
unsafe impl<T: Pod> Send for PinnedBuffer<T> {}
// SAFETY: as above; `&self` only gives shared reads (the GPU may read concurrently too).
unsafe impl<T: Pod> Sync for PinnedBuffer<T> {}

impl<T: Pod> PinnedBuffer<T> {
    /// Allocates `len` zeroed elements of page-locked memory, usable for copies in `context`
    /// (and, being portable, in every other context).
    ///
    /// After [`Stream::synchronize_timeout`] reported work still running, `cuMemHostAlloc`
    /// waits for the device (F12-2): this waits at most 2 s for that work, then returns
    /// [`Error::RefusedAfterTimeout`].
    pub fn zeroed(context: &Context, len: usize) -> Result<Self> {
        context.refuse_after_timeout(|| "PinnedBuffer::zeroed (cuMemHostAlloc waits for the device)".into())?;
        let _bound = context.bind()?;
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or(Error::AllocationTooLarge { len, element_bytes: std::mem::size_of::<T>() })?;
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        if bytes > 0 {
            // SAFETY: writes one host pointer to `bytes` bytes; freed in Drop.
            // Page-locked memory comes from host RAM, so the device's out-of-memory figures do
            // not apply: the driver's own error is reported.
            unsafe { driver::memory::host_alloc(&mut ptr, bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }?;
            // SAFETY: `ptr` holds `bytes` writable bytes; all-zero is a valid `T: Pod`.
            unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
        } else {
            ptr = std::ptr::NonNull::<T>::dangling().as_ptr().cast();
        }
        Ok(PinnedBuffer { ptr: ptr.cast(), len, usage: BufferUsage::idle(context), _element: PhantomData })
    }

    /// Allocates page-locked memory holding a copy of `data`.
    pub fn from_slice(context: &Context, data: &[T]) -> Result<Self> {
        let mut buffer = Self::zeroed(context, data.len())?;
        buffer.as_mut_slice()?.copy_from_slice(data);
        Ok(buffer)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents, after waiting for the queued copies that write this buffer.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.usage.wait_on_host(Access::Read)?;
        // SAFETY: `ptr` holds `len` initialised elements; no queued copy writes them (copies
        // into the buffer need `&mut self`, and the ones queued earlier have finished).
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The contents for writing, after waiting for the queued copies that use this buffer.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait_for_copies()?;
        // SAFETY: as in `as_slice`, and `&mut self` excludes other host access; no copy is
        // queued any more that reads or writes the memory.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Queues a copy of this buffer into `destination` (same length) on `stream`; the host
    /// goes on at once. The copy waits for earlier copies into this buffer on other streams;
    /// host access to this buffer waits for the copy.
    pub fn copy_to_device_async(&self, destination: &mut DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        crate::memory::ensure_stream_in(destination.context(), stream, "copy_to_device_async")?;
        check_lengths(destination.len(), self.len)?;
        if self.is_empty() {
            return Ok(());
        }
        let (target, host, bytes) = (destination.device_ptr(), Handle(self.ptr), destination.size_bytes());
        let accesses = [BufferAccess::write(destination), self.read_access()];
        // SAFETY: both sides hold `bytes` bytes; the door orders the copy after the earlier
        // copies into this memory (on any stream) and records it, so that host access and the
        // drop wait for it; the device buffer likewise.
        stream.enqueue("copy_to_device_async", &accesses, |s| Ok(unsafe { driver::memory::memcpy_htod_async(target, host.0.cast(), bytes, s.get()) }?))
    }

    /// Queues a copy of `source` (same length) into this buffer on `stream`; the host goes on
    /// at once. The copy waits for every earlier copy of this buffer on other streams (N4);
    /// [`PinnedBuffer::as_slice`] waits for it.
    pub fn copy_from_device_async(&mut self, source: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        crate::memory::ensure_stream_in(source.context(), stream, "copy_from_device_async")?;
        check_lengths(self.len, source.len())?;
        if self.is_empty() {
            return Ok(());
        }
        let (host, origin, bytes) = (Handle(self.ptr), source.device_ptr(), source.size_bytes());
        let accesses = [BufferAccess::read(source), self.write_access()];
        // SAFETY: as in `copy_to_device_async`; `&mut self` means no host reference into the
        // memory is alive while the device writes it.
        stream.enqueue("copy_from_device_async", &accesses, |s| Ok(unsafe { driver::memory::memcpy_dtoh_async(host.0.cast(), origin, bytes, s.get()) }?))
    }

    /// This memory as read by stream work, for [`Stream::enqueue`] (any context's streams
    /// may use it: it is allocated portable).
    pub fn read_access(&self) -> BufferAccess<'_> {
        BufferAccess::new(Some(&self.usage), Access::Read, "pinned buffer").in_any_context()
    }

    /// This memory as written by stream work, for [`Stream::enqueue`]: borrowed exclusively,
    /// like a device buffer's write, so no other declaration can come between this one and
    /// the work it declares.
    pub fn write_access(&mut self) -> BufferAccess<'_> {
        BufferAccess::new(Some(&self.usage), Access::Write, "pinned buffer").in_any_context()
    }

    /// Waits until every queued copy that reads or writes this buffer has finished.
    pub fn wait_for_copies(&self) -> Result<()> {
        self.usage.wait_on_host(Access::Write)
    }

    /// The context the memory was allocated in.
    pub fn context(&self) -> &Context {
        self.usage.context()
    }
}

fn check_lengths(destination: usize, source_len: usize) -> Result<()> {
    if destination != source_len {
        return Err(Error::LengthMismatch { destination, source_len });
    }
    Ok(())
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if self.len == 0 || std::mem::size_of::<T>() == 0 {
            return;
        }
        let (ptr, bytes) = (Handle(self.ptr.cast::<std::ffi::c_void>()), self.len * std::mem::size_of::<T>());
        // Like a device buffer (P5): it waits for the end of the context's captures only when
        // one of the streams that copied it is captured; a capture elsewhere, even one that
        // never ends, does not hold it back. The host waits for those streams' work outside
        // any capture (`Stream::host_wait`), then frees it; nothing is queued on a stream.
        self.context().release_after_streams(crate::context::Released::PinnedBuffer(bytes), self.usage.take_streams(), move |context, streams| {
            release_pinned(context, ptr, bytes, streams);
        });
    }
}

/// The release of a pinned buffer's `bytes` at `ptr` (see its `Drop`), after the host waited
/// for the streams that copied it.
fn release_pinned(context: &Context, ptr: Handle<*mut std::ffi::c_void>, bytes: usize, streams: crate::stream::UsedStreams) {
    // A wait for the whole context (a stream that copied it is gone) refused during a capture
    // of ferrocuda's: postponed until the captures end; any other failure leaks, said.
    let what = crate::context::Released::PinnedBuffer(bytes);
    let raw = ptr.into_inner();
    let again = {
        let ptr = Handle(raw);
        move |context: &Context, streams| release_pinned(context, ptr, bytes, streams)
    };
    let Some(streams) = streams.resolve_or_postpone(context, what, again) else { return };
    // A copy that cannot be waited for (faulted context) may still be queued: then leak
    // the memory rather than free what the GPU might still touch.
    let _bound = match streams.iter().try_for_each(Stream::host_wait).and_then(|()| context.bind()) {
        Ok(bound) => bound,
        Err(error) => {
            crate::memory::leaks::leaked_after_failed_wait("PinnedBuffer", &error);
            return;
        }
    };
    // cuMemFreeHost waits for the whole device: after a reported timeout, even a buffer
    // no stream used would wait for ever (F12-2).
    if !crate::memory::leaks::may_release("PinnedBuffer", context.timed_out(), "cuMemFreeHost (it waits for the whole device)") {
        return;
    }
    // SAFETY: allocated by cuMemHostAlloc, freed once, no copy uses it any more.
    let _ = unsafe { driver::memory::free_host(raw) };
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}
