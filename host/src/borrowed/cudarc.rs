//! The cudarc 0.19 adapter (feature `cudarc`): cudarc's contexts, streams and slices as
//! ferrocuda's, with cudarc's own per-buffer events honoured. candle 0.11's CUDA device is
//! built on these types (`CudaDevice::cuda_stream()`, `CudaStorage::as_cuda_slice()`).
//!
//! ```ignore
//! let ctx = cudarc::driver::CudaContext::new(0)?;
//! let cu_stream = ctx.default_stream();
//! let x = cu_stream.clone_htod(&[1.0f32; 1024])?;
//! let mut y = cu_stream.alloc_zeros::<f32>(1024)?;
//! let stream = borrowed::cudarc::stream(&cu_stream)?;            // the same CUstream
//! let (xs, mut ys) = (borrowed::cudarc::slice(&x, &cu_stream)?, borrowed::cudarc::slice_mut(&mut y, &cu_stream)?);
//! saxpy::launch(&stream, LaunchConfig::for_elements(1024, 256), 2.0, &*xs, &mut *ys)?;
//! drop((xs, ys)); // cudarc's events now cover the launch: cudarc may use x and y again
//! ```
//!
//! cudarc keeps a read and a write event per slice when its context tracks events on several
//! streams ([`CudaContext::is_managing_stream_synchronization`](cudarc::driver::CudaContext::is_managing_stream_synchronization)).
//! [`slice()`] and [`slice_mut()`] go through cudarc's own `DevicePtr::device_ptr` /
//! `DevicePtrMut::device_ptr_mut` on the stream you name: that stream first waits for the
//! slice's earlier writes (and reads, for a write), and when the borrow ends, after the stream
//! waited for ferrocuda's work on the slice (see [`BorrowedSlice`]), cudarc records the
//! slice's read (write) event there, so cudarc's later work on any stream waits for ours.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::{BorrowedSlice, BorrowedSliceMut, problem};
use crate::context::Context;
use crate::error::Result;
use crate::stream::Stream;

/// cudarc's context as a ferrocuda [`Context`] (the same `CUcontext`): the primary context
/// for `CudaContext::new`, else one kept alive by a clone of the `Arc`.
pub fn context(ctx: &Arc<CudaContext>) -> Result<Context> {
    // SAFETY: the CudaContext stays valid while the Arc clone held as keep-alive lives.
    unsafe { Context::from_raw(ctx.cu_ctx(), ctx.clone()) }
}

/// cudarc's stream as a ferrocuda [`Stream`]: the same `CUstream` (work queued on it runs on
/// cudarc's stream), kept alive by a clone of the `Arc`.
pub fn stream(stream: &Arc<CudaStream>) -> Result<Stream> {
    stream_in(&context(stream.context())?, stream)
}

/// [`stream`] in a [`Context`] you already have for the stream's context (saves looking the
/// context up; a non-primary context's ferrocuda handle then loads kernels once, not per call).
pub fn stream_in(context: &Context, stream: &Arc<CudaStream>) -> Result<Stream> {
    if stream.context().cu_ctx() != context.raw() {
        return Err(problem("the cudarc stream belongs to another context than the ferrocuda one given: use `borrowed::cudarc::context(stream.context())`"));
    }
    // SAFETY: a stream of `context` (checked), valid while the Arc clone kept with it lives
    // (cudarc destroys a stream when its last Arc drops; a stream cudarc only wraps, its
    // owner keeps alive while the wrapper lives: `CudaContext::wrap_borrowed_stream`'s contract).
    unsafe { Stream::from_raw(context, stream.cu_stream(), stream.clone()) }
}

/// A cudarc slice borrowed for reading: dereferences to a [`BorrowedSlice`] (pass `&*borrow`
/// to a `&[T]` kernel parameter). Dropping it orders cudarc's later work after ferrocuda's.
pub struct CudaRead<'a, T> {
    // Dropped first: the home stream waits for ferrocuda's work ...
    slice: BorrowedSlice<'a, T>,
    // ... then cudarc records the slice's read event on it.
    _cudarc: SyncOnDrop<'a>,
}

/// A cudarc slice borrowed for writing: dereferences to a [`BorrowedSliceMut`] (pass
/// `&mut *borrow` to an output kernel parameter).
pub struct CudaWrite<'a, T> {
    slice: BorrowedSliceMut<'a, T>,
    _cudarc: SyncOnDrop<'a>,
}

/// Borrows `slice` (a `CudaSlice<T>`, or a `CudaView` / `CudaViewMut` of part of one) to be
/// read by ferrocuda work, with `on` (a stream of the slice's context, usually
/// `slice.stream()`) as its home stream.
pub fn slice<'a, T: Pod, S: DevicePtr<T>>(slice: &'a S, on: &'a Arc<CudaStream>) -> Result<CudaRead<'a, T>> {
    let home = stream(on)?;
    let len = slice.len();
    let (ptr, sync) = slice.device_ptr(on);
    // SAFETY: the slice (or view) is borrowed shared for 'a, so cudarc's safe API cannot
    // write it meanwhile or free it; cudarc's earlier writes are ordered before `on` (device_ptr above),
    // so the range holds initialised `T`s (`Pod`) of a live allocation.
    let slice = unsafe { BorrowedSlice::with_home(home, ptr, len) }?;
    Ok(CudaRead { slice, _cudarc: sync })
}

/// Borrows `slice` (a `CudaSlice<T>` or a `CudaViewMut` of part of one) to be written by
/// ferrocuda work, with `on` as its home stream (see [`slice()`]).
pub fn slice_mut<'a, T: Pod, S: DevicePtrMut<T>>(slice: &'a mut S, on: &'a Arc<CudaStream>) -> Result<CudaWrite<'a, T>> {
    let home = stream(on)?;
    let len = slice.len();
    let (ptr, sync) = slice.device_ptr_mut(on);
    // SAFETY: as in `slice`, and the slice (or view) is borrowed exclusively for 'a, so
    // nothing else reaches it meanwhile; its earlier reads and writes are ordered before `on`.
    let slice = unsafe { BorrowedSliceMut::with_home(home, ptr, len) }?;
    Ok(CudaWrite { slice, _cudarc: sync })
}

impl<'a, T> Deref for CudaRead<'a, T> {
    type Target = BorrowedSlice<'a, T>;
    fn deref(&self) -> &Self::Target {
        &self.slice
    }
}

impl<'a, T> Deref for CudaWrite<'a, T> {
    type Target = BorrowedSliceMut<'a, T>;
    fn deref(&self) -> &Self::Target {
        &self.slice
    }
}

impl<T> DerefMut for CudaWrite<'_, T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.slice
    }
}
