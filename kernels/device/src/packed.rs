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
use ferrocuda_device::global::{AtomicSlice, DisjointChunks, DisjointSlice, PerWarpRow, ThreadIndex, WarpRow, block_row, grid_stride, unique_index, warp_row};
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::{DeviceFloat, FastMath};
use ferrocuda_device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use ferrocuda_device::unroll::{rolled, unroll};
use ferrocuda_device::{block_scratch, kernel, warp};

use crate::{AdamWStep, CHUNK, Float, RopeShape, bf16, f16, gelu, gelu_derivative, sigmoid, silu};

/// 16 bytes, aligned to 16: the unit of one vector access (CUDA's `int4`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Pod, Zeroable, ferrocuda_device::LayoutKey)]
struct Vec16([u32; 4]);

/// Vector accesses that hold one chunk: 1 (`bf16`, `f16`) or 2 (`f32`).
const fn words<T>() -> usize {
    (CHUNK * core::mem::size_of::<T>()).div_ceil(16)
}

/// The 8 values of `x` at `at .. at + 8` as `f32` (zeros past the end): 16-byte loads when
/// the chunk is 16-byte aligned, element loads otherwise.
#[inline(always)]
pub(crate) fn load8<T: Float>(x: &[T], at: usize, hint: Load) -> [f32; CHUNK] {
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

/// One chunk of 8 values of `T` as read from memory, not yet widened to `f32`: 4 registers
/// for `bf16`/`f16` (8 for `f32`) where the widened chunk takes 8. A load whose value is
/// needed only after a block reduction is kept in this form, so the widening (which waits for
/// the load) comes after the reduction and the load stays in flight across its barriers.
#[derive(Clone, Copy, Default)]
struct Raw8([Vec16; 2]);

/// [`load8`] without the widening: the 8 values of `x` at `at .. at + 8` as they are stored
/// (zeros past the end: the bits of `0.0` in every element type).
#[inline(always)]
fn load8_raw<T: Float>(x: &[T], at: usize, hint: Load) -> Raw8 {
    let mut raw = Raw8::default();
    let Some(chunk) = x.get(at..at + CHUNK) else {
        let values: &mut [T] = bytemuck::cast_slice_mut(&mut raw.0[..words::<T>()]);
        unroll::<CHUNK>(|u| values[u] = x.get(at + u).copied().unwrap_or_default());
        return raw;
    };
    match bytemuck::try_cast_slice::<T, Vec16>(chunk) {
        Ok(vectors) if vectors.len() == words::<T>() => unroll::<2>(|k| {
            if k < words::<T>() {
                raw.0[k] = cache::load(&vectors[k], hint);
            }
        }),
        _ => {
            let values: &mut [T] = bytemuck::cast_slice_mut(&mut raw.0[..words::<T>()]);
            unroll::<CHUNK>(|u| values[u] = chunk[u]);
        }
    }
    raw
}

/// The values of a [`Raw8`] of `T` as `f32` (exact).
#[inline(always)]
fn widen8<T: Float>(raw: Raw8) -> [f32; CHUNK] {
    let values: &[T] = bytemuck::cast_slice(&raw.0[..words::<T>()]);
    let mut v = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| v[u] = values[u].to_f32());
    v
}

/// `v` rounded to `T` into `values[..8]`, two at a time ([`Float::pair_from_f32`]: one
/// `cvt.rn.bf16x2.f32` a pair for the half types; the same bits as eight `from_f32`s).
#[inline(always)]
fn narrow8<T: Float>(values: &mut [T], v: [f32; CHUNK]) {
    unroll::<{ CHUNK / 2 }>(|k| {
        let pair = T::pair_from_f32(v[2 * k], v[2 * k + 1]);
        if let Some(out) = values.get_mut(2 * k..2 * k + 2) {
            out.copy_from_slice(&pair);
        }
    });
}

/// Stores `v` (rounded to `T`) into this thread's chunk `i` of `out`: 16-byte stores when it
/// is aligned. Nothing past the last whole chunk.
#[inline(always)]
pub(crate) fn store8<T: Float>(out: &mut DisjointChunks<T, CHUNK>, i: ThreadIndex, v: [f32; CHUNK]) {
    let Some(chunk) = out.get_mut(i) else { return };
    let mut raw = [Vec16::default(); 2];
    {
        let values: &mut [T] = bytemuck::cast_slice_mut(&mut raw[..words::<T>()]);
        narrow8(values, v);
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

/// Stores `v0` then `v1` (rounded to `T`) into this thread's chunk `i` of 16 values of
/// `out`: 16-byte stores when it is aligned. Nothing past the last whole chunk.
#[inline(always)]
fn store16<T: Float>(out: &mut DisjointChunks<T, 16>, i: ThreadIndex, v0: [f32; CHUNK], v1: [f32; CHUNK]) {
    let Some(chunk) = out.get_mut(i) else { return };
    let mut raw = [Vec16::default(); 4];
    {
        let values: &mut [T] = bytemuck::cast_slice_mut(&mut raw[..2 * words::<T>()]);
        let (first, second) = values.split_at_mut(CHUNK);
        narrow8(first, v0);
        narrow8(second, v1);
    }
    match bytemuck::try_cast_slice_mut::<T, Vec16>(&mut chunk[..]) {
        Ok(vectors) if vectors.len() == 2 * words::<T>() => unroll::<4>(|k| {
            if k < 2 * words::<T>() {
                cache::store(&mut vectors[k], raw[k], Store::EvictFirst);
            }
        }),
        _ => {
            let values: &[T] = bytemuck::cast_slice(&raw[..2 * words::<T>()]);
            unroll::<16>(|u| chunk[u] = values[u]);
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

/// `(a, b)` as one `u64` (a in the low word): two sums through one block reduction.
#[inline(always)]
fn pack(a: f32, b: f32) -> u64 {
    a.to_bits() as u64 | ((b.to_bits() as u64) << 32)
}

/// The two `f32` of [`pack`].
#[inline(always)]
fn unpack(p: u64) -> (f32, f32) {
    (f32::from_bits(p as u32), f32::from_bits((p >> 32) as u32))
}

/// The block's sums of `a` and of `b`, in every thread, with one block reduction (one pair of
/// barriers where two `sum_all`s take two pairs). Every thread of the block must call it.
#[inline(always)]
fn sum_pair_all(reduce: &RuntimeBlockReduce<u64>, a: f32, b: f32) -> (f32, f32) {
    unpack(reduce.reduce_all_with_identity(pack(a, b), pack(0.0, 0.0), |p, q| {
        let ((a0, b0), (a1, b1)) = (unpack(p), unpack(q));
        pack(a0 + a1, b0 + b1)
    }))
}

/// `(shift, offset, rstd)` of the block's row: its mean is `shift + offset` (0 unless
/// `centred`) and `rstd = 1 / sqrt(variance + eps)`, from each
/// thread's chunk `v` (in registers, no second read) and one block reduction. Centred, the
/// sums are of `v - shift` and `(v - shift)^2` with `shift` one value of the row (the same in
/// every thread): the variance is `mean((v - shift)^2) - mean(v - shift)^2`, whose rounding
/// error is relative to `variance + (mean - shift)^2`, so a large common offset does not
/// cancel (it is subtracted before squaring), where the unshifted form would lose it all.
/// Normalise with `(v - shift) - offset`: exact where `v - mean` would carry the rounding of
/// a large mean.
/// PyTorch's Welford pass has the same one-reduction cost. Every thread of the block must
/// call it.
#[inline(always)]
fn block_statistics(v: [f32; CHUNK], cols: u32, centred: bool, shift: f32, eps: f32) -> (f32, f32, f32) {
    let n = cols as f32;
    if !centred {
        let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
        let mut squares = 0.0f32;
        unroll::<CHUNK>(|u| squares += v[u] * v[u]);
        return (0.0, 0.0, 1.0 / (reduce.sum_all(squares) / n + eps).sqrt());
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(u64));
    let (mut sum, mut squares) = (0.0f32, 0.0f32);
    unroll::<CHUNK>(|u| {
        let d = v[u] - shift;
        sum += d;
        squares += d * d;
    });
    let (sum, squares) = sum_pair_all(&reduce, sum, squares);
    let offset = sum / n;
    let variance = (squares / n - offset * offset).max(0.0);
    (shift, offset, 1.0 / (variance + eps).sqrt())
}

/// `round_T(a + b)` for each value: the fused forms' residual sum, as stored.
#[inline(always)]
fn add8<T: Float>(a: [f32; CHUNK], b: [f32; CHUNK]) -> [f32; CHUNK] {
    let mut h = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| h[u] = T::from_f32(a[u] + b[u]).to_f32());
    h
}

/// `((v - shift) - offset) * rstd * w (+ b)`, with `shift + offset` the mean (see
/// [`block_statistics`]).
#[inline(always)]
fn normalise(v: [f32; CHUNK], w: [f32; CHUNK], b: Option<[f32; CHUNK]>, stats: (f32, f32, f32)) -> [f32; CHUNK] {
    let mut o = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| o[u] = normalise1(v[u], w[u], b.map_or(0.0, |b| b[u]), stats));
    o
}

/// One value of [`normalise`] (`b` 0 for none): the element paths' arithmetic, the same as
/// the vector paths'.
#[inline(always)]
fn normalise1(v: f32, w: f32, b: f32, (shift, offset, rstd): (f32, f32, f32)) -> f32 {
    ((v - shift) - offset) * rstd * w + b
}

/// [`rmsnorm_forward()`](crate::rmsnorm_forward), one block per row, 8 columns per thread
/// (see the module docs for the launch).
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), launch_bounds(1024, 2))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_forward_packed<T: Float>(x: &[T], weight: &[T], mut out: DisjointChunks<T, 8>, mut rstd: DisjointSlice<f32, BlockRows>, cols: u32, eps: f32) {
    rmsnorm_row(x, weight, &mut out, &mut rstd, cols, eps);
}

/// [`rmsnorm_forward_packed()`] in blocks of exactly 96 threads (rows of 768 columns; the host picks it
/// there): under `reqntid(96)` the block's shape is a constant, so the reduction's run-time
/// tests of it fold away (issue 31).
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), reqntid(96))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_forward_packed_t96<T: Float>(
    x: &[T],
    weight: &[T],
    mut out: DisjointChunks<T, 8>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    rmsnorm_row(x, weight, &mut out, &mut rstd, cols, eps);
}

/// [`rmsnorm_forward_packed()`] in blocks of exactly 128 threads (rows of 1024 columns; the host picks it
/// there): under `reqntid(128)` the block's shape is a constant, so the reduction's run-time
/// tests of it fold away (issue 31).
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), reqntid(128))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_forward_packed_t128<T: Float>(
    x: &[T],
    weight: &[T],
    mut out: DisjointChunks<T, 8>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    rmsnorm_row(x, weight, &mut out, &mut rstd, cols, eps);
}

/// The body of the kernels above: this thread's 8 columns of its block's row.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn rmsnorm_row<T: Float>(x: &[T], weight: &[T], out: &mut DisjointChunks<T, 8>, rstd: &mut DisjointSlice<f32, BlockRows>, cols: u32, eps: f32) {
    let (i, at, c) = my_chunk();
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let rms = |squares: f32| 1.0 / (reduce.sum_all(squares) / cols as f32 + eps).sqrt();
    // One path per launch, as in `rmsnorm_forward_packed16`: the 16-byte loads are issued
    // with no element path merged into their registers (issue 31: at 96 threads a row, 768
    // columns, the merged paths' instructions before and after the loads sat on each row's
    // critical path, 0.90x nvcc's twin).
    let s = match (vectors(x), vectors(weight)) {
        (Some(xv), Some(wv)) => {
            let (v, w) = (widen8::<T>(vectors_raw::<T>(xv, at)), widen8::<T>(vectors_raw_hint::<T>(wv, c, Load::EvictLast)));
            let mut squares = 0.0f32;
            unroll::<CHUNK>(|u| squares = v[u].mul_add(v[u], squares));
            let s = rms(squares);
            store8(out, i, normalise(v, w, None, (0.0, 0.0, s)));
            s
        }
        _ => {
            let mut squares = 0.0f32;
            // The fast path's sum, step by step: an explicit `fma` each (the compiler fuses a
            // plain `a * a + s` differently in an unrolled chain and in a loop).
            rolled(CHUNK, |u| {
                let v = element(x, at + u);
                squares = v.mul_add(v, squares);
            });
            let s = rms(squares);
            if let Some(chunk) = out.get_mut(i) {
                rolled(CHUNK, |u| {
                    if let Some(o) = chunk.get_mut(u) {
                        *o = T::from_f32(normalise1(element(x, at + u), element(weight, c + u), 0.0, (0.0, 0.0, s)));
                    }
                });
            }
            s
        }
    };
    write_row_value(rstd, s);
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
    add_rmsnorm_row(x, residual, weight, &mut out, &mut sum, &mut rstd, cols, eps);
}

/// [`add_rmsnorm_forward_packed()`] in blocks of exactly 512 threads (rows of 4096 columns; the host picks it
/// there): under `reqntid(512)` the block's shape is a constant, so the reduction's run-time
/// tests of it fold away (issue 31).
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), reqntid(512))]
#[allow(clippy::too_many_arguments)]
pub fn add_rmsnorm_forward_packed_t512<T: Float>(
    x: &[T],
    residual: &[T],
    weight: &[T],
    mut out: DisjointChunks<T, 8>,
    mut sum: DisjointChunks<T, 8>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    add_rmsnorm_row(x, residual, weight, &mut out, &mut sum, &mut rstd, cols, eps);
}

/// The body of the kernels above: this thread's 8 columns of its block's row.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn add_rmsnorm_row<T: Float>(
    x: &[T],
    residual: &[T],
    weight: &[T],
    out: &mut DisjointChunks<T, 8>,
    sum: &mut DisjointChunks<T, 8>,
    rstd: &mut DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    let (i, at, c) = my_chunk();
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let rms = |squares: f32| 1.0 / (reduce.sum_all(squares) / cols as f32 + eps).sqrt();
    // One path per launch, as in `rmsnorm_forward_packed`: the three 16-byte loads issue
    // together. With `load8`'s alignment branch per load, the element path merged into `x`'s
    // registers widened them right after the load, so the residual's load left only once
    // `x` had arrived: two DRAM round trips in series (issue 31: 0.89x the twin on an H200,
    // session 14, which issues the three together).
    let s = match (vectors(x), vectors(residual), vectors(weight)) {
        (Some(xv), Some(rv), Some(wv)) => {
            let (a, b, q) = (vectors_raw::<T>(xv, at), vectors_raw::<T>(rv, at), vectors_raw_hint::<T>(wv, c, Load::EvictLast));
            let h = add8::<T>(widen8::<T>(a), widen8::<T>(b));
            let mut squares = 0.0f32;
            unroll::<CHUNK>(|u| squares = h[u].mul_add(h[u], squares));
            let s = rms(squares);
            store8(sum, i, h);
            store8(out, i, normalise(h, widen8::<T>(q), None, (0.0, 0.0, s)));
            s
        }
        _ => {
            // The fast path's values, element by element in rolled loops (the sum of squares
            // with an explicit `fma` a step, in the same order: the same bits).
            let h = |u: usize| T::from_f32(element(x, at + u) + element(residual, at + u)).to_f32();
            let mut squares = 0.0f32;
            rolled(CHUNK, |u| {
                let v = h(u);
                squares = v.mul_add(v, squares);
            });
            let s = rms(squares);
            if let Some(chunk) = sum.get_mut(i) {
                rolled(CHUNK, |u| {
                    if let Some(o) = chunk.get_mut(u) {
                        *o = T::from_f32(h(u));
                    }
                });
            }
            if let Some(chunk) = out.get_mut(i) {
                rolled(CHUNK, |u| {
                    if let Some(o) = chunk.get_mut(u) {
                        *o = T::from_f32(normalise1(h(u), element(weight, c + u), 0.0, (0.0, 0.0, s)));
                    }
                });
            }
            s
        }
    };
    write_row_value(rstd, s);
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
    // The row's first value (one address for the whole block: a broadcast) as the shift.
    let shift = x.get(at - c).map_or(0.0, |e| e.to_f32());
    let stats = block_statistics(v, cols, true, shift, eps);
    // Weight and bias after the statistics (L1/L2 hits): fewer registers live across the
    // reduction, so four blocks of 512 threads fit an SM (32 registers, the launch bounds).
    let (w, b) = (load8(weight, c, Load::EvictLast), load8(bias, c, Load::EvictLast));
    store8(&mut out, i, normalise(v, w, Some(b), stats));
    write_row_value(&mut mean, stats.0 + stats.1);
    write_row_value(&mut rstd, stats.2);
}

/// `(shift, offset, rstd)` of a layer-norm row (see [`block_statistics`]) from this thread's
/// sums of `v - shift` and `(v - shift)^2`, through one block reduction. Every thread of the
/// block must call it.
#[inline(always)]
fn centred_statistics(sum: f32, squares: f32, shift: f32, cols: u32, eps: f32) -> (f32, f32, f32) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(u64));
    let (sum, squares) = sum_pair_all(&reduce, sum, squares);
    let n = cols as f32;
    let offset = sum / n;
    let variance = (squares / n - offset * offset).max(0.0);
    (shift, offset, 1.0 / (variance + eps).sqrt())
}

/// Element `i` of `x` as `f32`, 0 past the end: the reads of the element-by-element paths.
#[inline(always)]
fn element<T: Float>(x: &[T], i: usize) -> f32 {
    x.get(i).map_or(0.0, |v| v.to_f32())
}

/// [`layernorm_forward()`](crate::layernorm_forward) with **16 columns a thread** (one block
/// per row of `cols / 16` threads, two 16-byte loads of `x` a thread): what keeps several rows
/// in flight on an SM. The 8-column form needs 40 registers a thread at 512 threads a row
/// (the reduction's temporaries, addresses and the shift do not shrink with the columns), so
/// only three rows of 4096 fit an SM's registers, against four for RMSNorm's 32; a cap of 32
/// spills. Here a row of 4096 is 256 threads of at most 48 registers (the launch bounds, as
/// nvcc's twin needs): five rows an SM, and a block reduction over 8 warps instead of 16. The
/// `f32` and `f16` instances ([`wide::layernorm_forward_packed16`]) hold more registers
/// (`f32`: twice the bytes a chunk) and keep a cap of 64 (four rows), which they fit without
/// spilling. The host takes it for `cols % 16 == 0` and `2048 <= cols <= 4096` (at most 256
/// threads: the launch bounds).
#[kernel(instances(bf16), cols(mean = 1, rstd = 1), launch_bounds(256, 5))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_packed16<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    out: DisjointChunks<T, 16>,
    mean: DisjointSlice<f32, BlockRows>,
    rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    layernorm16(x, weight, bias, out, mean, rstd, cols, eps);
}

/// [`layernorm_forward_packed16()`] in blocks of exactly 256 threads (rows of 4096 columns; the
/// host picks it there): under `reqntid(256)` the block's shape is a constant, so the
/// reduction's run-time tests of it fold away (issue 31).
#[kernel(instances(f32, bf16, f16), cols(mean = 1, rstd = 1), reqntid(256))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_packed16_t256<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    out: DisjointChunks<T, 16>,
    mean: DisjointSlice<f32, BlockRows>,
    rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    layernorm16(x, weight, bias, out, mean, rstd, cols, eps);
}

/// Instances for wider elements under other register caps than their 16-bit forms: the `f32` and
/// `f16` 16-column layer norm (a cap of 64), the `f32` packed rotary embedding (no cap).
pub mod wide {
    use super::*;

    /// [`layernorm_forward_packed16`](super::layernorm_forward_packed16) for `f32` and `f16`,
    /// at most 64 registers a thread (four blocks of 256 an SM): under the `bf16` instance's
    /// 48 they spill.
    #[kernel(instances(f32, f16), cols(mean = 1, rstd = 1), launch_bounds(256, 4))]
    #[allow(clippy::too_many_arguments)]
    pub fn layernorm_forward_packed16<T: Float>(
        x: &[T],
        weight: &[T],
        bias: &[T],
        out: DisjointChunks<T, 16>,
        mean: DisjointSlice<f32, BlockRows>,
        rstd: DisjointSlice<f32, BlockRows>,
        cols: u32,
        eps: f32,
    ) {
        super::layernorm16(x, weight, bias, out, mean, rstd, cols, eps);
    }

    /// [`rotary_embedding_packed`](super::rotary_embedding_packed) for `f32` (two 16-byte words a
    /// chunk of `x`), without the 16-bit instances' cap of 32 registers (it would spill).
    #[kernel(instances(f32), reqntid(256))]
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
        let dims = (head_chunks, heads, shape);
        let (Some(xv), Some(cv), Some(sv)) = (vectors(x), vectors(cos), vectors(sin)) else {
            return rotary_elements(x, positions, cos, sin, &mut out, dims);
        };
        rotary_walk(xv, cv, sv, positions, &mut out, dims);
    }
}

/// The body of the 16-column layer norm. Only `x`'s alignment is checked before its loads
/// (its two 16-byte loads behind one bounds check, issued together, then the shift: the three
/// in flight together); the weight's and bias's alignment after the statistics, where they
/// are read (L1/L2 hits, fewer registers live across the reduction). Issue 31: with every
/// operand's check ahead of `x`'s loads (about 70 instructions, branches on each) the loads
/// left at instruction 95, nvcc's twin's at 19; this form's at 50 ran 1.8% faster on an H200
/// (session 14). Every thread of the block must call it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn layernorm16<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    mut out: DisjointChunks<T, 16>,
    mut mean: DisjointSlice<f32, BlockRows>,
    mut rstd: DisjointSlice<f32, BlockRows>,
    cols: u32,
    eps: f32,
) {
    let i = unique_index();
    let (at, c) = (i.get() * 2 * CHUNK, thread_idx_x() as usize * 2 * CHUNK);
    // One path per launch for `x`: 16-byte accesses only, or (a view that is not 16-byte
    // aligned) element accesses only, in rolled loops that need fewer registers than the fast
    // path (merged per access, the element paths set the kernel's register count).
    let stats = match vectors(x) {
        Some(xv) => {
            let (r0, r1) = vectors_raw16::<T>(xv, at, Load::EvictFirst);
            // The row's first value (one address for the whole block: a broadcast) as the
            // shift, read after `x`'s loads so the three are in flight together (LLVM moves a
            // bounds-checked load's widening next to the load, so the order of the reads is
            // what counts: read first, its widening waited for it before `x`'s loads left).
            let shift = element(x, at - c);
            let (v0, v1) = (widen8::<T>(r0), widen8::<T>(r1));
            let (mut sum, mut squares) = (0.0f32, 0.0f32);
            unroll::<CHUNK>(|u| {
                let (d0, d1) = (v0[u] - shift, v1[u] - shift);
                sum += d0 + d1;
                squares += d0.mul_add(d0, d1 * d1);
            });
            let stats = centred_statistics(sum, squares, shift, cols, eps);
            match (vectors(weight), vectors(bias)) {
                (Some(wv), Some(bv)) => {
                    let table = |v: &[Vec16], at| vectors_raw_hint::<T>(v, at, Load::EvictLast);
                    let ((q0, q1), (p0, p1)) = ((table(wv, c), table(wv, c + CHUNK)), (table(bv, c), table(bv, c + CHUNK)));
                    let (w0, w1, b0, b1) = (widen8::<T>(q0), widen8::<T>(q1), widen8::<T>(p0), widen8::<T>(p1));
                    store16(&mut out, i, normalise(v0, w0, Some(b0), stats), normalise(v1, w1, Some(b1), stats));
                }
                _ => layernorm16_elements_out(x, weight, bias, &mut out, i, at, c, stats),
            }
            stats
        }
        None => {
            let shift = element(x, at - c);
            let (mut sum, mut squares) = (0.0f32, 0.0f32);
            // The sums in the fast path's order and form (an explicit `fma` per step: the
            // compiler fuses `a * a + b * b` by its own choice), so both paths give the same bits.
            rolled(CHUNK, |u| {
                let (d0, d1) = (element(x, at + u) - shift, element(x, at + CHUNK + u) - shift);
                sum += d0 + d1;
                squares += d0.mul_add(d0, d1 * d1);
            });
            let stats = centred_statistics(sum, squares, shift, cols, eps);
            layernorm16_elements_out(x, weight, bias, &mut out, i, at, c, stats);
            stats
        }
    };
    write_row_value(&mut mean, stats.0 + stats.1);
    write_row_value(&mut rstd, stats.2);
}

/// The 16-column layer norm's outputs element by element (`x`, the weight or the bias not
/// 16-byte aligned), from the row's statistics: `x` read again, in a rolled loop.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn layernorm16_elements_out<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    out: &mut DisjointChunks<T, 16>,
    i: ThreadIndex,
    at: usize,
    c: usize,
    stats: (f32, f32, f32),
) {
    if let Some(chunk) = out.get_mut(i) {
        rolled(2 * CHUNK, |e| {
            if let Some(o) = chunk.get_mut(e) {
                *o = T::from_f32(normalise1(element(x, at + e), element(weight, c + e), element(bias, c + e), stats));
            }
        });
    }
}

/// [`rmsnorm_forward()`](crate::rmsnorm_forward) with **16 columns a thread** (one block per
/// row of `cols / 16` threads), [`layernorm_forward_packed16()`]'s structure with a smaller
/// footprint: both 16-byte loads of `x` issued together (one alignment branch for the 32
/// bytes), kept as loaded (`Raw8`: 8 registers for 16 `bf16`) until the squares are summed,
/// the weight read after the block reduction (an L1/L2 hit). 48 registers (a cap of 40 spills
/// 8-16 bytes here, in the element-wise paths; nvcc's twin fits 40), so a row of 4096 is 256
/// threads and five rows fit an SM: 40 KiB of loads in flight per SM where the 8-column kernel
/// (one 16-byte load a thread, 512 threads a row, four rows an SM) has 32 KiB; and the block
/// reduction spans 8 warps instead of 16. The host takes it for `cols % 16 == 0` and `2048 <=
/// cols <= 8192` (128 to 512 threads).
#[kernel(instances(f32, bf16, f16), cols(rstd = 1), launch_bounds(512, 2))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_forward_packed16<T: Float>(x: &[T], weight: &[T], mut out: DisjointChunks<T, 16>, mut rstd: DisjointSlice<f32, BlockRows>, cols: u32, eps: f32) {
    let i = unique_index();
    let (at, c) = (i.get() * 2 * CHUNK, thread_idx_x() as usize * 2 * CHUNK);
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let rms = |squares: f32| 1.0 / (reduce.sum_all(squares) / cols as f32 + eps).sqrt();
    // One path per launch, as in `layernorm_forward_packed16`: merged per access, the
    // element paths set the register count (48 where nvcc's twin needs 40: two rows of 8192
    // an SM instead of three).
    let s = match (vectors(x), vectors(weight)) {
        (Some(xv), Some(wv)) => {
            let (r0, r1) = (vectors_raw::<T>(xv, at), vectors_raw::<T>(xv, at + CHUNK));
            let mut squares = 0.0f32;
            {
                let (v0, v1) = (widen8::<T>(r0), widen8::<T>(r1));
                unroll::<CHUNK>(|u| squares += v0[u].mul_add(v0[u], v1[u] * v1[u]));
            }
            let s = rms(squares);
            let table = |at| widen8::<T>(vectors_raw_hint::<T>(wv, at, Load::EvictLast));
            let (w0, w1) = (table(c), table(c + CHUNK));
            let stats = (0.0, 0.0, s);
            store16(&mut out, i, normalise(widen8::<T>(r0), w0, None, stats), normalise(widen8::<T>(r1), w1, None, stats));
            s
        }
        _ => {
            let mut squares = 0.0f32;
            rolled(CHUNK, |u| {
                let (v0, v1) = (element(x, at + u), element(x, at + CHUNK + u));
                squares += v0.mul_add(v0, v1 * v1);
            });
            let s = rms(squares);
            if let Some(chunk) = out.get_mut(i) {
                rolled(2 * CHUNK, |e| {
                    if let Some(o) = chunk.get_mut(e) {
                        *o = T::from_f32(normalise1(element(x, at + e), element(weight, c + e), 0.0, (0.0, 0.0, s)));
                    }
                });
            }
            s
        }
    };
    write_row_value(&mut rstd, s);
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
    let first = |a: &[T]| a.get(at - c).map_or(0.0, |e| e.to_f32());
    let shift = T::from_f32(first(x) + first(residual)).to_f32();
    let stats = block_statistics(h, cols, true, shift, eps);
    let (w, b) = (load8(weight, c, Load::EvictLast), load8(bias, c, Load::EvictLast));
    store8(&mut sum, i, h);
    store8(&mut out, i, normalise(h, w, Some(b), stats));
    write_row_value(&mut mean, stats.0 + stats.1);
    write_row_value(&mut rstd, stats.2);
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
    // Both sums through one reduction (one pair of barriers, not two).
    let reduce = RuntimeBlockReduce::new(block_scratch!(u64));
    let n = cols as f32;
    let (g_total, gx_total) = sum_pair_all(&reduce, g_sum, gx_sum);
    let g_mean = if centred != 0 { g_total / n } else { 0.0 };
    let gx_mean = gx_total / n;
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
    softmax_row(x, &mut out);
}

/// [`softmax_forward_packed()`] in blocks of exactly 512 threads (rows of 4096 columns; the
/// host picks it there): under `reqntid(512)` the block's shape is a constant, so the
/// reduction's run-time tests of it (`blockDim.y`/`.z`, the partial-warp paths, the warp
/// count) fold away (issue 31: the instructions a thread, not the bytes, set its speed).
#[kernel(instances(f32, bf16, f16), reqntid(512))]
pub fn softmax_forward_packed_t512<T: Float>(x: &[T], mut out: DisjointChunks<T, 8>, _cols: u32) {
    softmax_row(x, &mut out);
}

/// The body of [`softmax_forward_packed()`]: this thread's 8 columns of its block's row.
#[inline(always)]
fn softmax_row<T: Float>(x: &[T], out: &mut DisjointChunks<T, 8>) {
    let (i, at, _) = my_chunk();
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    // One path per launch (see `rmsnorm_forward_packed`): 16-byte loads with no element path
    // merged into them, or (a misaligned view) rolled element loops that read the row again
    // for each pass, with the same arithmetic in the same order.
    match vectors(x) {
        Some(xv) => {
            let mut v = widen8::<T>(vectors_raw::<T>(xv, at));
            let mut local_max = v[0];
            unroll::<CHUNK>(|u| local_max = local_max.max(v[u]));
            // The maximum and the sum in llm.c's 2 barriers (`max_all` then `sum_all`: 4).
            let (_, sum) = reduce.max_then_sum_all(local_max, |max| {
                unroll::<CHUNK>(|u| v[u] = exp(v[u] - max));
                sum8(v)
            });
            let scale = 1.0 / sum;
            unroll::<CHUNK>(|u| v[u] *= scale);
            store8(out, i, v);
        }
        None => {
            let mut local_max = element(x, at);
            rolled(CHUNK, |u| local_max = local_max.max(element(x, at + u)));
            let (max, sum) = reduce.max_then_sum_all(local_max, |max| {
                let mut sum = 0.0f32;
                rolled(CHUNK, |u| sum += exp(element(x, at + u) - max));
                sum
            });
            let scale = 1.0 / sum;
            if let Some(chunk) = out.get_mut(i) {
                rolled(CHUNK, |u| {
                    if let Some(o) = chunk.get_mut(u) {
                        *o = T::from_f32(exp(element(x, at + u) - max) * scale);
                    }
                });
            }
        }
    }
}

/// [`cross_entropy_backward()`](crate::cross_entropy_backward) with 8 columns a thread
/// (16-byte loads of the logits, 16-byte stores): chunk `i` of `dlogits` is row `i /
/// chunks_per_row`, columns `8 (i % chunks_per_row) ..`. The host picks it when `vocab % 8 ==
/// 0` and the chunks fit in `u32`; `chunks_per_row = vocab / 8`. The same arithmetic as the
/// element-wise kernel (and as [`cross_entropy_forward_backward()`](crate::cross_entropy_forward_backward)'s
/// gradient for a uniform `dlosses`).
#[kernel(instances(f32, bf16, f16), reqntid(256))]
pub fn cross_entropy_backward_packed<T: Float>(
    logits: &[T],
    targets: &[u32],
    lse: &[f32],
    dlosses: &[f32],
    mut dlogits: DisjointChunks<T, 8>,
    chunks_per_row: NonZeroU32,
) {
    let rows = (targets, lse, dlosses);
    match vectors(logits) {
        Some(v) => cross_entropy_backward_walk(|at| widen8::<T>(vectors_raw::<T>(v, at)), rows, &mut dlogits, chunks_per_row),
        None => cross_entropy_backward_walk(|at| load8(logits, at, Load::EvictFirst), rows, &mut dlogits, chunks_per_row),
    }
}

/// The loop of [`cross_entropy_backward_packed()`], the logits read by `load` (16-byte loads
/// only, or element loads only: one path per launch, not a branch per chunk whose merged
/// registers would lower the occupancy).
#[inline(always)]
fn cross_entropy_backward_walk<T: Float>(
    load: impl Fn(usize) -> [f32; CHUNK],
    (targets, lse, dlosses): (&[u32], &[f32], &[f32]),
    dlogits: &mut DisjointChunks<T, 8>,
    chunks_per_row: NonZeroU32,
) {
    let vocab = chunks_per_row.get().saturating_mul(CHUNK as u32);
    for i in grid_stride(dlogits.len()) {
        let chunk = i.get() as u32;
        let (row, c) = ((chunk / chunks_per_row) as usize, (chunk % chunks_per_row) * CHUNK as u32);
        let v = load(i.get() * CHUNK);
        let target = targets.get(row).copied().unwrap_or(crate::IGNORE_TARGET);
        let scale = crate::cross_entropy_scale(target, vocab, dlosses.get(row).copied().unwrap_or(0.0));
        let l = lse.get(row).copied().unwrap_or(0.0);
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            let hot = if c + u as u32 == target { 1.0 } else { 0.0 };
            o[u] = ((v[u] - l).exp() - hot) * scale;
        });
        store8(dlogits, i, o);
    }
}

/// [`gelu_forward()`](crate::gelu_forward) over chunks of 8 (grid-stride); the host picks it
/// when the length is a multiple of 8.
#[kernel(instances(f32, bf16, f16), reqntid(256))]
pub fn gelu_forward_packed<T: Float>(x: &[T], mut out: DisjointChunks<T, 8>) {
    match vectors(x) {
        Some(v) => gelu_walk(|at| widen8::<T>(vectors_raw::<T>(v, at)), &mut out),
        None => gelu_walk(|at| load8(x, at, Load::EvictFirst), &mut out),
    }
}

/// The loop of [`gelu_forward_packed()`], `x` read by `load` (one path per launch).
#[inline(always)]
fn gelu_walk<T: Float>(load: impl Fn(usize) -> [f32; CHUNK], out: &mut DisjointChunks<T, 8>) {
    for i in grid_stride(out.len()) {
        let mut v = load(i.get() * CHUNK);
        unroll::<CHUNK>(|u| v[u] = gelu(v[u]));
        store8(out, i, v);
    }
}

/// [`gelu_backward()`](crate::gelu_backward) over chunks of 8.
#[kernel(instances(f32, bf16, f16), reqntid(256))]
pub fn gelu_backward_packed<T: Float>(x: &[T], dout: &[T], mut dx: DisjointChunks<T, 8>) {
    match (vectors(x), vectors(dout)) {
        (Some(xv), Some(dv)) => gelu_backward_walk(|at| widen8::<T>(vectors_raw::<T>(xv, at)), |at| widen8::<T>(vectors_raw::<T>(dv, at)), &mut dx),
        _ => gelu_backward_walk(|at| load8(x, at, Load::EvictFirst), |at| load8(dout, at, Load::EvictFirst), &mut dx),
    }
}

/// The loop of [`gelu_backward_packed()`], the inputs read by `load_x` and `load_dout` (one
/// path per launch).
#[inline(always)]
fn gelu_backward_walk<T: Float>(load_x: impl Fn(usize) -> [f32; CHUNK], load_dout: impl Fn(usize) -> [f32; CHUNK], dx: &mut DisjointChunks<T, 8>) {
    for i in grid_stride(dx.len()) {
        let (mut v, d) = (load_x(i.get() * CHUNK), load_dout(i.get() * CHUNK));
        unroll::<CHUNK>(|u| v[u] = gelu_derivative(v[u]) * d[u]);
        store8(dx, i, v);
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

/// Chunk `at / 8` of a streamed input viewed as 16-byte vectors (the whole slice aligned), as
/// a [`Raw8`]: one or two 16-byte loads, zeros past the end. No element-by-element path, so
/// the vector registers are the chunk as they are (an element path merged in would split
/// them into 16-bit pieces right after the load, which waits for it).
#[inline(always)]
fn vectors_raw<T: Float>(v: &[Vec16], at: usize) -> Raw8 {
    vectors_raw_hint::<T>(v, at, Load::EvictFirst)
}

/// [`vectors_raw`] with the cache hint `hint`.
#[inline(always)]
fn vectors_raw_hint<T: Float>(v: &[Vec16], at: usize, hint: Load) -> Raw8 {
    let first = at / CHUNK * words::<T>();
    let mut raw = Raw8::default();
    unroll::<2>(|k| {
        if k < words::<T>()
            && let Some(word) = v.get(first + k)
        {
            raw.0[k] = cache::load(word, hint);
        }
    });
    raw
}

/// `a` as 16-byte vectors, if it is aligned to 16 bytes and a whole number of them.
#[inline(always)]
fn vectors<T: Float>(a: &[T]) -> Option<&[Vec16]> {
    bytemuck::try_cast_slice::<T, Vec16>(a).ok()
}

/// [`norm_backward_packed()`] and the first step of the weight gradients in one pass (llm.c's
/// fused layer-norm backward), for [`layernorm_backward_fused_packed()`] (`CENTRED`) and
/// [`rmsnorm_backward_fused_packed()`]: block `b` of `G` takes rows `b, b + G, b + 2 G, ...`
/// (a grid-stride walk over `dx`'s chunks with `cols / 8` threads a block), writes each row's
/// `dx` as `norm_backward_packed` does, and returns this thread's sums over those rows (in
/// row order) of `dout * xhat` and (`CENTRED`) `dout` for its 8 columns. When `dout`, `x` and
/// `dresidual` are 16-byte aligned (the usual case) they are read as vectors, else element by
/// element (the same walk, the same results).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn norm_backward_fused<T: Float, const CENTRED: bool>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    mean: &[f32],
    rstd: &[f32],
    dresidual: Option<&[T]>,
    dx: &mut DisjointChunks<T, 8>,
    cols: u32,
) -> ([f32; CHUNK], [f32; CHUNK]) {
    match (vectors(dout), vectors(x), dresidual.map(vectors)) {
        (Some(d), Some(v), None | Some(Some(_))) => {
            let e = dresidual.and_then(vectors::<T>);
            fused_walk::<T, CENTRED>(
                |at| vectors_raw::<T>(d, at),
                |at| vectors_raw::<T>(v, at),
                e.map(|e| move |at| vectors_raw::<T>(e, at)),
                (dout, x, weight, mean, rstd),
                dx,
                cols,
            )
        }
        _ => fused_walk::<T, CENTRED>(
            |at| load8_raw(dout, at, Load::EvictFirst),
            |at| load8_raw(x, at, Load::EvictFirst),
            dresidual.map(|e| move |at| load8_raw(e, at, Load::EvictFirst)),
            (dout, x, weight, mean, rstd),
            dx,
            cols,
        ),
    }
}

/// The walk of [`norm_backward_fused`], with the streamed inputs read by `load_dout`,
/// `load_x` and `load_dresidual` (chunk at element `at`, zeros past the end). The next row's
/// `dout`, `x` and statistics are loaded before this row's block reduction and kept unwidened
/// ([`Raw8`]), so one row's loads are always in flight across the barriers (the kernel runs
/// one block of 512 threads an SM: without this, DRAM waits during every reduction).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn fused_walk<T: Float, const CENTRED: bool>(
    load_dout: impl Fn(usize) -> Raw8,
    load_x: impl Fn(usize) -> Raw8,
    load_dresidual: Option<impl Fn(usize) -> Raw8>,
    (dout, x, weight, mean, rstd): (&[T], &[T], &[T], &[f32], &[f32]),
    dx: &mut DisjointChunks<T, 8>,
    cols: u32,
) -> ([f32; CHUNK], [f32; CHUNK]) {
    let n = cols as f32;
    let pair = RuntimeBlockReduce::new(block_scratch!(u64));
    let single = RuntimeBlockReduce::new(block_scratch!(f32));
    let (mut dw, mut db) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
    // Chunk `i` of the walk is row `blockIdx.x + k gridDim.x` (its k-th step), column `8
    // threadIdx.x`, for the launch the host makes; counted here, not divided out.
    let c = thread_idx_x() as usize * CHUNK;
    let blocks = grid_dim_x() as usize;
    // Elements between this block's consecutive rows (`gridDim.x` rows).
    let step = blocks * block_dim_x() as usize * CHUNK;
    let w = load8(weight, c, Load::EvictLast);
    let statistics = |row: usize| {
        let m = if CENTRED { mean.get(row).copied().unwrap_or(0.0) } else { 0.0 };
        (m, rstd.get(row).copied().unwrap_or(0.0))
    };
    // This thread's first chunk (`grid_stride`'s first index) and its row, `blockIdx.x`.
    let (first, mut row) = (unique_index().get() * CHUNK, block_idx_x() as usize);
    let mut next = (load_dout(first), load_x(first), statistics(row));
    // Every thread of a block walks the same rows (the trip count depends on the block only),
    // so the reductions inside see the whole block.
    for i in grid_stride(dx.len()) {
        let at = i.get() * CHUNK;
        let (d, v, (m, s)) = next;
        // The next row's values, in flight during this row's reduction; the one after it
        // towards L2 (no registers).
        next = (load_dout(at + step), load_x(at + step), statistics(row + blocks));
        if let (Some(d2), Some(v2)) = (dout.get(at + 2 * step), x.get(at + 2 * step)) {
            cache::prefetch_l2(d2);
            cache::prefetch_l2(v2);
        }
        let e = load_dresidual.as_ref().map(|load| load(at));
        let (d, v) = (widen8::<T>(d), widen8::<T>(v));
        let (mut g_sum, mut gx_sum) = (0.0f32, 0.0f32);
        let mut xhat = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            xhat[u] = (v[u] - m) * s;
            let g = d[u] * w[u];
            g_sum += g;
            gx_sum += g * xhat[u];
            dw[u] += d[u] * xhat[u];
            if CENTRED {
                db[u] += d[u];
            }
        });
        let (g_mean, gx_mean) = if CENTRED {
            // Both sums through one reduction (one pair of barriers, not two).
            let (g_total, gx_total) = sum_pair_all(&pair, g_sum, gx_sum);
            (g_total / n, gx_total / n)
        } else {
            (0.0, single.sum_all(gx_sum) / n)
        };
        let e = e.map_or([0.0; CHUNK], widen8::<T>);
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = s * (d[u] * w[u] - g_mean - xhat[u] * gx_mean) + e[u]);
        store8(dx, i, o);
        row += blocks;
    }
    (dw, db)
}

/// [`norm_backward_packed()`] and the first step of the weight gradients in one pass for layer
/// norm (llm.c's fused layer-norm backward): block `b` of `G` takes rows `b, b + G, b + 2 G,
/// ...` (a grid-stride walk over `dx`'s chunks with `cols / 8` threads a block), writes each
/// row's `dx`, and thread `t` keeps the sums of `dout * xhat` and `dout` of its 8 columns over
/// those rows (in row order) in registers, written at the end as chunk `b * cols / 8 + t` of
/// `partial_dweight` and `partial_dbias` (`G x cols`). The next row's `dout`, `x` and
/// statistics are loaded before this row's block reduction, so one row's loads are in flight
/// across its barriers; `dout`, `x` and `dresidual` are read as 16-byte vectors when all are
/// aligned, element by element otherwise (the same results). [`sum_column_pairs_split()`] then
/// adds the `G` partial rows in order: deterministic for a given `G`, and `dout` and `x` are
/// read once (the two-kernel form reads them twice). Blocks of at most 512 threads (`cols <=
/// 4096`): the running sums, two rows' values and their addresses take about 90-128 registers
/// a thread.
#[kernel(instances(f32, bf16, f16), launch_bounds(512, 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_fused_packed<T: Float>(
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
) {
    let dresidual = (add_dresidual != 0).then_some(dresidual);
    let (dw, db) = norm_backward_fused::<T, true>(dout, x, weight, mean, rstd, dresidual, &mut dx, cols);
    let me = unique_index();
    store8::<f32>(&mut partial_dweight, me, dw);
    store8::<f32>(&mut partial_dbias, me, db);
}

/// RMSNorm's fused backward pass, as [`layernorm_backward_fused_packed()`] without a mean:
/// `dx` of every row and this thread's sums of `dout * xhat` as chunk `b * cols / 8 + t` of
/// `partial_dweight` (`G x cols`), which [`sum_column_partials_split()`] adds up. No bias gradient: no `Σ dout`
/// sums (eight registers fewer than layer norm's), one `f32` block reduction a row (layer
/// norm's carries two sums in a `u64`).
#[kernel(instances(f32, bf16, f16), launch_bounds(512, 1))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward_fused_packed<T: Float>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    rstd: &[f32],
    dresidual: &[T],
    mut dx: DisjointChunks<T, 8>,
    mut partial_dweight: DisjointChunks<f32, 8>,
    cols: u32,
    add_dresidual: u32,
) {
    let dresidual = (add_dresidual != 0).then_some(dresidual);
    let (dw, _) = norm_backward_fused::<T, false>(dout, x, weight, rstd, rstd, dresidual, &mut dx, cols);
    store8::<f32>(&mut partial_dweight, unique_index(), dw);
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

/// [`sum_of_squares()`](crate::sum_of_squares) over chunks of 8 (16-byte loads, two chunks a
/// step of the grid-stride walk, so 32 bytes of `bf16` or 64 of `f32` in flight a thread),
/// then one block reduction and **one atomic add a block** (the element-wise kernel adds once
/// a warp: eight times as many same-address atomics, which L2 serialises). When `x` is
/// 16-byte aligned it is read as vectors only (no element path merged into the loaded
/// registers, which would make the second load wait for the first); otherwise element by
/// element. At most 32 registers (the launch bounds): eight blocks of 256 an SM, so the
/// host's 1024 blocks are all resident on a 132-SM GPU (no second, partial wave). The host
/// picks it when the length is a multiple of 8.
#[kernel(instances(f32, bf16, f16), launch_bounds(256, 8))]
pub fn sum_of_squares_packed<T: Float>(x: &[T], total: AtomicSlice<f32>) {
    let stride = grid_dim_x() as usize * block_dim_x() as usize;
    let first = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let mut sum = 0.0f32;
    match vectors(x) {
        Some(v) => {
            let chunks = x.len() / CHUNK;
            let mut i = first;
            while i < chunks {
                // The second chunk reads zeros past the end.
                let (a, b) = (vectors_raw::<T>(v, i * CHUNK), vectors_raw::<T>(v, (i + stride) * CHUNK));
                let (a, b) = (widen8::<T>(a), widen8::<T>(b));
                unroll::<CHUNK>(|u| sum += a[u] * a[u]);
                unroll::<CHUNK>(|u| sum += b[u] * b[u]);
                i += 2 * stride;
            }
        }
        None => {
            let mut i = first;
            while let Some(e) = x.get(i) {
                let e = e.to_f32();
                sum += e * e;
                i += stride;
            }
        }
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    if let Some(block_sum) = reduce.sum(sum)
        && !total.is_empty()
    {
        total.add(0, block_sum);
    }
}

/// This thread's chunk `i` of `out` as `f32` (zeros past the last whole chunk), read with
/// 16-byte loads when aligned: the read half of an in-place update.
#[inline(always)]
fn load_own8<T: Float>(out: &mut DisjointChunks<T, CHUNK>, i: ThreadIndex) -> [f32; CHUNK] {
    match out.get_mut(i) {
        Some(chunk) => load8(&chunk[..], 0, Load::EvictFirst),
        None => [0.0; CHUNK],
    }
}

/// [`adamw_step()`](crate::adamw_step) with 8 consecutive elements per thread: `params`,
/// `grads`, `m` and `v` each read with 16-byte loads (one for a `bf16` chunk, two for `f32`),
/// all issued before any arithmetic, and written back with 16-byte stores (PyTorch's fused
/// AdamW, one tensor). The host picks it when the length is a multiple of 8, with one thread
/// per chunk; the same arithmetic as the element-wise kernel, in `f32`.
#[kernel(instances(f32, bf16, f16), reqntid(256))]
pub fn adamw_step_packed<T: Float>(mut params: DisjointChunks<T, 8>, grads: &[T], mut m: DisjointChunks<f32, 8>, mut v: DisjointChunks<f32, 8>, hp: AdamWStep) {
    for i in grid_stride(params.len()) {
        let g = load8(grads, i.get() * CHUNK, Load::EvictFirst);
        let (p, m0, v0) = (load_own8(&mut params, i), load_own8(&mut m, i), load_own8(&mut v, i));
        let (mut p1, mut m1, mut v1) = ([0.0f32; CHUNK], [0.0f32; CHUNK], [0.0f32; CHUNK]);
        unroll::<CHUNK>(|u| {
            let g = g[u] * hp.grad_scale;
            m1[u] = hp.beta1 * m0[u] + (1.0 - hp.beta1) * g;
            v1[u] = hp.beta2 * v0[u] + (1.0 - hp.beta2) * g * g;
            let (mean, var) = (m1[u] / hp.beta1_correction, v1[u] / hp.beta2_correction);
            p1[u] = p[u] - hp.learning_rate * (mean / (var.sqrt() + hp.eps) + hp.weight_decay * p[u]);
        });
        store8::<f32>(&mut m, i, m1);
        store8::<f32>(&mut v, i, v1);
        store8(&mut params, i, p1);
    }
}

/// The column totals of `N` partial matrices (`chunks x cols` each) that this lane's warp
/// writes in the split column sums: warp `w` takes columns `4 w .. 4 w + 4`, lane `l = 4 s +
/// j` sums the partial rows `s, s + 8, s + 16, ...` (in that order, eight loads of each
/// matrix in flight) of column `4 w + j`, so one load of the warp reads eight rows of 16
/// contiguous bytes; then three `shfl.xor` steps add the eight slices (each step adds the same
/// two values in both lanes, so every lane gets the same bits). The order of the additions
/// depends on `chunks` only: deterministic. Every lane of the warp must call it.
#[inline(always)]
fn split_column_totals<const N: usize>(partials: [&[f32]; N], warp_row: usize, lane: usize, chunks: u32, cols: u32) -> [f32; N] {
    let (slice, c) = (lane / 4, warp_row * 4 + lane % 4);
    let mut totals = [0.0f32; N];
    // The trip count is the same in every lane (the shuffles below need the whole warp).
    let mut k = 0usize;
    while k < chunks as usize {
        let mut v = [[0.0f32; CHUNK]; N];
        unroll::<CHUNK>(|u| {
            let row = k + slice + 8 * u;
            if row < chunks as usize {
                let at = row * cols as usize + c;
                for a in 0..N {
                    v[a][u] = partials[a].get(at).copied().unwrap_or(0.0);
                }
            }
        });
        unroll::<CHUNK>(|u| {
            for a in 0..N {
                totals[a] += v[a][u];
            }
        });
        k += 8 * CHUNK;
    }
    unroll::<3>(|s| {
        let mask = 4u32 << s;
        for total in totals.iter_mut() {
            *total += warp::shuffle_xor(*total, mask);
        }
    });
    totals
}

/// Writes `value` as this lane's column of a `PerWarpRow` output of width 4 (lanes 0..4;
/// the others hold no column).
#[inline(always)]
fn write_warp_value(out: &mut PerWarpRow<f32>, me: WarpRow, value: f32) {
    if let Some(mut row) = out.row_mut(me)
        && let Some(o) = row.get_mut(0)
    {
        *o = value;
    }
}

/// [`sum_column_pairs()`] with eight threads a column, for `cols % 4 == 0` (the host's
/// condition): warp `w` takes columns `4 w .. 4 w + 4`, lane `l = 4 s + j` sums the partial
/// rows `s, s + 8, s + 16, ...` (in that order, eight loads in flight) of column `4 w + j`, so
/// one load of the warp reads eight rows of 16 contiguous bytes; then three `shfl.xor` steps
/// add the eight slices and lanes `0..4` write. Deterministic. `cols / 4` warps in all, where the
/// one-thread-a-column form runs `cols` threads, each walking every partial row with few
/// loads in flight (16 blocks for 4096 columns: a latency-bound tail).
#[kernel(cols(out_a = 4, out_b = 4))]
pub fn sum_column_pairs_split(partial_a: &[f32], partial_b: &[f32], mut out_a: PerWarpRow<f32>, mut out_b: PerWarpRow<f32>, chunks: u32, cols: u32) {
    let me = warp_row();
    if me.row() as usize >= cols as usize / 4 {
        return;
    }
    let [total_a, total_b] = split_column_totals([partial_a, partial_b], me.row() as usize, me.lane() as usize, chunks, cols);
    write_warp_value(&mut out_a, me, total_a);
    write_warp_value(&mut out_b, me, total_b);
}

/// [`sum_column_partials()`](crate::sum_column_partials()) with eight threads a column (one
/// partial matrix: RMSNorm's weight gradient), as [`sum_column_pairs_split()`] does for two;
/// for `cols % 4 == 0`.
#[kernel(cols(out = 4))]
pub fn sum_column_partials_split(partial: &[f32], mut out: PerWarpRow<f32>, chunks: u32, cols: u32) {
    let me = warp_row();
    if me.row() as usize >= cols as usize / 4 {
        return;
    }
    let [total] = split_column_totals([partial], me.row() as usize, me.lane() as usize, chunks, cols);
    write_warp_value(&mut out, me, total);
}

/// [`silu_and_mul_forward()`](crate::silu_and_mul_forward) with 8 output columns per thread
/// (16-byte loads of the gate and the up projection, a 16-byte store): output chunk `i` is
/// row `i / (d / 8)`, columns `8 (i % (d / 8)) ..`. The host picks it when `d % 8 == 0` and
/// the chunks fit in `u32`; `chunks_per_row = d / 8`.
#[kernel(instances(f32, bf16, f16), reqntid(256))]
pub fn silu_and_mul_forward_packed<T: Float>(input: &[T], mut out: DisjointChunks<T, 8>, chunks_per_row: NonZeroU32) {
    match vectors(input) {
        Some(v) => silu_and_mul_walk(|at| widen8::<T>(vectors_raw::<T>(v, at)), &mut out, chunks_per_row),
        None => silu_and_mul_walk(|at| load8(input, at, Load::EvictFirst), &mut out, chunks_per_row),
    }
}

/// The loop of [`silu_and_mul_forward_packed()`], `input` read by `load` (one path per launch).
#[inline(always)]
fn silu_and_mul_walk<T: Float>(load: impl Fn(usize) -> [f32; CHUNK], out: &mut DisjointChunks<T, 8>, chunks_per_row: NonZeroU32) {
    let d = chunks_per_row.get() as usize * CHUNK;
    for i in grid_stride(out.len()) {
        let chunk = i.get() as u32;
        let (row, c) = ((chunk / chunks_per_row) as usize, (chunk % chunks_per_row) as usize * CHUNK);
        let at = row * 2 * d + c;
        let (g, up) = (load(at), load(at + d));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = silu(g[u]) * up[u]);
        store8(out, i, o);
    }
}

/// [`silu_and_mul_backward()`](crate::silu_and_mul_backward) with 8 columns per thread:
/// `dinput` chunk `i` is row `i / (2 d / 8)`; its first `d / 8` chunks are the gate's
/// gradient, the rest the up projection's. `chunks_per_row = d / 8`.
#[kernel(instances(f32, bf16, f16), reqntid(256))]
pub fn silu_and_mul_backward_packed<T: Float>(input: &[T], dout: &[T], mut dinput: DisjointChunks<T, 8>, chunks_per_row: NonZeroU32) {
    match (vectors(input), vectors(dout)) {
        (Some(iv), Some(dv)) => {
            silu_and_mul_backward_walk(|at| widen8::<T>(vectors_raw::<T>(iv, at)), |at| widen8::<T>(vectors_raw::<T>(dv, at)), &mut dinput, chunks_per_row)
        }
        _ => silu_and_mul_backward_walk(|at| load8(input, at, Load::EvictFirst), |at| load8(dout, at, Load::EvictFirst), &mut dinput, chunks_per_row),
    }
}

/// The loop of [`silu_and_mul_backward_packed()`], the inputs read by `load_input` and
/// `load_dout` (one path per launch).
#[inline(always)]
fn silu_and_mul_backward_walk<T: Float>(
    load_input: impl Fn(usize) -> [f32; CHUNK],
    load_dout: impl Fn(usize) -> [f32; CHUNK],
    dinput: &mut DisjointChunks<T, 8>,
    chunks_per_row: NonZeroU32,
) {
    let d = chunks_per_row.get() as usize * CHUNK;
    let width = chunks_per_row.saturating_mul(const { NonZeroU32::new(2).unwrap() });
    for i in grid_stride(dinput.len()) {
        let chunk = i.get() as u32;
        let (row, cc) = ((chunk / width) as usize, chunk % width);
        let is_gate = cc < chunks_per_row.get();
        let c = (if is_gate { cc } else { cc - chunks_per_row.get() }) as usize * CHUNK;
        let at = row * 2 * d + c;
        let (g, up, dy) = (load_input(at), load_input(at + d), load_dout(row * d + c));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            let s = sigmoid(g[u]);
            o[u] = if is_gate { dy[u] * up[u] * s * (1.0 + g[u] * (1.0 - s)) } else { dy[u] * g[u] * s };
        });
        store8(dinput, i, o);
    }
}

/// [`rotary_embedding()`](crate::rotary_embedding) with 8 consecutive elements per thread:
/// output chunk `i` lies in row `i / (head_dim / 8)` (a token's head) at column `c`; in the
/// first half of the rotated part it reads its own chunk and the one `rotary_dim / 2` later,
/// in the second half the one before, past `rotary_dim` it copies; `cos`/`sin` as two 16-byte
/// loads each. The host picks it when `head_dim % 8 == 0` and `rotary_dim % 16 == 0` and the
/// chunks fit in `u32`; `head_chunks = head_dim / 8`.
///
/// At most 32 registers a thread (eight blocks of 256 an SM, as nvcc's twin): the walk's
/// latency chain (the position, then the tables) needs every warp an SM holds (issue 31,
/// session 16, one H200, 8192x32x128 bf16 on the library's grid: 0.984x the twin, from 0.78
/// at 40 registers; `rotary_trials` holds the forms measured beside it). The `f32` instance
/// ([`wide::rotary_embedding_packed`]: twice the bytes a chunk) has no cap.
#[kernel(instances(bf16, f16), launch_bounds(256, 8))]
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
    let dims = (head_chunks, heads, shape);
    // One path per launch: 16-byte accesses only, or (a view that is not 16-byte aligned)
    // element accesses only.
    let (Some(xv), Some(cv), Some(sv)) = (vectors(x), vectors(cos), vectors(sin)) else {
        return rotary_elements(x, positions, cos, sin, &mut out, dims);
    };
    rotary_walk(xv, cv, sv, positions, &mut out, dims);
}

/// [`rotary_walk`] element by element, for a launch whose `x`, `cos` or `sin` is not 16-byte
/// aligned: each output element is computed from its own loads and stored at once, in a
/// [`rolled`] loop, so this cold path needs no more registers than the 16-byte one (unrolled,
/// its 32 element loads in flight took 56 registers a thread, the kernel's count: 0.82x the
/// CUDA C++ twin). The same arithmetic, the same results.
#[inline(always)]
fn rotary_elements<T: Float>(
    x: &[T],
    positions: &[u32],
    cos: &[f32],
    sin: &[f32],
    out: &mut DisjointChunks<T, 8>,
    (head_chunks, heads, shape): (NonZeroU32, NonZeroU32, RopeShape),
) {
    let half = (shape.rotary_dim / 2) as usize;
    let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
    for i in grid_stride(out.len()) {
        let chunk = i.get() as u32;
        let (row, c) = (chunk / head_chunks, (chunk % head_chunks) as usize * CHUNK);
        let token = (row / heads) as usize;
        let at = i.get() * CHUNK;
        let table = match positions.get(token) {
            Some(&p) if p < shape.max_positions => Some(p as usize * half),
            _ => None,
        };
        let Some(values) = out.get_mut(i) else { continue };
        // Zeros past `x`'s end, NaN past the tables' (as past `max_positions`), as the 16-byte
        // path gives (never, in a launch the host checked).
        let value = |u: usize| -> f32 {
            if c >= 2 * half {
                return element(x, at + u);
            }
            let (k, first) = if c < half { (c, true) } else { (c - half, false) };
            let pair = at - c + k + u;
            match table {
                Some(t) => {
                    let (x1, x2) = (element(x, pair), element(x, pair + half));
                    let (Some(&cs), Some(&sn)) = (cos.get(t + k + u), sin.get(t + k + u)) else { return f32::NAN };
                    let sn = sign * sn;
                    if first { x1 * cs - x2 * sn } else { x2 * cs + x1 * sn }
                }
                None => f32::NAN,
            }
        };
        rolled(CHUNK, |u| {
            if let Some(v) = values.get_mut(u) {
                *v = T::from_f32(value(u));
            }
        });
    }
}

/// `n / d` for any `u32` `n` by a divisor fixed for a launch: `floor((2^32 - 1) / d)` worked
/// out once (one division), then a multiply-high and at most one correction a quotient, what
/// ptxas makes of a division it sees is loop-invariant (it did not for the rotary's divisions:
/// their reciprocals were worked out again in every step of the loop).
#[derive(Clone, Copy)]
struct Divider {
    d: u32,
    m: u32,
}

impl Divider {
    #[inline(always)]
    fn new(d: NonZeroU32) -> Self {
        Divider { d: d.get(), m: u32::MAX / d.get() }
    }

    /// `n / d`. With `m = (2^32 - 1 - e) / d` (`0 <= e < d`), `n m / 2^32 = n / d - n (1 + e) /
    /// (d 2^32)` lies in `(n / d - 1, n / d]`, so `mulhi(n, m)` is the quotient or one less,
    /// and `n - q d >= d` tells which.
    #[inline(always)]
    fn div(self, n: u32) -> u32 {
        let q = ((n as u64 * self.m as u64) >> 32) as u32;
        if n.wrapping_sub(q.wrapping_mul(self.d)) >= self.d { q + 1 } else { q }
    }
}

/// The 16-byte loop of [`rotary_embedding_packed()`] (`x`, `cos`, `sin` viewed as vectors).
/// Each step reads its token's position first (behind one multiply-high, [`Divider`]), then
/// `x`'s two chunks, then (once the position is in) the tables' two chunks of 8 `f32` behind
/// one bounds check for all four 16-byte words (the tables cut to one length a launch), as in
/// nvcc's twin. Every load is addressed from the chunk's `u32` index (widened where it is
/// used), not from the loop's `usize` index: from that, LLVM's loop strength reduction made a
/// per-thread base address for `x`'s two chunks and the output, carried across steps (six
/// registers: 40 a thread, 36 without them; issue 31, session 16).
#[inline(always)]
fn rotary_walk<T: Float>(
    xv: &[Vec16],
    cv: &[Vec16],
    sv: &[Vec16],
    positions: &[u32],
    out: &mut DisjointChunks<T, 8>,
    (head_chunks, heads, shape): (NonZeroU32, NonZeroU32, RopeShape),
) {
    let half = shape.rotary_dim / 2 / CHUNK as u32;
    let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
    let (cc, sc) = (cv.as_chunks::<2>().0, sv.as_chunks::<2>().0);
    let tables = cc.len().min(sc.len());
    let (cc, sc) = (&cc[..tables], &sc[..tables]);
    let (by_row, by_token) = (Divider::new(head_chunks), Divider::new(head_chunks.saturating_mul(heads)));
    for i in grid_stride(out.len()) {
        let chunk = i.get() as u32;
        let position = positions.get(by_token.div(chunk) as usize).copied().unwrap_or(u32::MAX);
        let c = chunk - by_row.div(chunk) * head_chunks.get();
        let o = if c >= 2 * half {
            widen8::<T>(vector_chunk::<T>(xv, chunk as usize))
        } else {
            let (k, first) = if c < half { (c, true) } else { (c - half, false) };
            // `pair <= chunk`: no wrap.
            let pair = (chunk - c + k) as usize;
            let (r1, r2) = (vector_chunk::<T>(xv, pair), vector_chunk::<T>(xv, pair + half as usize));
            let t = position as usize * half as usize + k as usize;
            if position < shape.max_positions && t < tables {
                let (c2, s2) = (&cc[t], &sc[t]);
                let rc = Raw8([cache::load(&c2[0], Load::EvictLast), cache::load(&c2[1], Load::EvictLast)]);
                let rs = Raw8([cache::load(&s2[0], Load::EvictLast), cache::load(&s2[1], Load::EvictLast)]);
                let (x1, x2, cs, sn) = (widen8::<T>(r1), widen8::<T>(r2), widen8::<f32>(rc), widen8::<f32>(rs));
                let mut o = [0.0f32; CHUNK];
                unroll::<CHUNK>(|u| {
                    let sn = sign * sn[u];
                    o[u] = if first { x1[u] * cs[u] - x2[u] * sn } else { x2[u] * cs[u] + x1[u] * sn };
                });
                o
            } else {
                [f32::NAN; CHUNK]
            }
        };
        store8(out, i, o);
    }
}

/// The 16-byte loop of [`rotary_embedding_packed()`] before session 16 (`rotary_trials` times
/// it): the same steps as [`rotary_walk`], its loads addressed from the loop's `usize` index.
/// Each step reads its token's position first (behind one multiply-high, [`Divider`]), then
/// `x`'s two chunks, then (once the position is in) the tables' two chunks of 8 `f32` behind
/// one bounds check for all four 16-byte words (session 15: 183 -> 159 SASS instructions a
/// step; 40 registers a thread).
#[inline(always)]
fn rotary_walk_s15<T: Float>(
    xv: &[Vec16],
    cv: &[Vec16],
    sv: &[Vec16],
    positions: &[u32],
    out: &mut DisjointChunks<T, 8>,
    (head_chunks, heads, shape): (NonZeroU32, NonZeroU32, RopeShape),
) {
    // In chunks of 8 elements: the rotated half (`rotary_dim % 16 == 0`, the host's choice).
    let half = (shape.rotary_dim / 2) as usize / CHUNK;
    let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
    // The tables as chunks of 8 `f32` (two 16-byte words), cut to their common length once a
    // launch, so that one bounds check a step covers all four words, and indexed by chunk, so
    // that no element index is divided back (issue 31, session 15: a range check and a zeroed
    // default a table and the index shifts were 22 of the step's 183 SASS instructions, against
    // the twin's 146).
    let (cc, sc) = (cv.as_chunks::<2>().0, sv.as_chunks::<2>().0);
    let tables = cc.len().min(sc.len());
    let (cc, sc) = (&cc[..tables], &sc[..tables]);
    // The token of chunk `c` is `c / (head_chunks heads)` (= `(c / head_chunks) / heads` for
    // any chunk below 2^32 - 1, saturated or not).
    let (by_row, by_token) = (Divider::new(head_chunks), Divider::new(head_chunks.saturating_mul(heads)));
    for i in grid_stride(out.len()) {
        let chunk = i.get() as u32;
        // No position (never, in a launch the host checked) reads as `u32::MAX`, which no
        // `max_positions` exceeds: NaN, as the element path gives.
        let position = positions.get(by_token.div(chunk) as usize).copied().unwrap_or(u32::MAX);
        // The chunk's column, in chunks.
        let c = (chunk - by_row.div(chunk) * head_chunks.get()) as usize;
        let o = if c >= 2 * half {
            widen8::<T>(vector_chunk::<T>(xv, i.get()))
        } else {
            let (k, first) = if c < half { (c, true) } else { (c - half, false) };
            let pair = i.get() - c + k;
            let (r1, r2) = (vector_chunk::<T>(xv, pair), vector_chunk::<T>(xv, pair + half));
            // The tables' chunk, behind one bounds check for its four 16-byte words; past the
            // tables (never, in a launch the host checked) NaN, as past `max_positions`.
            let t = position as usize * half + k;
            if position < shape.max_positions && t < tables {
                let (c2, s2) = (&cc[t], &sc[t]);
                let rc = Raw8([cache::load(&c2[0], Load::EvictLast), cache::load(&c2[1], Load::EvictLast)]);
                let rs = Raw8([cache::load(&s2[0], Load::EvictLast), cache::load(&s2[1], Load::EvictLast)]);
                let (x1, x2, cs, sn) = (widen8::<T>(r1), widen8::<T>(r2), widen8::<f32>(rc), widen8::<f32>(rs));
                let mut o = [0.0f32; CHUNK];
                unroll::<CHUNK>(|u| {
                    let sn = sign * sn[u];
                    o[u] = if first { x1[u] * cs[u] - x2[u] * sn } else { x2[u] * cs[u] + x1[u] * sn };
                });
                o
            } else {
                [f32::NAN; CHUNK]
            }
        };
        store8(out, i, o);
    }
}

/// Chunk `chunk` (8 values) of `v` (16-byte vectors), as loaded (`evict_first`): [`vectors_raw`]
/// by chunk index, so that no element index is divided back; zeros past the end.
#[inline(always)]
fn vector_chunk<T: Float>(v: &[Vec16], chunk: usize) -> Raw8 {
    let first = chunk * words::<T>();
    let mut raw = Raw8::default();
    unroll::<2>(|k| {
        if k < words::<T>()
            && let Some(word) = v.get(first + k)
        {
            raw.0[k] = cache::load(word, Load::EvictFirst);
        }
    });
    raw
}

/// The two chunks of 16 values of `v` (16-byte vectors) at element `at` (a multiple of 16),
/// behind one bounds check for the pair, as loaded.
#[inline(always)]
fn vectors_raw16<T: Float>(v: &[Vec16], at: usize, hint: Load) -> (Raw8, Raw8) {
    let first = at / CHUNK * words::<T>();
    let (mut a, mut b) = (Raw8::default(), Raw8::default());
    if let Some(pair) = v.get(first..first + 2 * words::<T>()) {
        unroll::<2>(|k| {
            if k < words::<T>() {
                a.0[k] = cache::load(&pair[k], hint);
                b.0[k] = cache::load(&pair[words::<T>() + k], hint);
            }
        });
    }
    (a, b)
}

/// Issue 31, session 16: the forms of [`rotary_embedding_packed()`](crate::packed::rotary_embedding_packed())
/// timed beside it and nvcc's twin (`bench_rows`, `BENCH_ROWS_VARIANTS=rotary`;
/// `bench/results/s16-attn/`), `bf16` only, each with the library's arithmetic and results. One
/// H200, 8192x32x128 on the library's grid (4096 blocks of 256), twin/ours: the library (the
/// `u32`-addressed walk under 32 registers) 0.984, `rotary_embedding_packed_u32` (the same
/// walk, 36 registers: six blocks an SM) 0.930, `rotary_embedding_packed_s14` (commit 1cf277f,
/// 40 registers) 0.895, `rotary_embedding_packed_s15` (session 15's walk, 40 registers) 0.781,
/// and that walk under 32 registers (24 bytes spilled a thread; not kept: the packed kernels do
/// not spill) 0.817. So session 15's walk was a regression (0.895 -> 0.781 on the same grid),
/// and the registers, not the instructions, set the gap: 32 registers let eight blocks of 256
/// onto an SM (2048 threads) against six at 36-40, and the walk's latency chain (the position,
/// then the tables) needs the warps.
pub mod rotary_trials {
    use super::*;

    /// Session 15's walk (`rotary_walk_s15`), as the library ran it before session 16.
    #[kernel(instances(bf16), reqntid(256))]
    #[allow(clippy::too_many_arguments)]
    pub fn rotary_embedding_packed_s15<T: Float>(
        x: &[T],
        positions: &[u32],
        cos: &[f32],
        sin: &[f32],
        mut out: DisjointChunks<T, 8>,
        head_chunks: NonZeroU32,
        heads: NonZeroU32,
        shape: RopeShape,
    ) {
        let dims = (head_chunks, heads, shape);
        let (Some(xv), Some(cv), Some(sv)) = (vectors(x), vectors(cos), vectors(sin)) else {
            return rotary_elements(x, positions, cos, sin, &mut out, dims);
        };
        rotary_walk_s15(xv, cv, sv, positions, &mut out, dims);
    }

    /// The library's walk (`rotary_walk`) without the register cap (`reqntid(256)`: 36
    /// registers, six blocks of 256 an SM).
    #[kernel(instances(bf16), reqntid(256))]
    #[allow(clippy::too_many_arguments)]
    pub fn rotary_embedding_packed_u32<T: Float>(
        x: &[T],
        positions: &[u32],
        cos: &[f32],
        sin: &[f32],
        mut out: DisjointChunks<T, 8>,
        head_chunks: NonZeroU32,
        heads: NonZeroU32,
        shape: RopeShape,
    ) {
        let dims = (head_chunks, heads, shape);
        let (Some(xv), Some(cv), Some(sv)) = (vectors(x), vectors(cos), vectors(sin)) else {
            return rotary_elements(x, positions, cos, sin, &mut out, dims);
        };
        rotary_walk(xv, cv, sv, positions, &mut out, dims);
    }

    /// The walk of commit 1cf277f (before session 15; 40 registers), to tell whether session
    /// 15's change was a regression.
    #[kernel(instances(bf16), reqntid(256))]
    #[allow(clippy::too_many_arguments)]
    pub fn rotary_embedding_packed_s14<T: Float>(
        x: &[T],
        positions: &[u32],
        cos: &[f32],
        sin: &[f32],
        mut out: DisjointChunks<T, 8>,
        head_chunks: NonZeroU32,
        heads: NonZeroU32,
        shape: RopeShape,
    ) {
        let dims = (head_chunks, heads, shape);
        let (Some(xv), Some(cv), Some(sv)) = (vectors(x), vectors(cos), vectors(sin)) else {
            return rotary_elements(x, positions, cos, sin, &mut out, dims);
        };
        rotary_walk_s14(xv, cv, sv, positions, &mut out, dims);
    }

    /// The walk of commit 1cf277f (before session 15), as it was.
    #[inline(always)]
    fn rotary_walk_s14<T: Float>(
        xv: &[Vec16],
        cv: &[Vec16],
        sv: &[Vec16],
        positions: &[u32],
        out: &mut DisjointChunks<T, 8>,
        (head_chunks, heads, shape): (NonZeroU32, NonZeroU32, RopeShape),
    ) {
        let half = (shape.rotary_dim / 2) as usize;
        let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
        let (by_row, by_token) = (Divider::new(head_chunks), Divider::new(head_chunks.saturating_mul(heads)));
        for i in grid_stride(out.len()) {
            let chunk = i.get() as u32;
            let position = positions.get(by_token.div(chunk) as usize).copied().unwrap_or(u32::MAX);
            let c = (chunk - by_row.div(chunk) * head_chunks.get()) as usize * CHUNK;
            let at = i.get() * CHUNK;
            let o = if c >= 2 * half {
                widen8::<T>(vectors_raw::<T>(xv, at))
            } else {
                let (k, first) = if c < half { (c, true) } else { (c - half, false) };
                let pair = at - c + k;
                let (r1, r2) = (vectors_raw::<T>(xv, pair), vectors_raw::<T>(xv, pair + half));
                if position < shape.max_positions {
                    let t = position as usize * half + k;
                    let (rc, rs) = (vectors_raw_whole::<f32>(cv, t, Load::EvictLast), vectors_raw_whole::<f32>(sv, t, Load::EvictLast));
                    let (x1, x2, cs, sn) = (widen8::<T>(r1), widen8::<T>(r2), widen8::<f32>(rc), widen8::<f32>(rs));
                    let mut o = [0.0f32; CHUNK];
                    unroll::<CHUNK>(|u| {
                        let sn = sign * sn[u];
                        o[u] = if first { x1[u] * cs[u] - x2[u] * sn } else { x2[u] * cs[u] + x1[u] * sn };
                    });
                    o
                } else {
                    [f32::NAN; CHUNK]
                }
            };
            store8(out, i, o);
        }
    }

    /// One chunk of `v` at element `at`, its words behind one bounds check (commit 1cf277f).
    #[inline(always)]
    fn vectors_raw_whole<T: Float>(v: &[Vec16], at: usize, hint: Load) -> Raw8 {
        let first = at / CHUNK * words::<T>();
        let mut raw = Raw8::default();
        if let Some(chunk) = v.get(first..first + words::<T>()) {
            unroll::<2>(|k| {
                if k < words::<T>() {
                    raw.0[k] = cache::load(&chunk[k], hint);
                }
            });
        }
        raw
    }
}
