//! The CUDA halves of the ops: ferrocuda's kernels on candle's `CudaSlice`s and stream.
//!
//! candle 0.11's `CudaDevice` holds a cudarc 0.19 context and one stream
//! (`CudaDevice::cuda_stream()`); every `CudaStorage` holds a `CudaSlice<T>` of that context.
//! `ferrocuda_host::borrowed::cudarc` lends those to ferrocuda: the stream as a ferrocuda
//! `Stream` (the same `CUstream`), and each slice for the length of a scope, with cudarc's
//! per-slice events honoured on entry (the stream waits for cudarc's earlier writes of the
//! inputs, and earlier reads and writes of the output) and recorded on exit (cudarc's later
//! work on any stream waits for the kernel). The kernel reads and writes candle's memory in
//! place; nothing is copied.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::CudaDType;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, DeviceRepr};
use candle_core::{CudaDevice, CudaStorage, Result};
use ferrocuda_host::borrowed;
use ferrocuda_kernels::Element;
use ferrocuda_kernels::attention::Attention;
use ferrocuda_kernels::rows::Rows;

use crate::Range;

/// Any ferrocuda error as candle's (its message says what went wrong and what to do).
fn wrap(error: impl std::fmt::Display + Send + Sync + 'static) -> candle_core::Error {
    candle_core::Error::wrap(error)
}

/// A new slice of `len` elements on candle's device and stream, for a kernel to fill.
fn output<T: DeviceRepr>(device: &CudaDevice, len: usize) -> Result<CudaSlice<T>> {
    // SAFETY: cudarc's `alloc` leaves the memory unset. Every caller hands the slice to a kernel
    // that writes all `len` elements (queued on the same stream, so before anything can read
    // it), and f32/bf16/f16/f32 (lse) have no invalid bit patterns in any case.
    unsafe { device.alloc::<T>(len) }
}

/// `rows::rmsnorm` on `x[x_range]` and `weight[w_range]` of candle's storages, into a new
/// storage on candle's stream.
pub(crate) fn rms_norm<T>(x: &CudaStorage, x_range: Range, weight: &CudaStorage, w_range: Range, shape: Rows, eps: f32) -> Result<CudaStorage>
where
    T: Element + CudaDType + DeviceRepr + bytemuck::Pod,
{
    let device = x.device().clone();
    let stream = device.cuda_stream();
    let x = x.as_cuda_slice::<T>()?.slice(x_range.0..x_range.1);
    let weight = weight.as_cuda_slice::<T>()?.slice(w_range.0..w_range.1);
    let mut out = output::<T>(&device, shape.rows * shape.cols)?;
    // The per-row 1/rms the kernel also writes (for a backward); candle's op has no use for it.
    let mut rstd = output::<f32>(&device, shape.rows)?;
    let ferro_stream = borrowed::cudarc::stream(&stream).map_err(wrap)?;
    borrowed::cudarc::scope(|scope| -> Result<()> {
        let xs = scope.slice(&x, &stream).map_err(wrap)?;
        let ws = scope.slice(&weight, &stream).map_err(wrap)?;
        let mut outs = scope.slice_mut(&mut out, &stream).map_err(wrap)?;
        let mut rstds = scope.slice_mut(&mut rstd, &stream).map_err(wrap)?;
        ferrocuda_kernels::rows::rmsnorm(&ferro_stream, &xs, &ws, &mut outs, &mut rstds, shape, eps).map_err(wrap)
    })?;
    Ok(CudaStorage::wrap_cuda_slice(out, device))
}

/// `attention::attention_forward` on `q`, `k`, `v` (their element ranges) of candle's
/// storages, into a new storage on candle's stream.
pub(crate) fn attention<T>(storages: [&CudaStorage; 3], ranges: [Range; 3], shape: Attention) -> Result<CudaStorage>
where
    T: Element + CudaDType + DeviceRepr + bytemuck::Pod,
{
    let device = storages[0].device().clone();
    let stream = device.cuda_stream();
    let view = |i: usize| storages[i].as_cuda_slice::<T>().map(|s| s.slice(ranges[i].0..ranges[i].1));
    let (q, k, v) = (view(0)?, view(1)?, view(2)?);
    let mut out = output::<T>(&device, shape.q_len())?;
    // The log-sum-exp per row (for a backward); candle's op returns only the output.
    let mut lse = output::<f32>(&device, shape.q_rows())?;
    let ferro_stream = borrowed::cudarc::stream(&stream).map_err(wrap)?;
    borrowed::cudarc::scope(|scope| -> Result<()> {
        let qs = scope.slice(&q, &stream).map_err(wrap)?;
        let ks = scope.slice(&k, &stream).map_err(wrap)?;
        let vs = scope.slice(&v, &stream).map_err(wrap)?;
        let mut outs = scope.slice_mut(&mut out, &stream).map_err(wrap)?;
        let mut lses = scope.slice_mut(&mut lse, &stream).map_err(wrap)?;
        ferrocuda_kernels::attention::attention_forward(&ferro_stream, &qs, &ks, &vs, &mut outs, &mut lses, shape).map_err(wrap)
    })?;
    Ok(CudaStorage::wrap_cuda_slice(out, device))
}
