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
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::warp;

ferrocuda_device::embed_kernels!();

/// Threads per block the row kernels are launched with by [`rows_config`]: 8 rows per block.
pub const ROW_BLOCK_THREADS: u32 = 256;

/// The launch configuration of [`rms_norm()`] and [`softmax()`] for `rows` rows.
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

/// Columns a lane loads per step of the row loops: all eight loads are issued before any is
/// used, so eight are in flight per lane. One at a time, each column waited for the memory's
/// latency: 7x slower than candle's RMSNorm on an H100 (bench/results/h100-2026-11-25-interop.txt).
const UNROLL: usize = 8;
/// The lanes of a warp, as a column stride.
const LANES: usize = warp::WARP_SIZE as usize;
/// The span of one unrolled step's columns (`c ..= c + 32 * 7`): sliced once per step, so its
/// eight constant-offset reads need no bounds check each.
const SPAN: usize = LANES * (UNROLL - 1) + 1;

/// The first column of each unrolled step of a lane (`lane`, `lane + 256`, ...) while all eight
/// of its columns (`c + 32 k`) are below `cols`; then the rest one by one.
#[inline(always)]
fn steps(lane: usize, cols: usize) -> (core::iter::StepBy<core::ops::Range<usize>>, core::iter::StepBy<core::ops::Range<usize>>) {
    let full = cols / (LANES * UNROLL) * (LANES * UNROLL);
    ((lane..full).step_by(LANES * UNROLL), (full + lane..cols).step_by(LANES))
}

/// `out[r][c] = x[r][c] / sqrt(mean_c(x[r][c]²) + eps) * weight[c]` for the `rows` rows of
/// `weight.len()` columns (RMSNorm, as in LLaMA and `torch.nn.functional.rms_norm`).
#[kernel]
pub fn rms_norm(x: &[f32], weight: &[f32], mut out: DisjointSlice<f32>, rows: u32, eps: f32) {
    let cols = weight.len();
    let Some((base, lane)) = warp_row(rows, cols, x.len().min(out.len())) else { return };
    let row = &x[base..base + cols];
    let (unrolled, rest) = steps(lane, cols);
    let mut squares = [0.0f32; UNROLL];
    for c in unrolled.clone() {
        let mut v = [0.0f32; UNROLL];
        let span = &row[c..c + SPAN];
        unroll::<UNROLL>(|k| v[k] = span[LANES * k]);
        unroll::<UNROLL>(|k| squares[k] = v[k].mul_add(v[k], squares[k]));
    }
    for c in rest.clone() {
        squares[0] = row[c].mul_add(row[c], squares[0]);
    }
    let mut sum = 0.0f32;
    unroll::<UNROLL>(|k| sum += squares[k]);
    let scale = (warp::reduce_sum(sum) / cols as f32 + eps).rsqrt();
    for c in unrolled {
        let (mut v, mut g) = ([0.0f32; UNROLL], [0.0f32; UNROLL]);
        let (span, gains) = (&row[c..c + SPAN], &weight[c..c + SPAN]);
        unroll::<UNROLL>(|k| {
            v[k] = span[LANES * k];
            g[k] = gains[LANES * k];
        });
        // SAFETY: `base + c + 32 k < base + cols <= out.len()` (warp_row); the element is in
        // the row this warp alone owns, and its column is `lane` mod 32, this lane's alone.
        unroll::<UNROLL>(|k| unsafe { out.write_unchecked(base + c + LANES * k, v[k] * scale * g[k]) });
    }
    for c in rest {
        // SAFETY: as above.
        unsafe { out.write_unchecked(base + c, row[c] * scale * weight[c]) };
    }
}

/// `out[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r)` for `rows` rows of
/// `cols` columns (`exp` is the hardware `ex2.approx` with a scale, as CUDA's `__expf`).
#[kernel]
pub fn softmax(x: &[f32], mut out: DisjointSlice<f32>, rows: u32, cols: u32) {
    let cols = cols as usize;
    let Some((base, lane)) = warp_row(rows, cols, x.len().min(out.len())) else { return };
    let row = &x[base..base + cols];
    let (unrolled, rest) = steps(lane, cols);
    let mut maxes = [f32::NEG_INFINITY; UNROLL];
    for c in unrolled.clone() {
        let mut v = [0.0f32; UNROLL];
        let span = &row[c..c + SPAN];
        unroll::<UNROLL>(|k| v[k] = span[LANES * k]);
        unroll::<UNROLL>(|k| maxes[k] = maxes[k].max(v[k]));
    }
    for c in rest.clone() {
        maxes[0] = maxes[0].max(row[c]);
    }
    let mut max = f32::NEG_INFINITY;
    unroll::<UNROLL>(|k| max = max.max(maxes[k]));
    let max = warp::reduce(max, f32::max);
    let mut sums = [0.0f32; UNROLL];
    for c in unrolled.clone() {
        let mut v = [0.0f32; UNROLL];
        let span = &row[c..c + SPAN];
        unroll::<UNROLL>(|k| v[k] = span[LANES * k]);
        unroll::<UNROLL>(|k| sums[k] += (v[k] - max).fast_exp());
    }
    for c in rest.clone() {
        sums[0] += (row[c] - max).fast_exp();
    }
    let mut sum = 0.0f32;
    unroll::<UNROLL>(|k| sum += sums[k]);
    let scale = 1.0 / warp::reduce_sum(sum);
    for c in unrolled {
        let mut v = [0.0f32; UNROLL];
        let span = &row[c..c + SPAN];
        unroll::<UNROLL>(|k| v[k] = span[LANES * k]);
        // SAFETY: as in `rms_norm`: in bounds, and this lane's alone.
        unroll::<UNROLL>(|k| unsafe { out.write_unchecked(base + c + LANES * k, (v[k] - max).fast_exp() * scale) });
    }
    for c in rest {
        // SAFETY: as above.
        unsafe { out.write_unchecked(base + c, (row[c] - max).fast_exp() * scale) };
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
