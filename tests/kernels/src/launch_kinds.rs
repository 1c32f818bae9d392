//! Kernels that exercise every parameter kind `#[kernel]` accepts: a `Pod` struct by value, a
//! generic kernel with two instances, raw device pointers, a `bool`, and an empty kernel (for
//! launch-overhead measurements).

use ferrocuda_device::kernel;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, index_1d, thread_idx_x};

/// Parameters of [`affine()`], passed to the kernel by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Affine {
    /// Multiplier.
    pub scale: f32,
    /// Added after scaling.
    pub offset: f32,
    /// Only elements below this index are written.
    pub limit: u32,
}

/// `out[i] = p.scale * x[i] + p.offset` for `i < p.limit`: a struct argument.
#[kernel]
pub fn affine(p: Affine, x: &[f32], out: &mut [f32]) {
    let i = index_1d();
    if i < out.len() && i < x.len() && i < p.limit as usize {
        out[i] = p.scale * x[i] + p.offset;
    }
}

/// `out[i] = factor * x[i]` for any multipliable type: instances `scale_into_f32` and
/// `scale_into_f64`.
#[kernel(instances(f32, f64))]
pub fn scale_into<T: Copy + core::ops::Mul<Output = T>>(factor: T, x: &[T], out: &mut [T]) {
    let i = index_1d();
    if i < out.len() && i < x.len() {
        out[i] = factor * x[i];
    }
}

/// `out[i] = x[i] + 1` for `i < n`, through raw device pointers (an `unsafe` launcher).
///
/// # Safety
/// `x` and `out` must point to `n` valid `f32` each in device memory, `out` written by no one
/// else while the kernel runs.
#[kernel]
pub unsafe fn add_one_raw(n: u32, x: *const f32, out: *mut f32) {
    let i = index_1d();
    if i < n as usize {
        // SAFETY: the launcher's caller promised `n` valid elements behind both pointers.
        unsafe { *out.add(i) = *x.add(i) + 1.0 };
    }
}

/// Thread 0 of each block writes its block index (or `u32::MAX - index` when `invert`): shows
/// which blocks ran, e.g. under a cluster launch.
#[kernel]
pub fn mark_blocks(invert: bool, out: &mut [u32]) {
    let block = block_idx_x() as usize;
    if thread_idx_x() == 0 && block < out.len() {
        out[block] = if invert { u32::MAX - block as u32 } else { block as u32 };
    }
    let _ = block_dim_x();
}

/// Does nothing: what launch overhead is measured with.
#[kernel]
pub fn empty() {}

/// `low[i] = min(x[i], 0)`, `high[i] = max(x[i], 0)`: two outputs, which the launcher must
/// never receive as the same buffer.
#[kernel]
pub fn split_sign(x: &[f32], low: &mut [f32], high: &mut [f32]) {
    let i = index_1d();
    if i < x.len() && i < low.len() && i < high.len() {
        low[i] = x[i].min(0.0);
        high[i] = x[i].max(0.0);
    }
}
