//! Typed device memory: [`DeviceBuffer`] owns an allocation; it dereferences to a
//! [`DeviceSlice`], which is what kernels take.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
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

/// An owned device allocation of `len` values of `T`, freed on drop.
pub struct DeviceBuffer<T: Pod> {
    slice: DeviceSlice<T>,
    context: Context,
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` elements, zero-filled.
    pub fn zeroed(context: &Context, len: usize) -> Result<Self> {
        let buffer = Self::allocate(context, len)?;
        if buffer.slice.size_bytes() > 0 {
            // SAFETY: the allocation holds exactly size_bytes bytes.
            check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(buffer.slice.ptr, 0, buffer.slice.size_bytes()) })?;
        }
        Ok(buffer)
    }

    /// Allocates and copies `data` to the device.
    pub fn from_slice(context: &Context, data: &[T]) -> Result<Self> {
        let mut buffer = Self::allocate(context, data.len())?;
        buffer.copy_from_host(data)?;
        Ok(buffer)
    }

    fn allocate(context: &Context, len: usize) -> Result<Self> {
        context.bind_to_thread()?;
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("allocation size overflows usize");
        let mut ptr = 0;
        if bytes > 0 {
            // SAFETY: writes one device pointer; freed in Drop.
            check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) })?;
        }
        Ok(DeviceBuffer { slice: DeviceSlice { ptr, len, _element: PhantomData }, context: context.clone() })
    }

    /// Sets every element to zero, queued on `stream` (ordered with the kernels on it).
    pub fn zero_async(&mut self, stream: &Stream) -> Result<()> {
        if self.slice.size_bytes() == 0 {
            return Ok(());
        }
        self.context.bind_to_thread()?;
        // SAFETY: the allocation holds size_bytes bytes and outlives the queued memset (Drop
        // of the buffer waits for queued work, see below).
        check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(self.slice.ptr, 0, self.slice.size_bytes(), stream.raw()) })?;
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
        check("cuMemcpyHtoD", unsafe { sys::cuMemcpyHtoD_v2(self.slice.ptr, data.as_ptr().cast(), self.slice.size_bytes()) })?;
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
        check("cuMemcpyDtoH", unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), self.slice.ptr, self.slice.size_bytes()) })?;
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

impl<T: Pod> DerefMut for DeviceBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        &mut self.slice
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.slice.ptr == 0 {
            return;
        }
        // cuMemFree synchronises with the device before freeing (the driver API's "API
        // synchronization behavior"), so a kernel still queued on this buffer finishes first.
        // Errors (a faulted context) cannot be reported from Drop; the next call reports them.
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: allocated by us, freed once.
            unsafe { sys::cuMemFree_v2(self.slice.ptr) };
        }
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer").field("ptr", &self.slice.ptr).field("len", &self.slice.len).finish()
    }
}
