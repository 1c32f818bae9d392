//! Typed device memory: [`DeviceBuffer`] owns an allocation; it dereferences to a
//! [`DeviceSlice`], which is what kernels take.
//!
//! Freeing is never undefined behaviour, even with kernels still queued on the buffer, on any
//! stream of any context: every buffer knows the streams that still use it ([`usage`]):
//! - work on another stream than the buffer's last one waits for that stream's work first
//!   (`cuStreamWaitEvent`), launches and async copies alike, so two streams never race on a
//!   buffer the borrow checker handed out exclusively (U4);
//! - the synchronous methods ([`DeviceBuffer::copy_from_host`], [`DeviceBuffer::to_vec`], ...)
//!   run on the legacy default stream after it waited for the buffer's streams, so they see
//!   the results of kernels on [`Stream::non_blocking`] streams too;
//! - dropping a buffer frees it stream-ordered (`cuMemFreeAsync` on a stream that used it,
//!   after it waited for the others) without blocking the host, where the device has memory
//!   pools (every GPU since Pascal with a CUDA 11.2+ driver). Elsewhere the drop waits for
//!   those streams, then frees (`cuMemFree`). Neither waits for the whole context;
//! - a drop while a stream of the context is being captured is postponed until the capture
//!   ends (freeing during a capture would invalidate it, E1b).
//!
//! Driver reference: [memory management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html),
//! [stream-ordered allocator](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html).

pub mod leaks;
pub mod pinned;
pub mod usage;
pub mod view;

use std::marker::PhantomData;
use std::ops::Deref;

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::context::Context;
use crate::driver;
use crate::driver::DriverError;
use crate::error::{Error, Result};
use crate::stream::{Stream, UsedStreams};
use usage::{Access, BufferAccess, BufferUsage};

/// A run of `len` values of `T` in device memory. Kernels take `&DeviceSlice<T>` for `&[T]`
/// parameters and `&mut DeviceSlice<T>` for `DisjointSlice<T>` / `AtomicSlice<T>`, so an
/// output cannot be aliased.
pub struct DeviceSlice<T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    usage: BufferUsage,
    _element: PhantomData<T>,
}

impl<T> DeviceSlice<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address (0 for an empty slice).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The context that owns the allocation.
    pub fn context(&self) -> &Context {
        self.usage.context()
    }

    /// Which streams still use the memory ([`BufferUsage`]).
    ///
    /// Borrowing the buffer itself means that the halves of an earlier `split_at_mut` are
    /// gone: its record returns to the fast path then (`BufferUsage::owner_borrowed`).
    #[inline]
    pub fn usage(&self) -> &BufferUsage {
        self.usage.owner_borrowed();
        &self.usage
    }
}

impl<T> std::fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSlice").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

/// An owned device allocation of `len` values of `T`, freed on drop (see the module docs for
/// how a drop waits for queued work).
pub struct DeviceBuffer<T: Pod> {
    slice: DeviceSlice<T>,
    /// Allocated from the device's memory pool (freed with `cuMemFreeAsync`).
    pooled: bool,
}

/// Refuses `stream` unless it belongs to `context` (see [`Error::StreamInOtherContext`]).
pub(crate) fn ensure_stream_in(context: &Context, stream: &Stream, operation: &'static str) -> Result<()> {
    if stream.context().raw() == context.raw() { Ok(()) } else { Err(Error::StreamInOtherContext { operation }) }
}

/// The checks every copy starts with: equal lengths; `Ok(false)` when there is nothing to copy.
fn check_copy(destination: usize, source_len: usize) -> Result<bool> {
    if destination != source_len {
        return Err(Error::LengthMismatch { destination, source_len });
    }
    Ok(destination > 0)
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` elements, zero-filled.
    pub fn zeroed(context: &Context, len: usize) -> Result<Self> {
        let mut buffer = Self::allocate(&Stream::default_of(context), len, "DeviceBuffer::zeroed")?;
        buffer.memset_bytes(0, None)?;
        Ok(buffer)
    }

    /// Allocates and copies `data` to the device.
    pub fn from_slice(context: &Context, data: &[T]) -> Result<Self> {
        let mut buffer = Self::allocate(&Stream::default_of(context), data.len(), "DeviceBuffer::from_slice")?;
        buffer.copy_from_host(data)?;
        Ok(buffer)
    }

    /// Allocates `len` elements on `stream` (`cuMemAllocAsync` where the device has memory
    /// pools) and zeroes them there: nothing blocks the host, and kernels queued after it on
    /// `stream` see zeros. Work on other streams waits for it like for any buffer.
    ///
    /// # Errors
    /// [`Error::AllocationInCapture`] when `stream` is being captured into a graph (P2): the
    /// allocation would be a graph node whose memory exists only while the graph runs.
    /// Allocate before the capture.
    pub fn zeroed_async(stream: &Stream, len: usize) -> Result<Self> {
        // The gate below may be held by a thread waiting for a door call's work this thread
        // may be running (G15R-6).
        crate::stream::refuse_inside_door_work("DeviceBuffer::zeroed_async")?;
        // No capture may begin on `stream` (another thread's `begin_capture`) between the
        // check in `allocate` and the zeroing: both would be recorded into the graph.
        let gate = stream.capture_gate();
        let mut buffer = Self::allocate(stream, len, "DeviceBuffer::zeroed_async")?;
        let zeroed = buffer.zero_async(stream);
        // Before a failed buffer's drop, whose release takes the gate again.
        drop(gate);
        zeroed?;
        Ok(buffer)
    }

    /// `len * size_of::<T>()`, or [`Error::AllocationTooLarge`] (E7: this used to panic).
    fn bytes_for(len: usize) -> Result<usize> {
        len.checked_mul(std::mem::size_of::<T>()).ok_or(Error::AllocationTooLarge { len, element_bytes: std::mem::size_of::<T>() })
    }

    /// Allocates `len` elements ordered on `stream` (from the pool), or with `cuMemAlloc`
    /// where the device has no pools. The one allocation path of the crate: it refuses a
    /// stream being captured (P2; see [`Stream::refuse_capture`]), whoever began the capture.
    fn allocate(stream: &Stream, len: usize, operation: &'static str) -> Result<Self> {
        let context = stream.context();
        let bytes = Self::bytes_for(len)?;
        let _bound = context.bind()?;
        if bytes > 0 {
            stream.refuse_capture(operation)?;
        }
        let pooled = context.uses_memory_pools();
        let mut ptr = 0;
        if bytes > 0 {
            // New memory: nothing to declare.
            let allocated = stream.enqueue("cuMemAllocAsync", &[], |stream| {
                // SAFETY: writes one device pointer; freed once, in Drop (`usage::release`).
                Ok::<_, Error>(unsafe {
                    if pooled { driver::memory::alloc_async(&mut ptr, bytes, stream.get()) } else { driver::memory::alloc(&mut ptr, bytes) }
                })
            })?;
            Self::check_allocation(allocated, context, bytes)?;
        }
        let usage = BufferUsage::new(context, stream.record());
        Ok(DeviceBuffer { slice: DeviceSlice { ptr, len, usage, _element: PhantomData }, pooled })
    }

    /// Turns an allocation's result into an error, with the sizes spelled out for
    /// out-of-memory.
    fn check_allocation(allocated: Result<(), DriverError>, context: &Context, requested: usize) -> Result<()> {
        match allocated {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = context.memory_info().unwrap_or((0, 0));
                Err(Error::OutOfMemory { device: context.device().ordinal(), requested, free, total })
            }
            Err(e) => Err(crate::panic_report::with_kernel_panic(e)),
            Ok(()) => Ok(()),
        }
    }

    /// The legacy default stream of the buffer's context, where the synchronous methods run.
    fn legacy(&self) -> Stream {
        Stream::default_of(self.context())
    }

    /// This buffer's access for work of its own.
    fn access(&self, access: Access) -> BufferAccess<'_> {
        BufferAccess::new(Some(self.slice.usage()), access, "self")
    }

    /// Sets every element to `value` (a synchronous memset on the legacy default stream).
    /// Elements of 1 or 2 bytes or a multiple of 4 (`f64`, `u64`, a 16-byte struct: one
    /// strided 32-bit memset per word of the element, or one memset when its words are
    /// equal); other sizes get [`Error::FillElementSize`].
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.memset(value, None)
    }

    /// Sets every element to `value`, queued on `stream` (ordered with the kernels on it).
    /// Element sizes as for [`fill`](Self::fill).
    pub fn fill_async(&mut self, value: T, stream: &Stream) -> Result<()> {
        ensure_stream_in(self.context(), stream, "fill_async")?;
        self.memset(value, Some(stream))
    }

    fn memset(&mut self, value: T, stream: Option<&Stream>) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let bytes = bytemuck::bytes_of(&value);
        let pattern = match size {
            // Zero-sized elements: nothing to write.
            0 => return Ok(()),
            1 => Pattern::D8(bytes[0]),
            2 => Pattern::D16(u16::from_ne_bytes([bytes[0], bytes[1]])),
            _ if size.is_multiple_of(4) => {
                let words: Vec<u32> = bytes.chunks_exact(4).map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]])).collect();
                if words.iter().all(|&w| w == words[0]) { Pattern::D32(words[0]) } else { Pattern::Words(words) }
            }
            _ => return Err(Error::FillElementSize { size }),
        };
        self.memset_pattern(pattern, stream)
    }

    /// Zero or another byte everywhere.
    fn memset_bytes(&mut self, byte: u8, stream: Option<&Stream>) -> Result<()> {
        self.memset_pattern(Pattern::Bytes(byte), stream)
    }

    fn memset_pattern(&mut self, pattern: Pattern, stream: Option<&Stream>) -> Result<()> {
        if self.slice.size_bytes() == 0 {
            return Ok(());
        }
        let legacy;
        let stream = match stream {
            Some(s) => s,
            None => {
                legacy = self.legacy();
                &legacy
            }
        };
        let (ptr, n, bytes) = (self.slice.ptr, self.slice.len, self.slice.size_bytes());
        stream.enqueue("memset", &[self.access(Access::Write)], |s| {
            let s = s.get();
            // SAFETY: the allocation holds `n` elements (`bytes` bytes); the memset is ordered
            // after the buffer's earlier work and before its release (see the module docs).
            unsafe {
                match pattern {
                    Pattern::Bytes(b) => driver::memory::memset_d8_async(ptr, b, bytes, s),
                    Pattern::D8(v) => driver::memory::memset_d8_async(ptr, v, n, s),
                    Pattern::D16(v) => driver::memory::memset_d16_async(ptr, v, n, s),
                    Pattern::D32(v) => driver::memory::memset_d32_async(ptr, v, bytes / 4, s),
                    // Word `k` of every element: a 2-D memset one word wide, `n` rows of the
                    // element's size apart.
                    Pattern::Words(ref words) => {
                        words.iter().enumerate().try_for_each(|(k, &w)| driver::memory::memset_d2d32_async(ptr + 4 * k as u64, 4 * words.len(), w, 1, n, s))
                    }
                }
            }
            .map_err(Error::from)
        })
    }

    /// Copies `source` (same length, same context) into this buffer, synchronously.
    pub fn copy_from_device(&mut self, source: &DeviceSlice<T>) -> Result<()> {
        if !check_copy(self.len(), source.len())? {
            return Ok(());
        }
        let legacy = self.legacy();
        self.copy_device_to_device(source, &legacy, "copy_from_device")?;
        legacy.synchronize()
    }

    /// Queues a copy of `source` (same length, same context) into this buffer on `stream`.
    pub fn copy_from_device_async(&mut self, source: &DeviceSlice<T>, stream: &Stream) -> Result<()> {
        ensure_stream_in(self.context(), stream, "copy_from_device_async")?;
        if !check_copy(self.len(), source.len())? {
            return Ok(());
        }
        self.copy_device_to_device(source, stream, "copy_from_device_async")
    }

    fn copy_device_to_device(&mut self, source: &DeviceSlice<T>, stream: &Stream, operation: &str) -> Result<()> {
        let (destination, origin, bytes) = (self.slice.ptr, source.ptr, self.slice.size_bytes());
        let accesses = [self.access(Access::Write), BufferAccess::new(Some(source.usage()), Access::Read, "source")];
        // SAFETY: both ranges hold `bytes` bytes (equal lengths); `&mut self` and `&source`
        // cannot overlap; the door orders the copy after both buffers' earlier work and before
        // their release.
        stream.enqueue(operation, &accesses, |s| Ok(unsafe { driver::memory::memcpy_dtod_async(destination, origin, bytes, s.get()) }?))
    }

    /// Copies `source`, a buffer in another context (usually on another GPU), into this one
    /// (`cuMemcpyPeer`). Works without peer access (through the host then); with
    /// [`Context::enable_peer_access`] it goes directly between the GPUs.
    pub fn copy_from_peer(&mut self, source: &DeviceBuffer<T>) -> Result<()> {
        if !check_copy(self.len(), source.len())? {
            return Ok(());
        }
        let legacy = self.legacy();
        self.copy_peer(source, &legacy)?;
        // cuMemcpyPeer may return before the copy ends; a synchronous copy must not.
        legacy.synchronize()
    }

    /// Queues a copy of `source`, a buffer in another context, into this one on `stream`
    /// (a stream of this buffer's context; `cuMemcpyPeerAsync`). The copy waits for `source`'s
    /// earlier work, and `source`'s drop waits for the copy, across the two contexts.
    pub fn copy_from_peer_async(&mut self, source: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        ensure_stream_in(self.context(), stream, "copy_from_peer_async")?;
        if !check_copy(self.len(), source.len())? {
            return Ok(());
        }
        self.copy_peer(source, stream)
    }

    /// Queues a peer copy on `stream`, ordered after both buffers' earlier work (the source
    /// may be in another context: a copy engine reaches it without peer access).
    fn copy_peer(&mut self, source: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        let (destination_context, origin_context) = (self.context().raw(), source.context().raw());
        let (destination, origin, bytes) = (self.slice.ptr, source.slice.ptr, self.slice.size_bytes());
        let accesses = [self.access(Access::Write), BufferAccess::new(Some(source.slice.usage()), Access::Read, "source").in_any_context()];
        // SAFETY: both allocations hold `bytes` bytes in their own (alive) contexts; the door
        // orders the copy after both buffers' earlier work and before their release.
        stream.enqueue("copy_from_peer", &accesses, |s| {
            Ok(unsafe { driver::memory::memcpy_peer_async(destination, destination_context, origin, origin_context, bytes, s.get()) }?)
        })
    }

    /// Sets every element to zero, queued on `stream` (ordered with the kernels on it).
    pub fn zero_async(&mut self, stream: &Stream) -> Result<()> {
        ensure_stream_in(self.context(), stream, "zero_async")?;
        self.memset_bytes(0, Some(stream))
    }

    /// Copies `data` (same length) from the host, on the legacy default stream, after the
    /// buffer's work on every stream: later work on any stream that uses the buffer sees the
    /// data (it waits for the copy like for any earlier writer).
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        if !check_copy(self.len(), data.len())? {
            return Ok(());
        }
        let (destination, bytes) = (self.slice.ptr, self.slice.size_bytes());
        // SAFETY: both sides hold `bytes` bytes; the driver has read `data` when a copy from
        // pageable memory returns (it may still be moving to the device, ordered on the legacy
        // stream, which later users of the buffer wait for).
        self.legacy().enqueue("copy_from_host", &[self.access(Access::Write)], |_legacy| {
            unsafe { driver::memory::memcpy_htod(destination, data.as_ptr().cast(), bytes) }.map_err(crate::panic_report::with_kernel_panic)
        })
    }

    /// Copies the contents into `out` (same length), after the buffer's queued writes on every
    /// stream have finished.
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        if !check_copy(out.len(), self.len())? {
            return Ok(());
        }
        let (origin, bytes) = (self.slice.ptr, self.slice.size_bytes());
        // SAFETY: both sides hold `bytes` bytes; `T: Pod` accepts any bytes; the copy is
        // ordered after the buffer's writers and complete when it returns.
        self.legacy().enqueue("copy_to_host", &[self.access(Access::Read)], |_legacy| {
            unsafe { driver::memory::memcpy_dtoh(out.as_mut_ptr().cast(), origin, bytes) }.map_err(crate::panic_report::with_kernel_panic)
        })
    }

    /// Copies the contents into a new `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len()];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// The context that owns the allocation.
    pub fn context(&self) -> &Context {
        self.slice.context()
    }
}

/// A memset's value: bytes, or 1-, 2- or 4-byte elements.
#[derive(Clone)]
enum Pattern {
    Bytes(u8),
    D8(u8),
    D16(u16),
    /// The same 32-bit word everywhere (4-byte elements, or wider ones of equal words).
    D32(u32),
    /// Elements of these words (8, 12, 16, .. bytes).
    Words(Vec<u32>),
}

impl<T: Pod> Deref for DeviceBuffer<T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        &self.slice
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.slice.ptr == 0 {
            return;
        }
        // Errors (a faulted context) cannot be reported from Drop; the next call reports them.
        let (ptr, pooled, bytes) = (self.slice.ptr, self.pooled, self.size_bytes());
        let streams = self.slice.usage.take_streams();
        self.context().release_after_streams(crate::context::Released::DeviceBuffer(bytes), streams, move |context: &Context, streams: UsedStreams| {
            usage::release(context, ptr, bytes, streams, pooled)
        });
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer").field("ptr", &self.slice.ptr).field("len", &self.slice.len).finish()
    }
}
