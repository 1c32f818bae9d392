//! Kernels that exercise every parameter kind `#[kernel]` accepts: a `Pod` struct by value, a
//! generic kernel with two instances, raw device pointers, a `bool`, and an empty kernel (for
//! launch-overhead measurements).

use ferrocuda_device::global::{DisjointSlice, PerBlock, once_per_block, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::thread::index_1d;

/// Parameters of [`affine()`], passed to the kernel by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
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
pub fn affine(p: Affine, x: &[f32], mut out: DisjointSlice<f32>) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i)
        && i.get() < x.len()
        && i.get() < p.limit as usize
    {
        *o = p.scale * x[i] + p.offset;
    }
}

/// `out[i] = factor * x[i]` for any multipliable type: instances `scale_into_f32` and
/// `scale_into_f64`.
#[kernel(instances(f32, f64))]
pub fn scale_into<T: bytemuck::Pod + core::ops::Mul<Output = T>>(factor: T, x: &[T], mut out: DisjointSlice<T>) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i)
        && i.get() < x.len()
    {
        *o = factor * x[i];
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
pub fn mark_blocks(invert: bool, mut out: PerBlock<u32>) {
    // Thread 0 of block b writes element b.
    if let Some(b) = once_per_block()
        && let Some(o) = out.get_mut(b)
    {
        *o = if invert { u32::MAX - b.get() as u32 } else { b.get() as u32 };
    }
}

/// Does nothing: what launch overhead is measured with.
#[kernel]
pub fn empty() {}

/// `low[i] = min(x[i], 0)`, `high[i] = max(x[i], 0)`: two outputs, which the launcher must
/// never receive as the same buffer.
#[kernel]
pub fn split_sign(x: &[f32], mut low: DisjointSlice<f32>, mut high: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(l), Some(h)) = (low.get_mut(i), high.get_mut(i))
        && i.get() < x.len()
    {
        *l = x[i].min(0.0);
        *h = x[i].max(0.0);
    }
}

/// Eight slice arguments (four read, four written), for the launch-overhead measurement of
/// buffer tracking: thread 0 writes each input's length into the first element of each output.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn eight_buffers(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    d: &[f32],
    mut e: DisjointSlice<f32>,
    mut f: DisjointSlice<f32>,
    mut g: DisjointSlice<f32>,
    mut h: DisjointSlice<f32>,
) {
    // Thread 0 of block 0 is the thread whose unique index is 0.
    let i = unique_index();
    if i.get() == 0
        && let (Some(e0), Some(f0), Some(g0), Some(h0)) = (e.get_mut(i), f.get_mut(i), g.get_mut(i), h.get_mut(i))
    {
        (*e0, *f0, *g0, *h0) = (a.len() as f32, b.len() as f32, c.len() as f32, d.len() as f32);
    }
}

/// Spins until `%globaltimer` has advanced by `nanoseconds`, touching no memory: a kernel with
/// only a scalar argument, so nothing but its module keeps it alive once its launcher returned
/// (the S1 test drops the last handles of its context while it runs). Returns at once on the
/// CPU executor, which has no such clock.
#[kernel]
pub fn spin_for(nanoseconds: u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let now = || {
            let t: u64;
            // SAFETY: reads a special register; touches no memory. Not `pure`: each read must
            // happen, so the loop cannot be folded away.
            unsafe { core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
            t
        };
        let start = now();
        while now().wrapping_sub(start) < nanoseconds {}
    }
    #[cfg(not(target_arch = "nvptx64"))]
    let _ = nanoseconds;
}
