//! Typed device memory: [`DeviceBuffer`] owns an allocation; it dereferences to a
//! [`DeviceSlice`], which is what kernels take.
//!
//! Freeing is never undefined behaviour, even with kernels still queued on the buffer:
//! - a buffer from [`DeviceBuffer::zeroed`] / [`DeviceBuffer::from_slice`] waits, when
//!   dropped, for all work queued in its context (`cuCtxSynchronize`), then frees
//!   (`cuMemFree`). Simple and always safe; the price is a wait on drop, so keep buffers
//!   alive across hot loops rather than reallocating them.
//! - a stream-ordered buffer ([`DeviceBuffer::zeroed_async`]) is freed with
//!   `cuMemFreeAsync` on its stream: the memory returns to the pool only after the work
//!   queued there before the drop, without blocking the host. Work that uses it on *other*
//!   streams must be ordered before the drop ([`Stream::wait_event`] or a synchronisation).
//!
//! Driver reference: [memory management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html),
//! [stream-ordered allocator](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html).

use std::marker::PhantomData;
use std::ops::Deref;

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::context::Context;
use crate::driver;
use crate::error::{DriverError, Error, Result};
use crate::stream::Stream;

/// A run of `len` values of `T` in device memory. Kernels take `&DeviceSlice<T>` for `&[T]`
/// parameters and `&mut DeviceSlice<T>` for `&mut [T]`, so an output cannot be aliased.
#[derive(Debug)]
pub struct DeviceSlice<T> {
    ptr: sys::CUdeviceptr,
    len: usize,
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
}

/// An owned device allocation of `len` values of `T`, freed on drop (see the module docs for
/// how a drop waits for queued work).
pub struct DeviceBuffer<T: Pod> {
    slice: DeviceSlice<T>,
    context: Context,
    release: Release,
}

/// How a buffer gives its memory back.
enum Release {
    /// `cuCtxSynchronize` + `cuMemFree`.
    AfterContextIdle,
    /// `cuMemFreeAsync` on the stream it was allocated on.
    OnStream(Stream),
}

/// Refuses `stream` unless it belongs to `context` (see [`Error::StreamInOtherContext`]).
pub(crate) fn ensure_stream_in(context: &Context, stream: &Stream, operation: &'static str) -> Result<()> {
    if stream.context().raw() == context.raw() { Ok(()) } else { Err(Error::StreamInOtherContext { operation }) }
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` elements, zero-filled.
    pub fn zeroed(context: &Context, len: usize) -> Result<Self> {
        let buffer = Self::allocate(context, len)?;
        if buffer.slice.size_bytes() > 0 {
            // SAFETY: the allocation holds exactly size_bytes bytes.
            unsafe { driver::memory::memset_d8(buffer.slice.ptr, 0, buffer.slice.size_bytes()) }?;
        }
        Ok(buffer)
    }

    /// Allocates and copies `data` to the device.
    pub fn from_slice(context: &Context, data: &[T]) -> Result<Self> {
        let mut buffer = Self::allocate(context, data.len())?;
        buffer.copy_from_host(data)?;
        Ok(buffer)
    }

    /// Allocates `len` elements with `cuMemAllocAsync` on `stream` and zeroes them there:
    /// nothing blocks the host, and kernels queued after it on `stream` see zeros. Dropping the
    /// buffer frees it on the same stream (`cuMemFreeAsync`), after the work queued there.
    /// Use it on other streams only after ordering them with it (see the module docs). The
    /// synchronous methods ([`DeviceBuffer::copy_from_host`], [`DeviceBuffer::to_vec`]) run on
    /// the legacy default stream, which waits for `stream` only when it was made with
    /// [`StreamOrdering::WithLegacyDefault`](crate::StreamOrdering); otherwise synchronise
    /// `stream` first.
    ///
    /// # Safety
    /// Work that uses the buffer on any stream other than `stream` (launches, copies) must be
    /// ordered before the buffer is dropped (synchronise that stream, or make `stream` wait for
    /// an event recorded after it): the free is queued on `stream` only, and the memory may be
    /// handed out again by the next stream-ordered allocation while that work still runs.
    pub unsafe fn zeroed_async(stream: &Stream, len: usize) -> Result<Self> {
        let context = stream.context();
        context.bind_to_thread()?;
        let bytes = Self::bytes_for(len);
        let mut ptr = 0;
        if bytes > 0 {
            // SAFETY: writes one device pointer; freed on the same stream in Drop.
            let allocated = unsafe { driver::memory::alloc_async(&mut ptr, bytes, stream.raw()) };
            Self::check_allocation(allocated, context, bytes)?;
        }
        let mut buffer = DeviceBuffer {
            slice: DeviceSlice { ptr, len, _element: PhantomData },
            context: context.clone(),
            release: Release::OnStream(stream.clone()),
        };
        buffer.zero_async(stream)?;
        Ok(buffer)
    }

    fn bytes_for(len: usize) -> usize {
        len.checked_mul(std::mem::size_of::<T>()).expect("allocation size overflows usize")
    }

    fn allocate(context: &Context, len: usize) -> Result<Self> {
        context.bind_to_thread()?;
        let bytes = Self::bytes_for(len);
        let mut ptr = 0;
        if bytes > 0 {
            // SAFETY: writes one device pointer; freed in Drop.
            let allocated = unsafe { driver::memory::alloc(&mut ptr, bytes) };
            Self::check_allocation(allocated, context, bytes)?;
        }
        Ok(DeviceBuffer { slice: DeviceSlice { ptr, len, _element: PhantomData }, context: context.clone(), release: Release::AfterContextIdle })
    }

    /// Turns an allocation's result into an error, with the sizes spelled out for
    /// out-of-memory.
    fn check_allocation(allocated: Result<(), DriverError>, context: &Context, requested: usize) -> Result<()> {
        match allocated {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = context.memory_info().unwrap_or((0, 0));
                Err(Error::OutOfMemory { device: context.device().ordinal(), requested, free, total })
            }
            other => Ok(other?),
        }
    }

    /// Sets every element to `value` (a synchronous memset on the legacy default stream).
    /// Elements of 1, 2 or 4 bytes only; others get [`Error::FillElementSize`].
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.memset(value, None)
    }

    /// Sets every element to `value`, queued on `stream` (ordered with the kernels on it).
    /// Elements of 1, 2 or 4 bytes only; others get [`Error::FillElementSize`].
    pub fn fill_async(&mut self, value: T, stream: &Stream) -> Result<()> {
        ensure_stream_in(&self.context, stream, "fill_async")?;
        self.memset(value, Some(stream))
    }

    fn memset(&mut self, value: T, stream: Option<&Stream>) -> Result<()> {
        let size = std::mem::size_of::<T>();
        if !matches!(size, 1 | 2 | 4) {
            return Err(Error::FillElementSize { size });
        }
        if self.is_empty() {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        let bytes = bytemuck::bytes_of(&value);
        let (ptr, n) = (self.slice.ptr, self.slice.len);
        // SAFETY: the allocation holds `n` elements of `size` bytes; an async memset is
        // finished before the memory is freed (Drop waits or frees on a stream after it).
        unsafe {
            match (size, stream) {
                (1, None) => driver::memory::memset_d8(ptr, bytes[0], n),
                (1, Some(s)) => driver::memory::memset_d8_async(ptr, bytes[0], n, s.raw()),
                (2, None) => driver::memory::memset_d16(ptr, u16::from_ne_bytes([bytes[0], bytes[1]]), n),
                (2, Some(s)) => driver::memory::memset_d16_async(ptr, u16::from_ne_bytes([bytes[0], bytes[1]]), n, s.raw()),
                (_, None) => driver::memory::memset_d32(ptr, u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]), n),
                (_, Some(s)) => driver::memory::memset_d32_async(ptr, u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]), n, s.raw()),
            }
        }?;
        Ok(())
    }

    /// Copies `source` (same length, same context) into this buffer, synchronously.
    pub fn copy_from_device(&mut self, source: &DeviceSlice<T>) -> Result<()> {
        self.copy_device_to_device(source, None)
    }

    /// Queues a copy of `source` (same length, same context) into this buffer on `stream`.
    pub fn copy_from_device_async(&mut self, source: &DeviceSlice<T>, stream: &Stream) -> Result<()> {
        ensure_stream_in(&self.context, stream, "copy_from_device_async")?;
        self.copy_device_to_device(source, Some(stream))
    }

    fn copy_device_to_device(&mut self, source: &DeviceSlice<T>, stream: Option<&Stream>) -> Result<()> {
        if source.len() != self.len() {
            return Err(Error::LengthMismatch { destination: self.len(), source_len: source.len() });
        }
        if self.is_empty() {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        let bytes = self.slice.size_bytes();
        // SAFETY: both ranges hold `bytes` bytes (equal lengths); `&mut self` and `&source`
        // cannot overlap; queued copies finish before either side is freed.
        unsafe {
            match stream {
                None => driver::memory::memcpy_dtod(self.slice.ptr, source.ptr, bytes),
                Some(s) => driver::memory::memcpy_dtod_async(self.slice.ptr, source.ptr, bytes, s.raw()),
            }
        }?;
        Ok(())
    }

    /// Copies `source`, a buffer in another context (usually on another GPU), into this one
    /// (`cuMemcpyPeer`). Works without peer access (through the host then); with
    /// [`Context::enable_peer_access`] it goes directly between the GPUs.
    pub fn copy_from_peer(&mut self, source: &DeviceBuffer<T>) -> Result<()> {
        self.copy_peer(source, None)
    }

    /// Queues a copy of `source`, a buffer in another context, into this one on `stream`
    /// (a stream of this buffer's context; `cuMemcpyPeerAsync`).
    ///
    /// # Safety
    /// `source` must stay alive until the copy has finished (synchronise `stream`, or wait for
    /// an event recorded after the copy, before dropping it): its drop waits only for its own
    /// context, not for work queued in this one.
    pub unsafe fn copy_from_peer_async(&mut self, source: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        ensure_stream_in(&self.context, stream, "copy_from_peer_async")?;
        self.copy_peer(source, Some(stream))
    }

    fn copy_peer(&mut self, source: &DeviceBuffer<T>, stream: Option<&Stream>) -> Result<()> {
        if source.len() != self.len() {
            return Err(Error::LengthMismatch { destination: self.len(), source_len: source.len() });
        }
        if self.is_empty() {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        let (destination, origin) = (self.context.raw(), source.context.raw());
        let bytes = self.slice.size_bytes();
        // SAFETY: both allocations hold `bytes` bytes in their own (alive) contexts; queued
        // copies finish before either side is freed (Drop waits for its context).
        unsafe {
            match stream {
                None => driver::memory::memcpy_peer(self.slice.ptr, destination, source.slice.ptr, origin, bytes),
                Some(s) => driver::memory::memcpy_peer_async(self.slice.ptr, destination, source.slice.ptr, origin, bytes, s.raw()),
            }
        }?;
        if stream.is_none() {
            // cuMemcpyPeer may return before the copy ends; a synchronous copy must not.
            self.context.synchronize()?;
        }
        Ok(())
    }

    /// Sets every element to zero, queued on `stream` (ordered with the kernels on it).
    pub fn zero_async(&mut self, stream: &Stream) -> Result<()> {
        ensure_stream_in(&self.context, stream, "zero_async")?;
        if self.slice.size_bytes() == 0 {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        // SAFETY: the allocation holds size_bytes bytes and outlives the queued memset (Drop
        // of the buffer waits for queued work or frees on a stream after it).
        unsafe { driver::memory::memset_d8_async(self.slice.ptr, 0, self.slice.size_bytes(), stream.raw()) }?;
        Ok(())
    }

    /// Copies `data` (same length) from the host, on the legacy default stream: launches that
    /// follow on any stream made by [`Stream::new`] see the data. (From pageable memory the
    /// driver may return before its DMA ends; that ordering, not this call's return, is what
    /// protects a kernel, so [`Stream::non_blocking`] streams must synchronise themselves.)
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len() {
            return Err(Error::LengthMismatch { destination: self.len(), source_len: data.len() });
        }
        if data.is_empty() {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        // SAFETY: both sides hold size_bytes bytes; the copy is synchronous.
        unsafe { driver::memory::memcpy_htod(self.slice.ptr, data.as_ptr().cast(), self.slice.size_bytes()) }?;
        Ok(())
    }

    /// Copies the contents into `out` (same length). Waits for pending work on the legacy
    /// default stream first, as CUDA's synchronous copies do.
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len() {
            return Err(Error::LengthMismatch { destination: out.len(), source_len: self.len() });
        }
        if out.is_empty() {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        // SAFETY: both sides hold size_bytes bytes; `T: Pod` accepts any bytes.
        unsafe { driver::memory::memcpy_dtoh(out.as_mut_ptr().cast(), self.slice.ptr, self.slice.size_bytes()) }?;
        Ok(())
    }

    /// Copies the contents into a new `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len()];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// The context that owns the allocation.
    pub fn context(&self) -> &Context {
        &self.context
    }
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
        if self.context.bind_to_thread().is_err() {
            return;
        }
        match &self.release {
            Release::AfterContextIdle => {
                // Wait for every kernel or copy that may still use the buffer, in any stream
                // of the context, before the memory can be handed out again.
                // SAFETY: no arguments; the context is current (bound above).
                let _ = unsafe { driver::context::synchronize() };
                // SAFETY: allocated by us, freed once, no queued work left that uses it.
                let _ = unsafe { driver::memory::free(self.slice.ptr) };
            }
            Release::OnStream(stream) => {
                // SAFETY: allocated on this stream by us, freed once; the free is ordered
                // after the work queued on the stream so far.
                let _ = unsafe { driver::memory::free_async(self.slice.ptr, stream.raw()) };
            }
        }
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer").field("ptr", &self.slice.ptr).field("len", &self.slice.len).finish()
    }
}
