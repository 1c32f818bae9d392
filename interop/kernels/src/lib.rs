//! Kernels that ferrocuda's interop layer (`ferrocuda::borrowed`, the PyTorch extension, the
//! candle example) runs on memory other libraries own: `saxpy`, and RMSNorm and softmax over
//! the rows of a row-major matrix, the fused ops models call most.
//!
//! The row kernels give each warp one row (`rows` rows of `cols` columns): a block of `B`
//! threads (a multiple of 32) handles `B / 32` rows, so launch [`rows_config`]`(rows)`. Each
//! lane reads and writes the columns `lane, lane + 32, ...` of its warp's row; the row's sums
//! are warp-shuffle reductions, so every value is read from memory once per pass and written
//! once.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::math::{DeviceFloat, FastMath};
use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, thread_idx_x};
use ferrocuda_device::warp;

ferrocuda_device::embed_kernels!();

/// Threads per block the row kernels are launched with by [`rows_config`]: 8 rows per block.
pub const ROW_BLOCK_THREADS: u32 = 256;

/// The launch configuration of [`rms_norm`] and [`softmax`] for `rows` rows.
#[cfg(not(target_arch = "nvptx64"))]
pub fn rows_config(rows: usize) -> ferrocuda_host::LaunchConfig {
    let rows_per_block = (ROW_BLOCK_THREADS / warp::WARP_SIZE) as usize;
    ferrocuda_host::LaunchConfig::new(rows.div_ceil(rows_per_block).max(1) as u32, ROW_BLOCK_THREADS)
}

/// `y[i] = a * x[i] + y[i]`, one element per thread.
#[kernel]
pub fn saxpy(a: f32, x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let Some(y_i) = y.get_mut(i)
        && i.get() < x.len()
    {
        *y_i = a.mul_add(x[i], *y_i);
    }
}

/// `out[r][c] = x[r][c] / sqrt(mean_c(x[r][c]²) + eps) * weight[c]` for the `rows` rows of
/// `weight.len()` columns (RMSNorm, as in LLaMA and `torch.nn.functional.rms_norm`).
#[kernel]
pub fn rms_norm(x: &[f32], weight: &[f32], mut out: DisjointSlice<f32>, rows: u32, eps: f32) {
    let cols = weight.len();
    let Some((base, lane)) = warp_row(rows, cols, x.len().min(out.len())) else { return };
    let mut squares = 0.0f32;
    let mut c = lane;
    while c < cols {
        let v = x[base + c];
        squares = v.mul_add(v, squares);
        c += warp::WARP_SIZE as usize;
    }
    let scale = (warp::reduce_sum(squares) / cols as f32 + eps).rsqrt();
    let mut c = lane;
    while c < cols {
        // SAFETY: `base + c < base + cols <= out.len()` (warp_row); element `base + c` is in
        // the row this warp alone owns, and `c ≡ lane (mod 32)` gives it to this lane alone.
        unsafe { out.write_unchecked(base + c, x[base + c] * scale * weight[c]) };
        c += warp::WARP_SIZE as usize;
    }
}

/// `out[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r)` for `rows` rows of
/// `cols` columns (`exp` is the hardware `ex2.approx` with a scale, as CUDA's `__expf`).
#[kernel]
pub fn softmax(x: &[f32], mut out: DisjointSlice<f32>, rows: u32, cols: u32) {
    let cols = cols as usize;
    let Some((base, lane)) = warp_row(rows, cols, x.len().min(out.len())) else { return };
    let step = warp::WARP_SIZE as usize;
    let mut max = f32::NEG_INFINITY;
    let mut c = lane;
    while c < cols {
        max = max.max(x[base + c]);
        c += step;
    }
    let max = warp::reduce(max, f32::max);
    let mut sum = 0.0f32;
    let mut c = lane;
    while c < cols {
        sum += (x[base + c] - max).fast_exp();
        c += step;
    }
    let scale = 1.0 / warp::reduce_sum(sum);
    let mut c = lane;
    while c < cols {
        // SAFETY: as in `rms_norm`: in bounds, and this lane's alone.
        unsafe { out.write_unchecked(base + c, (x[base + c] - max).fast_exp() * scale) };
        c += step;
    }
}

/// For the calling warp: the first element of the row it owns and this thread's lane, or
/// `None` when it owns no row (past `rows`, or the row would end past `len`) or the launch is
/// not 1-D with whole warps (the shape under which warps own distinct rows and lanes distinct
/// columns). Uniform across the warp, so the warp's shuffles always see all 32 lanes.
#[inline(always)]
fn warp_row(rows: u32, cols: usize, len: usize) -> Option<(usize, usize)> {
    let one_dimensional = block_dim_y() == 1 && block_dim_z() == 1 && block_idx_y() == 0 && block_idx_z() == 0;
    if !one_dimensional || !block_dim_x().is_multiple_of(warp::WARP_SIZE) {
        return None;
    }
    let row = block_idx_x().checked_mul(block_dim_x() / warp::WARP_SIZE)?.checked_add(thread_idx_x() / warp::WARP_SIZE)?;
    if row >= rows {
        return None;
    }
    let base = (row as usize).checked_mul(cols)?;
    (base.checked_add(cols)? <= len).then_some((base, (thread_idx_x() % warp::WARP_SIZE) as usize))
}
