//! The row and element-wise kernels with 16-byte accesses: a thread owns 8 consecutive
//! elements (one 16-byte load or store of `bf16`/`f16`, two of `f32`), read once and kept in
//! registers. What PyTorch's and llm.c's fast kernels do (`load128`/`aligned_vector`).
//!
//! Row kernels here run **one block per row, 8 columns per thread**: block `b` (of `rows`) is
//! row `b`, its thread `t` columns `8 t .. 8 t + 8`, and the launch has exactly `cols / 8`
//! threads per block (`cols % 8 == 0`, `32 <= cols / 8 <= 1024`; the host crate picks these
//! kernels only for such shapes, the warp-per-row ones of the crate root otherwise). So the
//! thread's global index is its chunk's index in the matrix, and the outputs are
//! [`DisjointChunks<T, 8>`] (chunk `i` to the thread of index `i`: disjoint by construction)
//! and [`BlockRows`] rows of one value (row statistics, written by thread 0). Row sums are
//! [`RuntimeBlockReduce`]s. The row is read once (the warp-per-row kernels read it two or
//! three times), with `ld.global.nc.v4`.
//!
//! Alignment is checked at run time, never assumed: a chunk whose address is not a multiple
//! of 16 bytes (a view that starts mid-vector) is read and written element by element, with
//! the same results. No `unsafe`.

use core::num::NonZeroU32;

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::partition::BlockRows;
use ferrocuda_device::global::{DisjointChunks, DisjointSlice, ThreadIndex, block_row, grid_stride, unique_index};
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::{DeviceFloat, FastMath};
use ferrocuda_device::thread::{block_idx_x, grid_dim_x, thread_idx_x};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{block_scratch, kernel};

use crate::{CHUNK, Float, RopeShape, bf16, f16, gelu, gelu_derivative, sigmoid, silu};

/// 16 bytes, aligned to 16: the unit of one vector access (CUDA's `int4`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Vec16([u32; 4]);

/// Vector accesses that hold one chunk: 1 (`bf16`, `f16`) or 2 (`f32`).
const fn words<T>() -> usize {
    (CHUNK * core::mem::size_of::<T>()).div_ceil(16)
}

/// The 8 values of `x` at `at .. at + 8` as `f32` (zeros past the end): 16-byte loads when
/// the chunk is 16-byte aligned, element loads otherwise.
#[inline(always)]
fn load8<T: Float>(x: &[T], at: usize, hint: Load) -> [f32; CHUNK] {
    let mut v = [0.0f32; CHUNK];
    let Some(chunk) = x.get(at..at + CHUNK) else {
        unroll::<CHUNK>(|u| v[u] = x.get(at + u).map_or(0.0, |e| e.to_f32()));
        return v;
    };
    match bytemuck::try_cast_slice::<T, Vec16>(chunk) {
        Ok(vectors) if vectors.len() == words::<T>() => {
            let mut raw = [Vec16::default(); 2];
            unroll::<2>(|k| {
                if k < words::<T>() {
                    raw[k] = cache::load(&vectors[k], hint);
                }
            });
            let values: &[T] = bytemuck::cast_slice(&raw[..words::<T>()]);
            unroll::<CHUNK>(|u| v[u] = values[u].to_f32());
        }
        _ => unroll::<CHUNK>(|u| v[u] = chunk[u].to_f32()),
    }
    v
}

/// Stores `v` (rounded to `T`) into this thread's chunk `i` of `out`: 16-byte stores when it
/// is aligned. Nothing past the last whole chunk.
#[inline(always)]
fn store8<T: Float>(out: &mut DisjointChunks<T, CHUNK>, i: ThreadIndex, v: [f32; CHUNK]) {
    let Some(chunk) = out.get_mut(i) else { return };
    let mut raw = [Vec16::default(); 2];
    {
        let values: &mut [T] = bytemuck::cast_slice_mut(&mut raw[..words::<T>()]);
        unroll::<CHUNK>(|u| values[u] = T::from_f32(v[u]));
    }
    match bytemuck::try_cast_slice_mut::<T, Vec16>(&mut chunk[..]) {
        Ok(vectors) if vectors.len() == words::<T>() => unroll::<2>(|k| {
            if k < words::<T>() {
                cache::store(&mut vectors[k], raw[k], Store::EvictFirst);
            }
        }),
        _ => {
            let values: &[T] = bytemuck::cast_slice(&raw[..words::<T>()]);
            unroll::<CHUNK>(|u| chunk[u] = values[u]);
        }
    }
}

/// Writes `value` as row `row`'s one value of a `BlockRows` output of width 1 (thread 0).
#[inline(always)]
fn write_row_value(out: &mut DisjointSlice<f32, BlockRows>, value: f32) {
    if let Some(mut row) = out.row_mut(block_row())
        && let Some(element) = row.get_mut(0)
    {
        *element = value;
    }
}

/// This thread's chunk (its global index), the element index of its first value and its first
/// column, for a launch of `cols / 8` threads per block (one block per row): the column is
/// `8 threadIdx.x`, no 64-bit division (a `u64` `%` is a software routine of dozens of
/// instructions and registers). Another launch reads other columns, never out of bounds.
#[inline(always)]
fn my_chunk() -> (ThreadIndex, usize, usize) {
    let i = unique_index();
    (i, i.get() * CHUNK, thread_idx_x() as usize * CHUNK)
}

/// Sum over the chunk.
#[inline(always)]
fn sum8(v: [f32; CHUNK]) -> f32 {
    let mut s = 0.0f32;
    unroll::<CHUNK>(|u| s += v[u]);
    s
}

/// Mean (`centred`; else 0) and `1 / sqrt(variance + eps)` of the block's row, from each
/// thread's chunk `v` (in registers: two block reductions, no second read). Every thread of
/// the block must call it.
#[inline(always)]
fn block_statistics(v: [f32; CHUNK], cols: u32, centred: bool, eps: f32) -> (f32, f32) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let n = cols as f32;
    let mean = if centred { reduce.sum_all(sum8(v)) / n } else { 0.0 };
    let mut squares = 0.0f32;
    unroll::<CHUNK>(|u| squares += (v[u] - mean) * (v[u] - mean));
    (mean, 1.0 / (reduce.sum_all(squares) / n + eps).sqrt())
}

/// `round_T(a + b)` for each value: the fused forms' residual sum, as stored.
#[inline(always)]
fn add8<T: Float>(a: [f32; CHUNK], b: [f32; CHUNK]) -> [f32; CHUNK] {
    let mut h = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| h[u] = T::from_f32(a[u] + b[u]).to_f32());
    h
}

/// `(v - mean) * rstd * w (+ b)`.
#[inline(always)]
fn normalise(v: [f32; CHUNK], w: [f32; CHUNK], b: Option<[f32; CHUNK]>, mean: f32, rstd: f32) -> [f32; CHUNK] {
    let mut o = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| o[u] = (v[u] - mean) * rstd * w[u] + b.map_or(0.0, |b| b[u]));
    o
}

/// [`rmsnorm_forward()`](crate::rmsnorm_forward), one block per row, 8 columns per thread
/// (see the module docs for the launch).
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), launch_bounds(1024, 2))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_forward_packed<T: Float>(x: &[T], weight: &[T], mut out: DisjointChunks<T, 8>, mut rstd: DisjointSlice<f32, BlockRows>, cols: u32, eps: f32) {
    let (i, at, c) = my_chunk();
    let (v, w) = (load8(x, at, Load::EvictFirst), load8(weight, c, Load::EvictLast));
    let (_, r) = block_statistics(v, cols, false, eps);
    store8(&mut out, i, normalise(v, w, None, 0.0, r));
    write_row_value(&mut rstd, r);
}

/// [`add_rmsnorm_forward()`](crate::add_rmsnorm_forward), one block per row.
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), launch_bounds(1024, 2))]
#[allow(clippy::too_many_arguments)]
pub fn add_rmsnorm_forward_packed<T: Float>(
    x: &[T],
    residual: &[T],
    weight: &[T],
    mut out: DisjointChunks<T, 8>,
    mut sum: DisjointChunks<T, 8>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    let (i, at, c) = my_chunk();
    let (h, w) = (add8::<T>(load8(x, at, Load::EvictFirst), load8(residual, at, Load::EvictFirst)), load8(weight, c, Load::EvictLast));
    let (_, r) = block_statistics(h, cols, false, eps);
    store8(&mut sum, i, h);
    store8(&mut out, i, normalise(h, w, None, 0.0, r));
    write_row_value(&mut rstd, r);
}

/// [`layernorm_forward()`](crate::layernorm_forward), one block per row.
#[kernel(instances(f32, bf16, f16), cols(mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_packed<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    mut out: DisjointChunks<T, 8>,
    mut mean: DisjointSlice<f32, BlockRows>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    let (i, at, c) = my_chunk();
    let v = load8(x, at, Load::EvictFirst);
    let (m, r) = block_statistics(v, cols, true, eps);
    // Weight and bias after the statistics (L1/L2 hits): fewer registers live across the
    // reductions, so four blocks of 512 threads fit an SM.
    let (w, b) = (load8(weight, c, Load::EvictLast), load8(bias, c, Load::EvictLast));
    store8(&mut out, i, normalise(v, w, Some(b), m, r));
    write_row_value(&mut mean, m);
    write_row_value(&mut rstd, r);
}

/// [`add_layernorm_forward()`](crate::add_layernorm_forward), one block per row.
#[kernel(instances(f32, bf16, f16), cols(mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn add_layernorm_forward_packed<T: Float>(
    x: &[T],
    residual: &[T],
    weight: &[T],
    bias: &[T],
    mut out: DisjointChunks<T, 8>,
    mut sum: DisjointChunks<T, 8>,
    mut mean: DisjointSlice<f32, BlockRows>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    let (i, at, c) = my_chunk();
    let h = add8::<T>(load8(x, at, Load::EvictFirst), load8(residual, at, Load::EvictFirst));
    let (m, r) = block_statistics(h, cols, true, eps);
    let (w, b) = (load8(weight, c, Load::EvictLast), load8(bias, c, Load::EvictLast));
    store8(&mut sum, i, h);
    store8(&mut out, i, normalise(h, w, Some(b), m, r));
    write_row_value(&mut mean, m);
    write_row_value(&mut rstd, r);
}

/// The input gradient of a norm ([`layernorm_backward()`](crate::layernorm_backward) when
/// `centred`, else [`rmsnorm_backward()`](crate::rmsnorm_backward)), one block per row: the
/// row's `dout`, `x` and `dresidual` are read once.
#[kernel(instances(f32, bf16, f16))]
#[allow(clippy::too_many_arguments)]
pub fn norm_backward_packed<T: Float>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    mean: &[f32],
    rstd: &[f32],
    dresidual: &[T],
    mut dx: DisjointChunks<T, 8>,
    cols: u32,
    add_dresidual: u32,
    centred: u32,
) {
    let (i, at, c) = my_chunk();
    let row = block_idx_x() as usize;
    let m = if centred != 0 { mean.get(row).copied().unwrap_or(0.0) } else { 0.0 };
    let s = rstd.get(row).copied().unwrap_or(0.0);
    let (d, v, w) = (load8(dout, at, Load::EvictFirst), load8(x, at, Load::EvictFirst), load8(weight, c, Load::EvictLast));
    let e = if add_dresidual != 0 { load8(dresidual, at, Load::EvictFirst) } else { [0.0; CHUNK] };
    let (mut g_sum, mut gx_sum) = (0.0f32, 0.0f32);
    unroll::<CHUNK>(|u| {
        let g = d[u] * w[u];
        g_sum += g;
        gx_sum += g * (v[u] - m) * s;
    });
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let n = cols as f32;
    let g_mean = if centred != 0 { reduce.sum_all(g_sum) / n } else { 0.0 };
    let gx_mean = reduce.sum_all(gx_sum) / n;
    let mut o = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| o[u] = s * (d[u] * w[u] - g_mean - (v[u] - m) * s * gx_mean) + e[u]);
    store8(&mut dx, i, o);
}

/// `e^x`: on the GPU one `ex2.approx.ftz` after a multiply (CUDA's `__expf`, which is also
/// what nvcc makes of PyTorch's `std::exp` in its softmax under its usual flags' cost: a few
/// instructions), on the host `std`'s.
#[inline(always)]
fn exp(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        x.fast_exp()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.exp()
    }
}

/// [`softmax_forward()`](crate::softmax_forward), one block per row: the row is read once
/// (maximum and sum from registers).
#[kernel(instances(f32, bf16, f16))]
pub fn softmax_forward_packed<T: Float>(x: &[T], mut out: DisjointChunks<T, 8>, _cols: u32) {
    let (i, at, _) = my_chunk();
    let mut v = load8(x, at, Load::EvictFirst);
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let mut local_max = v[0];
    unroll::<CHUNK>(|u| local_max = local_max.max(v[u]));
    let max = reduce.max_all(local_max);
    unroll::<CHUNK>(|u| v[u] = exp(v[u] - max));
    let scale = 1.0 / reduce.sum_all(sum8(v));
    unroll::<CHUNK>(|u| v[u] *= scale);
    store8(&mut out, i, v);
}

/// [`gelu_forward()`](crate::gelu_forward) over chunks of 8 (grid-stride); the host picks it
/// when the length is a multiple of 8.
#[kernel(instances(f32, bf16, f16))]
pub fn gelu_forward_packed<T: Float>(x: &[T], mut out: DisjointChunks<T, 8>) {
    for i in grid_stride(out.len()) {
        let mut v = load8(x, i.get() * CHUNK, Load::EvictFirst);
        unroll::<CHUNK>(|u| v[u] = gelu(v[u]));
        store8(&mut out, i, v);
    }
}

/// [`gelu_backward()`](crate::gelu_backward) over chunks of 8.
#[kernel(instances(f32, bf16, f16))]
pub fn gelu_backward_packed<T: Float>(x: &[T], dout: &[T], mut dx: DisjointChunks<T, 8>) {
    for i in grid_stride(dx.len()) {
        let (mut v, d) = (load8(x, i.get() * CHUNK, Load::EvictFirst), load8(dout, i.get() * CHUNK, Load::EvictFirst));
        unroll::<CHUNK>(|u| v[u] = gelu_derivative(v[u]) * d[u]);
        store8(&mut dx, i, v);
    }
}

/// [`norm_backward_weights_partial()`](crate::norm_backward_weights_partial) with 8 columns
/// per thread (16-byte loads of `dout` and `x`): thread `i = chunk * cols / 8 + c / 8` sums
/// rows `chunk * rows_per_chunk ..` (at most `rows_per_chunk`, in order) of columns `c .. c +
/// 8` into `partial_dweight` and `partial_dbias` (chunk `i` of 8 values each). `cols` is a
/// multiple of 8 (the host picks this kernel only then).
#[kernel(instances(f32, bf16, f16))]
#[allow(clippy::too_many_arguments)]
pub fn norm_backward_weights_partial_packed<T: Float>(
    dout: &[T],
    x: &[T],
    mean: &[f32],
    rstd: &[f32],
    mut partial_dweight: DisjointChunks<f32, 8>,
    mut partial_dbias: DisjointChunks<f32, 8>,
    rows: u32,
    cols: u32,
    rows_per_chunk: u32,
    centred: u32,
) {
    let per_row = (cols as usize / CHUNK).max(1);
    for i in grid_stride(partial_dweight.len()) {
        let (chunk, c) = (i.get() / per_row, (i.get() % per_row) * CHUNK);
        let first = chunk * rows_per_chunk as usize;
        let last = (first + rows_per_chunk as usize).min(rows as usize);
        let (mut dw, mut db) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
        let mut r = first;
        // Four rows' loads in flight at once, summed in row order.
        while r < last {
            let mut d = [[0.0f32; CHUNK]; 4];
            let mut xh = [[0.0f32; CHUNK]; 4];
            unroll::<4>(|k| {
                let row = r + k;
                if row < last {
                    let at = row * cols as usize + c;
                    let m = if centred != 0 { mean.get(row).copied().unwrap_or(0.0) } else { 0.0 };
                    let s = rstd.get(row).copied().unwrap_or(0.0);
                    d[k] = load8(dout, at, Load::EvictFirst);
                    let v = load8(x, at, Load::EvictFirst);
                    unroll::<CHUNK>(|u| xh[k][u] = (v[u] - m) * s);
                }
            });
            unroll::<4>(|k| {
                unroll::<CHUNK>(|u| {
                    dw[u] += d[k][u] * xh[k][u];
                    db[u] += d[k][u];
                })
            });
            r += 4;
        }
        store8::<f32>(&mut partial_dweight, i, dw);
        store8::<f32>(&mut partial_dbias, i, db);
    }
}

/// [`norm_backward_packed()`] and the first step of the weight gradients in one pass (llm.c's
/// fused layer-norm backward): block `b` of `G` takes rows `b, b + G, b + 2 G, ...` (a
/// grid-stride walk over `dx`'s chunks with `cols / 8` threads a block), writes each row's
/// `dx` as `norm_backward_packed` does, and thread `t` keeps the sums of `dout * xhat` and
/// `dout` of its 8 columns over those rows (in row order) in registers; at the end it writes
/// them as chunk `b * cols / 8 + t` of `partial_dweight` and `partial_dbias` (`G x cols`).
/// [`sum_column_pairs()`] then adds the `G` partial rows in order: deterministic for a given
/// `G`, and `dout` and `x` are read once (the two-kernel form reads them twice). Blocks of
/// at most 512 threads (`cols <= 4096`): the sixteen running sums, the row's values and their
/// addresses take about 120 registers a thread, and a cap of 64 (for 1024 threads) spills.
#[kernel(instances(f32, bf16, f16), launch_bounds(512, 1))]
#[allow(clippy::too_many_arguments)]
pub fn norm_backward_fused_packed<T: Float>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    mean: &[f32],
    rstd: &[f32],
    dresidual: &[T],
    mut dx: DisjointChunks<T, 8>,
    mut partial_dweight: DisjointChunks<f32, 8>,
    mut partial_dbias: DisjointChunks<f32, 8>,
    cols: u32,
    add_dresidual: u32,
    centred: u32,
) {
    let me = unique_index();
    let n = cols as f32;
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let (mut dw, mut db) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
    // Chunk `i` of the walk is row `blockIdx.x + k gridDim.x` (its k-th step), column `8
    // threadIdx.x`, for the launch the host makes; counted here, not divided out.
    let c = thread_idx_x() as usize * CHUNK;
    let mut row = block_idx_x() as usize;
    // Every thread of a block walks the same rows (the trip count depends on the block only),
    // so the reductions inside see the whole block.
    for i in grid_stride(dx.len()) {
        let at = i.get() * CHUNK;
        let m = if centred != 0 { mean.get(row).copied().unwrap_or(0.0) } else { 0.0 };
        let s = rstd.get(row).copied().unwrap_or(0.0);
        let (d, v) = (load8(dout, at, Load::EvictFirst), load8(x, at, Load::EvictFirst));
        let w = load8(weight, c, Load::EvictLast);
        let (mut g_sum, mut gx_sum) = (0.0f32, 0.0f32);
        let mut xhat = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            xhat[u] = (v[u] - m) * s;
            let g = d[u] * w[u];
            g_sum += g;
            gx_sum += g * xhat[u];
            dw[u] += d[u] * xhat[u];
            db[u] += d[u];
        });
        let g_mean = if centred != 0 { reduce.sum_all(g_sum) / n } else { 0.0 };
        let gx_mean = reduce.sum_all(gx_sum) / n;
        let e = if add_dresidual != 0 { load8(dresidual, at, Load::EvictFirst) } else { [0.0; CHUNK] };
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = s * (d[u] * w[u] - g_mean - xhat[u] * gx_mean) + e[u]);
        store8(&mut dx, i, o);
        row += grid_dim_x() as usize;
    }
    store8::<f32>(&mut partial_dweight, me, dw);
    store8::<f32>(&mut partial_dbias, me, db);
}

/// The second step of the norm backward: `out_a[c] = sum over k < chunks (in order) of
/// partial_a[k * cols + c]`, and the same for `b` (the weight's and the bias's gradients in
/// one launch); one thread per column, eight partial rows of each in flight.
#[kernel]
pub fn sum_column_pairs(partial_a: &[f32], partial_b: &[f32], mut out_a: DisjointSlice<f32>, mut out_b: DisjointSlice<f32>, chunks: u32, cols: u32) {
    for c in grid_stride((cols as usize).min(out_a.len())) {
        let (mut total_a, mut total_b) = (0.0f32, 0.0f32);
        let mut k = 0usize;
        while k < chunks as usize {
            let (mut a, mut b) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
            unroll::<CHUNK>(|u| {
                let at = (k + u) * cols as usize + c.get();
                if k + u < chunks as usize {
                    a[u] = partial_a.get(at).copied().unwrap_or(0.0);
                    b[u] = partial_b.get(at).copied().unwrap_or(0.0);
                }
            });
            unroll::<CHUNK>(|u| {
                total_a += a[u];
                total_b += b[u];
            });
            k += CHUNK;
        }
        if let Some(o) = out_a.get_mut(c) {
            *o = total_a;
        }
        if let Some(o) = out_b.get_mut(c) {
            *o = total_b;
        }
    }
}

/// [`silu_and_mul_forward()`](crate::silu_and_mul_forward) with 8 output columns per thread
/// (16-byte loads of the gate and the up projection, a 16-byte store): output chunk `i` is
/// row `i / (d / 8)`, columns `8 (i % (d / 8)) ..`. The host picks it when `d % 8 == 0` and
/// the chunks fit in `u32`; `chunks_per_row = d / 8`.
#[kernel(instances(f32, bf16, f16))]
pub fn silu_and_mul_forward_packed<T: Float>(input: &[T], mut out: DisjointChunks<T, 8>, chunks_per_row: NonZeroU32) {
    let d = chunks_per_row.get() as usize * CHUNK;
    for i in grid_stride(out.len()) {
        let chunk = i.get() as u32;
        let (row, c) = ((chunk / chunks_per_row) as usize, (chunk % chunks_per_row) as usize * CHUNK);
        let at = row * 2 * d + c;
        let (g, up) = (load8(input, at, Load::EvictFirst), load8(input, at + d, Load::EvictFirst));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = silu(g[u]) * up[u]);
        store8(&mut out, i, o);
    }
}

/// [`silu_and_mul_backward()`](crate::silu_and_mul_backward) with 8 columns per thread:
/// `dinput` chunk `i` is row `i / (2 d / 8)`; its first `d / 8` chunks are the gate's
/// gradient, the rest the up projection's. `chunks_per_row = d / 8`.
#[kernel(instances(f32, bf16, f16))]
pub fn silu_and_mul_backward_packed<T: Float>(input: &[T], dout: &[T], mut dinput: DisjointChunks<T, 8>, chunks_per_row: NonZeroU32) {
    let d = chunks_per_row.get() as usize * CHUNK;
    let width = chunks_per_row.saturating_mul(const { NonZeroU32::new(2).unwrap() });
    for i in grid_stride(dinput.len()) {
        let chunk = i.get() as u32;
        let (row, cc) = ((chunk / width) as usize, chunk % width);
        let is_gate = cc < chunks_per_row.get();
        let c = (if is_gate { cc } else { cc - chunks_per_row.get() }) as usize * CHUNK;
        let at = row * 2 * d + c;
        let (g, up, dy) = (load8(input, at, Load::EvictFirst), load8(input, at + d, Load::EvictFirst), load8(dout, row * d + c, Load::EvictFirst));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            let s = sigmoid(g[u]);
            o[u] = if is_gate { dy[u] * up[u] * s * (1.0 + g[u] * (1.0 - s)) } else { dy[u] * g[u] * s };
        });
        store8(&mut dinput, i, o);
    }
}

/// [`rotary_embedding()`](crate::rotary_embedding) with 8 consecutive elements per thread:
/// output chunk `i` lies in row `i / (head_dim / 8)` (a token's head) at column `c`; in the
/// first half of the rotated part it reads its own chunk and the one `rotary_dim / 2` later,
/// in the second half the one before, past `rotary_dim` it copies; `cos`/`sin` as two 16-byte
/// loads each. The host picks it when `head_dim % 8 == 0` and `rotary_dim % 16 == 0` and the
/// chunks fit in `u32`; `head_chunks = head_dim / 8`.
#[kernel(instances(f32, bf16, f16))]
#[allow(clippy::too_many_arguments)]
pub fn rotary_embedding_packed<T: Float>(
    x: &[T],
    positions: &[u32],
    cos: &[f32],
    sin: &[f32],
    mut out: DisjointChunks<T, 8>,
    head_chunks: NonZeroU32,
    heads: NonZeroU32,
    shape: RopeShape,
) {
    let half = (shape.rotary_dim / 2) as usize;
    let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
    for i in grid_stride(out.len()) {
        let chunk = i.get() as u32;
        let (row, c) = (chunk / head_chunks, (chunk % head_chunks) as usize * CHUNK);
        let token = (row / heads) as usize;
        let at = i.get() * CHUNK;
        let o = if c >= 2 * half {
            load8(x, at, Load::EvictFirst)
        } else {
            let (k, first) = if c < half { (c, true) } else { (c - half, false) };
            let pair = at - c + k;
            let (x1, x2) = (load8(x, pair, Load::EvictFirst), load8(x, pair + half, Load::EvictFirst));
            match positions.get(token) {
                Some(&p) if p < shape.max_positions => {
                    let t = p as usize * half + k;
                    let (cs, sn) = (load8(cos, t, Load::EvictLast), load8(sin, t, Load::EvictLast));
                    let mut o = [0.0f32; CHUNK];
                    unroll::<CHUNK>(|u| {
                        let sn = sign * sn[u];
                        o[u] = if first { x1[u] * cs[u] - x2[u] * sn } else { x2[u] * cs[u] + x1[u] * sn };
                    });
                    o
                }
                _ => [f32::NAN; CHUNK],
            }
        };
        store8(&mut out, i, o);
    }
}
