//! The `#[kernel]`s of `ferrocuda-kernels`, compiled to PTX at build time.
//!
//! Every kernel is generic over the element type ([`Float`]: `f32`, `bf16`, `f16`) and built
//! once per type (`rmsnorm_forward_f32`, `rmsnorm_forward_bf16`, ...); arithmetic is in `f32`
//! whatever the storage type. The kernels are safe: their outputs are the kernel model's
//! disjoint outputs (`PerWarpRow` for row kernels, one warp per row; `DisjointSlice` for
//! element-wise ones; `DisjointChunks<T, 8>` and `BlockRows` for the packed ones), so no
//! launch can race. The host crate `ferrocuda-kernels` checks every
//! shape before it launches them; call them through it.
//!
//! Row kernels come in two forms. The [`packed`] ones (a block per row, 8 consecutive columns
//! per thread, 16-byte accesses, the row read once) serve widths that are multiples of 8 from
//! 256 to 8192, and GELU over lengths that are multiples of 8. The others, in this module, use
//! one warp per row: lane `l` handles columns `l, l + 32, ...`, and row statistics are warp
//! shuffles; correct for any width, fast for a few thousand columns, slower for very wide rows
//! (a vocabulary of 50k: cross-entropy is still one of them).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use core::num::{NonZeroU32, NonZeroU64};

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{AtomicSlice, DisjointSlice, PerWarpRow, ThreadIndex, WarpRow, grid_stride, warp_row};
use ferrocuda_device::half::{F32ToHalf, HalfFloat};
pub use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::unroll::unroll;
// `DeviceFloat` gives `sqrt`/`exp`/`ln`/`tanh`/`mul_add` on the GPU; the host has `std`'s.
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::DeviceFloat;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::math::FastMath;
use ferrocuda_device::{kernel, warp};

pub mod attention;
pub mod attention_backward;
pub mod packed;

ferrocuda_device::embed_kernels!();

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::bf16 {}
    impl Sealed for super::f16 {}
}

/// A storage type of the kernels: `f32`, `bf16` or `f16` (sealed). Values are widened to
/// `f32` for arithmetic and rounded to nearest even once when stored.
pub trait Float: Pod + Default + sealed::Sealed {
    /// The value as an `f32` (exact).
    fn to_f32(self) -> f32;
    /// `value` rounded to this type (to nearest, ties to even).
    fn from_f32(value: f32) -> Self;
    /// `[a, b]` rounded to this type, as two consecutive elements: the bits of two
    /// [`from_f32`](Self::from_f32)s, in one `cvt.rn.bf16x2.f32` (`.f16x2`) for the half
    /// types on sm_80+ (what nvcc makes of `__floats2bfloat162_rn`), where two `from_f32`s
    /// are two conversions and a pack.
    #[inline(always)]
    fn pair_from_f32(a: f32, b: f32) -> [Self; 2] {
        [Self::from_f32(a), Self::from_f32(b)]
    }
}

impl Float for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(value: f32) -> f32 {
        value
    }
}

impl Float for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self.widen()
    }
    #[inline(always)]
    fn from_f32(value: f32) -> bf16 {
        value.to_bf16()
    }
    #[inline(always)]
    fn pair_from_f32(a: f32, b: f32) -> [bf16; 2] {
        bytemuck::cast(ferrocuda_device::half::Bf16x2::from_f32s(a, b))
    }
}

impl Float for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self.widen()
    }
    #[inline(always)]
    fn from_f32(value: f32) -> f16 {
        value.to_f16()
    }
    #[inline(always)]
    fn pair_from_f32(a: f32, b: f32) -> [f16; 2] {
        bytemuck::cast(ferrocuda_device::half::F16x2::from_f32s(a, b))
    }
}

/// Values a lane handles at once: loads of a chunk are issued together (eight in flight per
/// lane instead of one), which is what lets a warp per row approach the memory bandwidth.
pub(crate) const CHUNK: usize = 8;

/// Row `row` of a row-major matrix with `cols` columns, if it lies inside `x`.
#[inline(always)]
pub(crate) fn row_of<T>(x: &[T], row: u32, cols: u32) -> Option<&[T]> {
    let start = row as usize * cols as usize;
    x.get(start..start + cols as usize)
}

/// This lane's values at columns `lane + 32 (j + u)`, `u < CHUNK`, as `f32`; `fill` past the
/// row's end. The loads are independent, so all are in flight together. Columns are `u32`
/// (a row has at most [`MAX_COLS`] of them; `j` from [`chunks`]), so
/// each is one 32-bit add and compare where `usize` took two instructions for each (issue 31:
/// cross-entropy, 8 values a lane a step, at 0.92x its CUDA C++ twin, which uses `unsigned`).
#[inline(always)]
pub(crate) fn load_chunk<T: Float>(row: &[T], lane: u32, j: u32, fill: f32) -> [f32; CHUNK] {
    let mut v = [fill; CHUNK];
    unroll::<CHUNK>(|u| {
        if let Some(x) = row.get(column(lane, j, u) as usize) {
            v[u] = x.to_f32();
        }
    });
    v
}

/// The largest row width of the warp-per-row kernels: a lane's last chunk reaches up to 255
/// columns past the row's end, and those columns must not wrap around `u32` (a wrapped column
/// would be a real one: a wrong value, though never an access out of bounds). The host
/// refuses wider rows.
pub const MAX_COLS: u32 = u32::MAX - 255;

/// Column `lane + 32 (j + u)` (wrapping: past [`MAX_COLS`] a column can wrap, see there).
#[inline(always)]
pub(crate) fn column(lane: u32, j: u32, u: usize) -> u32 {
    lane.wrapping_add(j.wrapping_add(u as u32).wrapping_mul(32))
}

/// `j = 0, CHUNK, 2 CHUNK, ...` below the number of columns a lane may own (`ceil(cols / 32)`).
#[inline(always)]
pub(crate) fn chunks(cols: u32) -> impl Iterator<Item = u32> {
    (0..cols.div_ceil(32)).step_by(CHUNK)
}

/// Writes `value(j)` (the lane's chunk `j`, as from [`load_chunk`]) into this warp's row of
/// `out`, rounded to `T`; columns past the row are skipped.
#[inline(always)]
pub(crate) fn write_chunks<T: Float>(out: &mut PerWarpRow<T>, me: WarpRow, cols: u32, mut value: impl FnMut(u32) -> [f32; CHUNK]) {
    if let Some(mut row) = out.row_mut(me) {
        for j in chunks(cols) {
            let v = value(j);
            unroll::<CHUNK>(|u| {
                if let Some(o) = row.get_mut(j.wrapping_add(u as u32) as usize) {
                    *o = T::from_f32(v[u]);
                }
            });
        }
    }
}

/// Writes `value` into this warp's one-column row of `out` (lane 0 holds column 0).
#[inline(always)]
pub(crate) fn write_row_value(out: &mut PerWarpRow<f32>, me: WarpRow, value: f32) {
    if let Some(mut row) = out.row_mut(me)
        && let Some(element) = row.get_mut(0)
    {
        *element = value;
    }
}

/// Mean (0 for RMS) and `1 / sqrt(variance + eps)` of a row a warp holds; `load(j)` gives
/// this lane's chunk `j`. Two passes over the row (the mean, then the centred squares), so
/// large means do not cancel.
#[inline(always)]
fn row_statistics(load: impl Fn(u32) -> [f32; CHUNK], lane: u32, cols: u32, centred: bool, eps: f32) -> (f32, f32) {
    let n = cols as f32;
    let mean = if centred {
        let mut sum = 0.0f32;
        for j in chunks(cols) {
            let v = load(j);
            unroll::<CHUNK>(|u| sum += v[u]);
        }
        warp::reduce_sum(sum) / n
    } else {
        0.0
    };
    let mut squares = 0.0f32;
    for j in chunks(cols) {
        let v = load(j);
        unroll::<CHUNK>(|u| {
            if column(lane, j, u) < cols {
                squares += (v[u] - mean) * (v[u] - mean);
            }
        });
    }
    (mean, 1.0 / (warp::reduce_sum(squares) / n + eps).sqrt())
}

/// `round_T(a + b)` for each value of two chunks: the fused forms' residual sum, as stored.
#[inline(always)]
fn add_chunks<T: Float>(a: [f32; CHUNK], b: [f32; CHUNK]) -> [f32; CHUNK] {
    let mut h = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| h[u] = T::from_f32(a[u] + b[u]).to_f32());
    h
}

/// RMSNorm of a row-major `rows x cols` matrix: `out = x / sqrt(mean(x^2) + eps) * weight`,
/// and `rstd[row] = 1 / sqrt(mean(x^2) + eps)` for the backward pass. One warp per row.
#[kernel(instances(f32, bf16, f16), cols(out = cols, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_forward<T: Float>(x: &[T], weight: &[T], mut out: PerWarpRow<T>, mut rstd: PerWarpRow<f32>, rows: u32, cols: u32, eps: f32) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let (Some(x), Some(weight)) = (row_of(x, me.row(), cols), weight.get(..cols as usize)) else { return };
    let (_, r) = row_statistics(|j| load_chunk(x, lane, j, 0.0), lane, cols, false, eps);
    write_chunks(&mut out, me, cols, |j| {
        let (v, w) = (load_chunk(x, lane, j, 0.0), load_chunk(weight, lane, j, 0.0));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = v[u] * r * w[u]);
        o
    });
    write_row_value(&mut rstd, me, r);
}

/// Fused residual add and RMSNorm: `sum = x + residual` (rounded to `T`, written: the next
/// layer's residual stream), then [`rmsnorm_forward()`] of `sum`.
#[kernel(instances(f32, bf16, f16), cols(out = cols, sum = cols, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn add_rmsnorm_forward<T: Float>(
    x: &[T],
    residual: &[T],
    weight: &[T],
    mut out: PerWarpRow<T>,
    mut sum: PerWarpRow<T>,
    mut rstd: PerWarpRow<f32>,
    rows: u32,
    cols: u32,
    eps: f32,
) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let (Some(x), Some(residual), Some(weight)) = (row_of(x, me.row(), cols), row_of(residual, me.row(), cols), weight.get(..cols as usize)) else {
        return;
    };
    let h = |j| add_chunks::<T>(load_chunk(x, lane, j, 0.0), load_chunk(residual, lane, j, 0.0));
    let (_, r) = row_statistics(h, lane, cols, false, eps);
    write_chunks(&mut sum, me, cols, h);
    // The normalised output from x and residual again (a kernel does not read its own outputs).
    write_chunks(&mut out, me, cols, |j| {
        let (v, w) = (h(j), load_chunk(weight, lane, j, 0.0));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = v[u] * r * w[u]);
        o
    });
    write_row_value(&mut rstd, me, r);
}

/// Layer norm of a row-major `rows x cols` matrix: `out = (x - mean) * rstd * weight + bias`,
/// and `mean[row]`, `rstd[row]` for the backward pass. One warp per row.
#[kernel(instances(f32, bf16, f16), cols(out = cols, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    mut out: PerWarpRow<T>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    rows: u32,
    cols: u32,
    eps: f32,
) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let (Some(x), Some(weight), Some(bias)) = (row_of(x, me.row(), cols), weight.get(..cols as usize), bias.get(..cols as usize)) else { return };
    let (m, r) = row_statistics(|j| load_chunk(x, lane, j, 0.0), lane, cols, true, eps);
    write_chunks(&mut out, me, cols, |j| {
        let (v, w, b) = (load_chunk(x, lane, j, 0.0), load_chunk(weight, lane, j, 0.0), load_chunk(bias, lane, j, 0.0));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = (v[u] - m) * r * w[u] + b[u]);
        o
    });
    write_row_value(&mut mean, me, m);
    write_row_value(&mut rstd, me, r);
}

/// Fused residual add and layer norm: `sum = x + residual` (rounded to `T`, written), then
/// [`layernorm_forward()`] of `sum`.
#[kernel(instances(f32, bf16, f16), cols(out = cols, sum = cols, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn add_layernorm_forward<T: Float>(
    x: &[T],
    residual: &[T],
    weight: &[T],
    bias: &[T],
    mut out: PerWarpRow<T>,
    mut sum: PerWarpRow<T>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    rows: u32,
    cols: u32,
    eps: f32,
) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let (Some(x), Some(residual), Some(weight), Some(bias)) =
        (row_of(x, me.row(), cols), row_of(residual, me.row(), cols), weight.get(..cols as usize), bias.get(..cols as usize))
    else {
        return;
    };
    let h = |j| add_chunks::<T>(load_chunk(x, lane, j, 0.0), load_chunk(residual, lane, j, 0.0));
    let (m, r) = row_statistics(h, lane, cols, true, eps);
    write_chunks(&mut sum, me, cols, h);
    write_chunks(&mut out, me, cols, |j| {
        let (v, w, b) = (h(j), load_chunk(weight, lane, j, 0.0), load_chunk(bias, lane, j, 0.0));
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = (v[u] - m) * r * w[u] + b[u]);
        o
    });
    write_row_value(&mut mean, me, m);
    write_row_value(&mut rstd, me, r);
}

/// The input gradient of layer norm (`centred`) or RMSNorm for one row: with `xhat = (x -
/// mean) * rstd` and `g = dout * weight`, `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`
/// (RMSNorm: no `mean(g)` term, `mean = 0`), plus `dresidual` when given (the gradient that
/// reached the residual stream directly, for the fused forms).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn norm_backward_row<T: Float>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    dresidual: Option<&[T]>,
    dx: &mut PerWarpRow<T>,
    me: WarpRow,
    cols: u32,
    mean: f32,
    rstd: f32,
    centred: bool,
) {
    let lane = me.lane();
    let n = cols as f32;
    let (mut g_sum, mut gx_sum) = (0.0f32, 0.0f32);
    for j in chunks(cols) {
        let (d, w, v) = (load_chunk(dout, lane, j, 0.0), load_chunk(weight, lane, j, 0.0), load_chunk(x, lane, j, 0.0));
        unroll::<CHUNK>(|u| {
            let g = d[u] * w[u];
            g_sum += g;
            gx_sum += g * (v[u] - mean) * rstd;
        });
    }
    let g_mean = if centred { warp::reduce_sum(g_sum) / n } else { 0.0 };
    let gx_mean = warp::reduce_sum(gx_sum) / n;
    write_chunks(dx, me, cols, |j| {
        let (d, w, v) = (load_chunk(dout, lane, j, 0.0), load_chunk(weight, lane, j, 0.0), load_chunk(x, lane, j, 0.0));
        let e = match dresidual {
            Some(r) => load_chunk(r, lane, j, 0.0),
            None => [0.0; CHUNK],
        };
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = rstd * (d[u] * w[u] - g_mean - (v[u] - mean) * rstd * gx_mean) + e[u]);
        o
    });
}

/// Layer norm's input gradient (one warp per row): `x` is the norm's input (`sum` of the fused
/// form), `mean`/`rstd` the forward's statistics; `dx += dresidual` when `add_dresidual != 0`.
#[kernel(instances(f32, bf16, f16), cols(dx = cols))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward<T: Float>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    mean: &[f32],
    rstd: &[f32],
    dresidual: &[T],
    mut dx: PerWarpRow<T>,
    rows: u32,
    cols: u32,
    add_dresidual: u32,
) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let r = me.row();
    let (Some(dout), Some(x), Some(weight), Some(&m), Some(&s)) =
        (row_of(dout, r, cols), row_of(x, r, cols), weight.get(..cols as usize), mean.get(r as usize), rstd.get(r as usize))
    else {
        return;
    };
    let dres = if add_dresidual != 0 { row_of(dresidual, r, cols) } else { None };
    norm_backward_row(dout, x, weight, dres, &mut dx, me, cols, m, s, true);
}

/// RMSNorm's input gradient (one warp per row); see [`layernorm_backward()`].
#[kernel(instances(f32, bf16, f16), cols(dx = cols))]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward<T: Float>(
    dout: &[T],
    x: &[T],
    weight: &[T],
    rstd: &[f32],
    dresidual: &[T],
    mut dx: PerWarpRow<T>,
    rows: u32,
    cols: u32,
    add_dresidual: u32,
) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let r = me.row();
    let (Some(dout), Some(x), Some(weight), Some(&s)) = (row_of(dout, r, cols), row_of(x, r, cols), weight.get(..cols as usize), rstd.get(r as usize)) else {
        return;
    };
    let dres = if add_dresidual != 0 { row_of(dresidual, r, cols) } else { None };
    norm_backward_row(dout, x, weight, dres, &mut dx, me, cols, 0.0, s, false);
}

/// The weight (and bias) gradients of a norm, first step: thread `i = chunk * cols + c` sums
/// rows `chunk * rows_per_chunk ..` (at most `rows_per_chunk` of them, in order) of column
/// `c`: `partial_dweight[i] = sum dout * xhat`, `partial_dbias[i] = sum dout`, with `xhat = (x
/// - mean) * rstd` (`centred`) or `x * rstd` (RMSNorm; `mean` is not read). The second step
/// ([`sum_column_partials()`]) adds the chunks in order: deterministic, and parallel over
/// rows as well as columns.
#[kernel(instances(f32, bf16, f16), same_len(partial_dweight, partial_dbias))]
#[allow(clippy::too_many_arguments)]
pub fn norm_backward_weights_partial<T: Float>(
    dout: &[T],
    x: &[T],
    mean: &[f32],
    rstd: &[f32],
    mut partial_dweight: DisjointSlice<f32>,
    mut partial_dbias: DisjointSlice<f32>,
    rows: u32,
    cols: NonZeroU32,
    rows_per_chunk: u32,
    centred: u32,
) {
    for i in grid_stride(partial_dweight.len()) {
        let (chunk, c) = ((i.get() as u64 / NonZeroU64::from(cols)) as usize, (i.get() as u64 % NonZeroU64::from(cols)) as usize);
        let first = chunk * rows_per_chunk as usize;
        let last = (first + rows_per_chunk as usize).min(rows as usize);
        let (mut dw, mut db) = (0.0f32, 0.0f32);
        let mut r = first;
        while r < last {
            // Up to CHUNK rows' loads in flight at once.
            let mut d = [0.0f32; CHUNK];
            let mut xh = [0.0f32; CHUNK];
            unroll::<CHUNK>(|u| {
                let row = r + u;
                let at = row * cols.get() as usize + c;
                if row < last
                    && let (Some(dv), Some(v), Some(&s)) = (dout.get(at), x.get(at), rstd.get(row))
                {
                    let m = if centred != 0 { mean.get(row).copied().unwrap_or(0.0) } else { 0.0 };
                    d[u] = dv.to_f32();
                    xh[u] = (v.to_f32() - m) * s;
                }
            });
            unroll::<CHUNK>(|u| {
                dw += d[u] * xh[u];
                db += d[u];
            });
            r += CHUNK;
        }
        if let Some(w) = partial_dweight.get_mut(i) {
            *w = dw;
        }
        if let Some(b) = partial_dbias.get_mut(i) {
            *b = db;
        }
    }
}

/// Second step of the weight gradients: `out[c] = sum over chunks k (in order) of
/// partial[k * cols + c]`, one thread per column.
#[kernel]
pub fn sum_column_partials(partial: &[f32], mut out: DisjointSlice<f32>, chunks: u32, cols: u32) {
    for c in grid_stride(out.len().min(cols as usize)) {
        let mut total = 0.0f32;
        let mut k = 0usize;
        while k < chunks as usize {
            // Eight partial rows' loads in flight, added in order.
            let mut v = [0.0f32; CHUNK];
            unroll::<CHUNK>(|u| {
                if k + u < chunks as usize {
                    v[u] = partial.get((k + u) * cols as usize + c.get()).copied().unwrap_or(0.0);
                }
            });
            unroll::<CHUNK>(|u| total += v[u]);
            k += CHUNK;
        }
        if let Some(o) = out.get_mut(c) {
            *o = total;
        }
    }
}

/// Online maximum and `sum(exp(x - max))` of a row a warp holds (each lane over its chunks,
/// then combined by shuffles; the sum is rescaled whenever the maximum grows).
#[inline(always)]
pub(crate) fn online_max_sum<T: Float>(row: &[T], lane: u32, cols: u32) -> (f32, f32) {
    // A finite start: a lane that sees no element combines as (MIN, 0) without NaN.
    let (mut max, mut sum) = (f32::MIN, 0.0f32);
    for j in chunks(cols) {
        let v = load_chunk(row, lane, j, f32::NEG_INFINITY);
        let mut chunk_max = v[0];
        unroll::<CHUNK>(|u| chunk_max = chunk_max.max(v[u]));
        if chunk_max > max {
            sum *= (max - chunk_max).exp();
            max = chunk_max;
        }
        unroll::<CHUNK>(|u| sum += (v[u] - max).exp());
    }
    let mut mask = warp::WARP_SIZE / 2;
    while mask > 0 {
        let (other_max, other_sum) = (warp::shuffle_xor(max, mask), warp::shuffle_xor(sum, mask));
        let new_max = max.max(other_max);
        sum = sum * (max - new_max).exp() + other_sum * (other_max - new_max).exp();
        max = new_max;
        mask /= 2;
    }
    (max, sum)
}

/// Row-wise softmax of a row-major `rows x cols` matrix (one warp per row, online maximum and
/// sum, then one pass writing `exp(x - max) / sum`).
#[kernel(instances(f32, bf16, f16), cols(out = cols))]
pub fn softmax_forward<T: Float>(x: &[T], mut out: PerWarpRow<T>, rows: u32, cols: u32) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let Some(x) = row_of(x, me.row(), cols) else { return };
    let (max, sum) = online_max_sum(x, lane, cols);
    let scale = 1.0 / sum;
    write_chunks(&mut out, me, cols, |j| {
        let v = load_chunk(x, lane, j, 0.0);
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = (v[u] - max).exp() * scale);
        o
    });
}

/// A target that marks a row to ignore (PyTorch's `ignore_index`): loss 0, gradient 0.
pub const IGNORE_TARGET: u32 = u32::MAX;

/// Cross-entropy and its gradient in one pass over the logits (llm.c's fused classifier):
/// for row `r` of `logits` (`rows x vocab`) and its class `targets[r]`, `losses[r] =
/// logsumexp(row) - row[target]` and `dlogits[r, c] = (softmax(row)[c] - [c == target]) *
/// dloss`. A target of [`IGNORE_TARGET`] gives loss 0 and a zero gradient; any other target
/// `>= vocab` gives a NaN loss and NaN gradients (visible, never a read out of bounds).
#[kernel(instances(f32, bf16, f16), cols(losses = 1, dlogits = vocab))]
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_forward_backward<T: Float>(
    logits: &[T],
    targets: &[u32],
    mut losses: PerWarpRow<f32>,
    mut dlogits: PerWarpRow<T>,
    rows: u32,
    vocab: u32,
    dloss: f32,
) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let (Some(x), Some(&target)) = (row_of(logits, me.row(), vocab), targets.get(me.row() as usize)) else { return };
    let (max, sum) = online_max_sum(x, lane, vocab);
    let lse = max + sum.ln();
    let (loss, scale) = match x.get(target as usize) {
        Some(t) => (lse - t.to_f32(), dloss),
        None if target == IGNORE_TARGET => (0.0, 0.0),
        None => (f32::NAN, f32::NAN),
    };
    write_row_value(&mut losses, me, loss);
    write_chunks(&mut dlogits, me, vocab, |j| {
        let v = load_chunk(x, lane, j, 0.0);
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            let hot = if column(lane, j, u) == target { 1.0 } else { 0.0 };
            o[u] = ((v[u] - lse).exp() - hot) * scale;
        });
        o
    });
}

/// Cross-entropy's forward pass alone: `losses[row]` as [`cross_entropy_forward_backward()`]
/// writes it and `lse[row] = logsumexp(row)` (f32), which [`cross_entropy_backward()`] and
/// [`packed::cross_entropy_backward_packed()`] take: the row is read once and no gradient is
/// written (the PyTorch op's forward, whose backward is known only later). A warp per row.
#[kernel(instances(f32, bf16, f16), cols(losses = 1, lse = 1))]
pub fn cross_entropy_forward<T: Float>(logits: &[T], targets: &[u32], mut losses: PerWarpRow<f32>, mut lse: PerWarpRow<f32>, rows: u32, vocab: u32) {
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane();
    let (Some(x), Some(&target)) = (row_of(logits, me.row(), vocab), targets.get(me.row() as usize)) else { return };
    let (max, sum) = online_max_sum(x, lane, vocab);
    let row_lse = max + sum.ln();
    write_row_value(&mut losses, me, cross_entropy_loss(x, target, row_lse));
    write_row_value(&mut lse, me, row_lse);
}

/// The loss of a row of `logits` whose log-sum-exp is `lse`: `lse - x[target]`, 0 for
/// [`IGNORE_TARGET`], NaN for another target past the row.
#[inline(always)]
fn cross_entropy_loss<T: Float>(x: &[T], target: u32, lse: f32) -> f32 {
    match x.get(target as usize) {
        Some(t) => lse - t.to_f32(),
        None if target == IGNORE_TARGET => 0.0,
        None => f32::NAN,
    }
}

/// The factor of a row's gradient: `dloss` for a real class, 0 for [`IGNORE_TARGET`], NaN for
/// a target past the vocabulary.
#[inline(always)]
pub(crate) fn cross_entropy_scale(target: u32, vocab: u32, dloss: f32) -> f32 {
    if target < vocab {
        dloss
    } else if target == IGNORE_TARGET {
        0.0
    } else {
        f32::NAN
    }
}

/// Cross-entropy's input gradient from the forward's `lse` ([`cross_entropy_forward()`]) and
/// the upstream gradient of each row's loss: `dlogits[r, c] = (exp(logits[r, c] - lse[r]) -
/// [c == target[r]]) * dlosses[r]` (0 for an ignored row, NaN for a target past the
/// vocabulary): the backward of any reduction of the losses, in one pass over the logits. One
/// element a thread (grid-stride); [`packed::cross_entropy_backward_packed()`] takes 8 when
/// `vocab % 8 == 0`.
#[kernel(instances(f32, bf16, f16), same_len(logits, dlogits))]
pub fn cross_entropy_backward<T: Float>(logits: &[T], targets: &[u32], lse: &[f32], dlosses: &[f32], mut dlogits: DisjointSlice<T>, vocab: NonZeroU32) {
    let v64 = NonZeroU64::from(vocab);
    for i in grid_stride(dlogits.len()) {
        let (row, col) = ((i.get() as u64 / v64) as usize, i.get() as u64 % v64);
        let target = targets.get(row).copied().unwrap_or(IGNORE_TARGET);
        let scale = cross_entropy_scale(target, vocab.get(), dlosses.get(row).copied().unwrap_or(0.0));
        let l = lse.get(row).copied().unwrap_or(0.0);
        let hot = if col == target as u64 { 1.0 } else { 0.0 };
        let x = logits.get(i.get()).map_or(0.0, |v| v.to_f32());
        if let Some(o) = dlogits.get_mut(i) {
            *o = T::from_f32(((x - l).exp() - hot) * scale);
        }
    }
}

/// `sqrt(2 / pi)`, GPT-2's GELU scaling factor.
const GELU_SCALE: f32 = 0.797_884_6;

/// `1 / (1 + e^-z)`. On the GPU one `ex2.approx.ftz` and one `rcp.approx.ftz` (a few ulp;
/// `e^-z` past `f32::MAX` gives exactly 0), which is what keeps the activations at memory
/// speed: `libm`'s `expf`/`tanhf` and an IEEE division are dozens of instructions an element.
/// On the host `std`'s `exp` and a division.
#[inline(always)]
pub fn sigmoid(z: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        (1.0 + (-z).fast_exp()).fast_recip()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / (1.0 + (-z).exp())
    }
}

/// GPT-2's GELU (tanh approximation): `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`,
/// computed as `x * sigmoid(2 u)` (the same function: `(1 + tanh u) / 2 = sigmoid(2 u)`), which
/// has no `1 + tanh` cancellation for negative `x` and needs no `tanh`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let u = GELU_SCALE * (x + 0.044_715 * x * x * x);
    x * sigmoid(2.0 * u)
}

/// The derivative of [`gelu`]: with `s = sigmoid(2 u)`, `s + x s (1 - s) 2 u'`, `u' =
/// sqrt(2/pi) (1 + 3 * 0.044715 x^2)`.
#[inline(always)]
pub fn gelu_derivative(x: f32) -> f32 {
    let u = GELU_SCALE * (x + 0.044_715 * x * x * x);
    let s = sigmoid(2.0 * u);
    let du = GELU_SCALE * (1.0 + 3.0 * 0.044_715 * x * x);
    s * (1.0 + 2.0 * x * (1.0 - s) * du)
}

/// A grid-stride loop taken `CHUNK` indices at a time: `body` gets this thread's next
/// `CHUNK` indices (`None` past the end), so it can issue all their loads before using any.
#[inline(always)]
pub(crate) fn grid_stride_chunks(len: usize, mut body: impl FnMut(&[Option<ThreadIndex>; CHUNK])) {
    let mut indices = grid_stride(len);
    loop {
        let mut chunk = [None; CHUNK];
        unroll::<CHUNK>(|u| chunk[u] = indices.next());
        if chunk[0].is_none() {
            break;
        }
        body(&chunk);
    }
}

/// The values of `x` at a chunk of indices (0 where there is none).
#[inline(always)]
fn gather<T: Float>(x: &[T], chunk: &[Option<ThreadIndex>; CHUNK]) -> [f32; CHUNK] {
    let mut v = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| {
        if let Some(i) = chunk[u]
            && let Some(value) = x.get(i.get())
        {
            v[u] = value.to_f32();
        }
    });
    v
}

/// Stores a chunk of values at their indices of `out`.
#[inline(always)]
fn scatter<T: Float>(out: &mut DisjointSlice<T>, chunk: &[Option<ThreadIndex>; CHUNK], v: [f32; CHUNK]) {
    unroll::<CHUNK>(|u| {
        if let Some(i) = chunk[u]
            && let Some(o) = out.get_mut(i)
        {
            *o = T::from_f32(v[u]);
        }
    });
}

/// `out = gelu(x)` element-wise (grid-stride loop).
#[kernel(instances(f32, bf16, f16), same_len(x, out))]
pub fn gelu_forward<T: Float>(x: &[T], mut out: DisjointSlice<T>) {
    grid_stride_chunks(out.len(), |chunk| {
        let mut v = gather(x, chunk);
        unroll::<CHUNK>(|u| v[u] = gelu(v[u]));
        scatter(&mut out, chunk, v);
    });
}

/// `dx = gelu'(x) * dout` element-wise.
#[kernel(instances(f32, bf16, f16), same_len(x, dout, dx))]
pub fn gelu_backward<T: Float>(x: &[T], dout: &[T], mut dx: DisjointSlice<T>) {
    grid_stride_chunks(dx.len(), |chunk| {
        let (mut v, d) = (gather(x, chunk), gather(dout, chunk));
        unroll::<CHUNK>(|u| v[u] = gelu_derivative(v[u]) * d[u]);
        scatter(&mut dx, chunk, v);
    });
}

/// `x * sigmoid(x)`.
#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// SiLU-and-mul (SwiGLU's gate): `input` is `rows x 2d` (gate in columns `0..d`, up in
/// `d..2d`), `out[r, c] = silu(gate[r, c]) * up[r, c]` for `out` of `rows x d`.
#[kernel(instances(f32, bf16, f16))]
pub fn silu_and_mul_forward<T: Float>(input: &[T], mut out: DisjointSlice<T>, d: NonZeroU32) {
    let d64 = NonZeroU64::from(d);
    grid_stride_chunks(out.len(), |chunk| {
        let (mut g, mut up) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
        unroll::<CHUNK>(|u| {
            if let Some(i) = chunk[u] {
                let (r, c) = (i.get() as u64 / d64, i.get() as u64 % d64);
                let at = (r * 2 * d64.get() + c) as usize;
                g[u] = input.get(at).map_or(0.0, |v| v.to_f32());
                up[u] = input.get(at + d.get() as usize).map_or(0.0, |v| v.to_f32());
            }
        });
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| o[u] = silu(g[u]) * up[u]);
        scatter(&mut out, chunk, o);
    });
}

/// SiLU-and-mul's input gradient: `dinput` (`rows x 2d`) from `dout` (`rows x d`) and the
/// forward's `input`: `dgate = dout * up * silu'(gate)`, `dup = dout * silu(gate)`.
#[kernel(instances(f32, bf16, f16), same_len(input, dinput))]
pub fn silu_and_mul_backward<T: Float>(input: &[T], dout: &[T], mut dinput: DisjointSlice<T>, d: NonZeroU32) {
    let d64 = NonZeroU64::from(d);
    let width = d64.saturating_mul(const { NonZeroU64::new(2).unwrap() });
    grid_stride_chunks(dinput.len(), |chunk| {
        let mut o = [0.0f32; CHUNK];
        let (mut g, mut up, mut dy, mut is_gate) = ([0.0f32; CHUNK], [0.0f32; CHUNK], [0.0f32; CHUNK], [false; CHUNK]);
        unroll::<CHUNK>(|u| {
            if let Some(i) = chunk[u] {
                let (r, c) = (i.get() as u64 / width, i.get() as u64 % width);
                is_gate[u] = c < d64.get();
                let col = if is_gate[u] { c } else { c - d64.get() };
                let base = (r * width.get()) as usize;
                g[u] = input.get(base + col as usize).map_or(0.0, |v| v.to_f32());
                up[u] = input.get(base + (col + d64.get()) as usize).map_or(0.0, |v| v.to_f32());
                dy[u] = dout.get((r * d64.get() + col) as usize).map_or(0.0, |v| v.to_f32());
            }
        });
        unroll::<CHUNK>(|u| {
            let s = sigmoid(g[u]);
            o[u] = if is_gate[u] { dy[u] * up[u] * s * (1.0 + g[u] * (1.0 - s)) } else { dy[u] * g[u] * s };
        });
        scatter(&mut dinput, chunk, o);
    });
}

/// Shape of a rotary-embedding launch (by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct RopeShape {
    /// Heads per token.
    pub heads: u32,
    /// Elements per head.
    pub head_dim: u32,
    /// The first `rotary_dim` elements of each head are rotated (even, `<= head_dim`); the rest
    /// are copied.
    pub rotary_dim: u32,
    /// Rows of the `cos`/`sin` tables (positions they cover).
    pub max_positions: u32,
    /// 1: rotate by `-angle` (the backward pass, or undoing the embedding).
    pub inverse: u32,
}

/// Rotary position embeddings, rotate-half (GPT-NeoX/Llama) convention: `x` is `tokens x heads
/// x head_dim`, `positions[token]` picks a row of the `cos`/`sin` tables (`max_positions x
/// rotary_dim / 2`, f32). For `k < rotary_dim / 2` the pair `(x[k], x[k + rotary_dim/2])`
/// becomes `(x1 cos - x2 sin, x2 cos + x1 sin)`. A position past the tables writes NaN.
#[kernel(instances(f32, bf16, f16), same_len(x, out))]
#[allow(clippy::too_many_arguments)]
pub fn rotary_embedding<T: Float>(
    x: &[T],
    positions: &[u32],
    cos: &[f32],
    sin: &[f32],
    mut out: DisjointSlice<T>,
    head_dim: NonZeroU32,
    heads: NonZeroU32,
    shape: RopeShape,
) {
    let half = (shape.rotary_dim / 2) as usize;
    let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
    grid_stride_chunks(out.len(), |chunk| {
        let mut o = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            let Some(i) = chunk[u] else { return };
            let (row, c) = (i.get() as u64 / NonZeroU64::from(head_dim), (i.get() as u64 % NonZeroU64::from(head_dim)) as usize);
            let token = (row / NonZeroU64::from(heads)) as usize;
            o[u] = if c >= 2 * half {
                x.get(i.get()).map_or(0.0, |v| v.to_f32())
            } else {
                let (k, first) = if c < half { (c, true) } else { (c - half, false) };
                let pair = i.get() - c + k;
                let table = positions.get(token).and_then(|&p| if p < shape.max_positions { Some(p as usize * half + k) } else { None });
                match (table.and_then(|t| cos.get(t).zip(sin.get(t))), x.get(pair), x.get(pair + half)) {
                    (Some((&cs, &sn)), Some(x1), Some(x2)) => {
                        let (x1, x2, sn) = (x1.to_f32(), x2.to_f32(), sign * sn);
                        if first { x1 * cs - x2 * sn } else { x2 * cs + x1 * sn }
                    }
                    _ => f32::NAN,
                }
            };
        });
        scatter(&mut out, chunk, o);
    });
}

/// AdamW's hyperparameters for one step (by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct AdamWStep {
    /// Learning rate.
    pub learning_rate: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// `1 - beta1^t`.
    pub beta1_correction: f32,
    /// `1 - beta2^t`.
    pub beta2_correction: f32,
    /// Added to the denominator.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
    /// Multiplies every gradient first (1 for none; loss scaling or a clip factor).
    pub grad_scale: f32,
}

/// One AdamW step (llm.c's `adamw_kernel3`): `m`, `v` (f32 moments) and `params` updated in
/// place from `grads`; arithmetic in f32, `params` rounded once to `T`.
#[kernel(instances(f32, bf16, f16), same_len(params, grads, m, v))]
pub fn adamw_step<T: Float>(mut params: DisjointSlice<T>, grads: &[T], mut m: DisjointSlice<f32>, mut v: DisjointSlice<f32>, hp: AdamWStep) {
    grid_stride_chunks(params.len(), |chunk| {
        let g = gather(grads, chunk);
        let (mut p, mut m0, mut v0) = ([0.0f32; CHUNK], [0.0f32; CHUNK], [0.0f32; CHUNK]);
        unroll::<CHUNK>(|u| {
            if let Some(i) = chunk[u] {
                p[u] = params.get_mut(i).map_or(0.0, |x| x.to_f32());
                m0[u] = m.get_mut(i).map_or(0.0, |x| *x);
                v0[u] = v.get_mut(i).map_or(0.0, |x| *x);
            }
        });
        unroll::<CHUNK>(|u| {
            let Some(i) = chunk[u] else { return };
            let g = g[u] * hp.grad_scale;
            let mean = hp.beta1 * m0[u] + (1.0 - hp.beta1) * g;
            let var = hp.beta2 * v0[u] + (1.0 - hp.beta2) * g * g;
            if let Some(m_i) = m.get_mut(i) {
                *m_i = mean;
            }
            if let Some(v_i) = v.get_mut(i) {
                *v_i = var;
            }
            let (mean, var) = (mean / hp.beta1_correction, var / hp.beta2_correction);
            if let Some(p_i) = params.get_mut(i) {
                *p_i = T::from_f32(p[u] - hp.learning_rate * (mean / (var.sqrt() + hp.eps) + hp.weight_decay * p[u]));
            }
        });
    });
}

/// Adds `sum(x^2)` into `total[0]` (f32, atomically, one add per warp): call once per tensor
/// on one `total` to get the squared global norm of several gradients.
#[kernel(instances(f32, bf16, f16))]
pub fn sum_of_squares<T: Float>(x: &[T], total: AtomicSlice<f32>) {
    let mut sum = 0.0f32;
    grid_stride_chunks(x.len(), |chunk| {
        let v = gather(x, chunk);
        unroll::<CHUNK>(|u| sum += v[u] * v[u]);
    });
    let sum = warp::reduce_sum(sum);
    if warp::lane_id() == 0 && !total.is_empty() {
        total.add(0, sum);
    }
}

/// Gradient clipping by global norm, in place: with `norm = sqrt(norm_squared[0])`, every
/// gradient is multiplied by `max_norm / (norm + 1e-6)` when `norm > max_norm`.
#[kernel(instances(f32, bf16, f16))]
pub fn clip_by_global_norm<T: Float>(mut grads: DisjointSlice<T>, norm_squared: &[f32], max_norm: f32) {
    let norm = norm_squared.first().copied().unwrap_or(0.0).sqrt();
    let scale = if norm > max_norm { max_norm / (norm + 1e-6) } else { 1.0 };
    grid_stride_chunks(grads.len(), |chunk| {
        let mut v = [0.0f32; CHUNK];
        unroll::<CHUNK>(|u| {
            if let Some(i) = chunk[u] {
                v[u] = grads.get_mut(i).map_or(0.0, |g| g.to_f32()) * scale;
            }
        });
        scatter(&mut grads, chunk, v);
    });
}

/// The kernels of one element type under their generic names, so the host crate can reach
/// `rmsnorm_forward_f32` as `for_f32::rmsnorm_forward` from one macro.
macro_rules! instances_of {
    ($module:ident, $doc:literal: $($kernel:ident = $($segment:ident)::+),* $(,)?) => {
        #[doc = $doc]
        #[cfg(not(target_arch = "nvptx64"))]
        pub mod $module {
            $(pub use crate::$($segment)::+ as $kernel;)*
        }
    };
}

instances_of!(for_f32, "The `f32` instances.":
    rmsnorm_forward = rmsnorm_forward_f32, add_rmsnorm_forward = add_rmsnorm_forward_f32,
    layernorm_forward = layernorm_forward_f32, add_layernorm_forward = add_layernorm_forward_f32,
    layernorm_backward = layernorm_backward_f32, rmsnorm_backward = rmsnorm_backward_f32,
    norm_backward_weights_partial = norm_backward_weights_partial_f32,
    softmax_forward = softmax_forward_f32, cross_entropy_forward_backward = cross_entropy_forward_backward_f32,
    cross_entropy_forward = cross_entropy_forward_f32, cross_entropy_backward = cross_entropy_backward_f32,
    gelu_forward = gelu_forward_f32, gelu_backward = gelu_backward_f32,
    silu_and_mul_forward = silu_and_mul_forward_f32, silu_and_mul_backward = silu_and_mul_backward_f32,
    rotary_embedding = rotary_embedding_f32, adamw_step = adamw_step_f32,
    sum_of_squares = sum_of_squares_f32, clip_by_global_norm = clip_by_global_norm_f32,
    attention_forward = attention::attention_forward_f32, attention_forward_mma = attention::attention_forward_mma_f32,
    attention_backward_dq = attention::attention_backward_dq_f32,
    attention_backward_dkv = attention::attention_backward_dkv_f32,
    attention_backward_delta = attention_backward::attention_backward_delta_f32,
    attention_backward_dkv_mma = attention_backward::attention_backward_dkv_mma_f32, attention_backward_dq_mma = attention_backward::attention_backward_dq_mma_f32,
    attention_backward_prep = attention_backward::attention_backward_prep_f32, attention_backward_dq_convert = attention_backward::attention_backward_dq_convert_f32,
    rmsnorm_forward_packed = packed::rmsnorm_forward_packed_f32, rmsnorm_forward_packed_t96 = packed::rmsnorm_forward_packed_t96_f32, rmsnorm_forward_packed_t128 = packed::rmsnorm_forward_packed_t128_f32, add_rmsnorm_forward_packed = packed::add_rmsnorm_forward_packed_f32, add_rmsnorm_forward_packed_t512 = packed::add_rmsnorm_forward_packed_t512_f32,
    layernorm_forward_packed16 = packed::wide::layernorm_forward_packed16_f32, layernorm_forward_packed16_t256 = packed::layernorm_forward_packed16_t256_f32,
    rmsnorm_forward_packed16 = packed::rmsnorm_forward_packed16_f32,
    cross_entropy_backward_packed = packed::cross_entropy_backward_packed_f32,
    layernorm_forward_packed = packed::layernorm_forward_packed_f32, add_layernorm_forward_packed = packed::add_layernorm_forward_packed_f32,
    norm_backward_packed = packed::norm_backward_packed_f32, softmax_forward_packed = packed::softmax_forward_packed_f32, softmax_forward_packed_t512 = packed::softmax_forward_packed_t512_f32,
    gelu_forward_packed = packed::gelu_forward_packed_f32, gelu_backward_packed = packed::gelu_backward_packed_f32,
    norm_backward_weights_partial_packed = packed::norm_backward_weights_partial_packed_f32,
    layernorm_backward_fused_packed = packed::layernorm_backward_fused_packed_f32,
    rmsnorm_backward_fused_packed = packed::rmsnorm_backward_fused_packed_f32,
    sum_of_squares_packed = packed::sum_of_squares_packed_f32,
    silu_and_mul_forward_packed = packed::silu_and_mul_forward_packed_f32,
    silu_and_mul_backward_packed = packed::silu_and_mul_backward_packed_f32,
    rotary_embedding_packed = packed::wide::rotary_embedding_packed_f32, adamw_step_packed = packed::adamw_step_packed_f32,
);
instances_of!(for_bf16, "The `bf16` instances.":
    rmsnorm_forward = rmsnorm_forward_bf16, add_rmsnorm_forward = add_rmsnorm_forward_bf16,
    layernorm_forward = layernorm_forward_bf16, add_layernorm_forward = add_layernorm_forward_bf16,
    layernorm_backward = layernorm_backward_bf16, rmsnorm_backward = rmsnorm_backward_bf16,
    norm_backward_weights_partial = norm_backward_weights_partial_bf16,
    softmax_forward = softmax_forward_bf16, cross_entropy_forward_backward = cross_entropy_forward_backward_bf16,
    cross_entropy_forward = cross_entropy_forward_bf16, cross_entropy_backward = cross_entropy_backward_bf16,
    gelu_forward = gelu_forward_bf16, gelu_backward = gelu_backward_bf16,
    silu_and_mul_forward = silu_and_mul_forward_bf16, silu_and_mul_backward = silu_and_mul_backward_bf16,
    rotary_embedding = rotary_embedding_bf16, adamw_step = adamw_step_bf16,
    sum_of_squares = sum_of_squares_bf16, clip_by_global_norm = clip_by_global_norm_bf16,
    attention_forward = attention::attention_forward_bf16, attention_forward_mma = attention::attention_forward_mma_bf16,
    attention_backward_dq = attention::attention_backward_dq_bf16,
    attention_backward_dkv = attention::attention_backward_dkv_bf16,
    attention_backward_delta = attention_backward::attention_backward_delta_bf16,
    attention_backward_dkv_mma = attention_backward::attention_backward_dkv_mma_bf16, attention_backward_dq_mma = attention_backward::attention_backward_dq_mma_bf16,
    attention_backward_prep = attention_backward::attention_backward_prep_bf16, attention_backward_dq_convert = attention_backward::attention_backward_dq_convert_bf16,
    rmsnorm_forward_packed = packed::rmsnorm_forward_packed_bf16, rmsnorm_forward_packed_t96 = packed::rmsnorm_forward_packed_t96_bf16, rmsnorm_forward_packed_t128 = packed::rmsnorm_forward_packed_t128_bf16, add_rmsnorm_forward_packed = packed::add_rmsnorm_forward_packed_bf16, add_rmsnorm_forward_packed_t512 = packed::add_rmsnorm_forward_packed_t512_bf16,
    layernorm_forward_packed16 = packed::layernorm_forward_packed16_bf16, layernorm_forward_packed16_t256 = packed::layernorm_forward_packed16_t256_bf16,
    rmsnorm_forward_packed16 = packed::rmsnorm_forward_packed16_bf16,
    cross_entropy_backward_packed = packed::cross_entropy_backward_packed_bf16,
    layernorm_forward_packed = packed::layernorm_forward_packed_bf16, add_layernorm_forward_packed = packed::add_layernorm_forward_packed_bf16,
    norm_backward_packed = packed::norm_backward_packed_bf16, softmax_forward_packed = packed::softmax_forward_packed_bf16, softmax_forward_packed_t512 = packed::softmax_forward_packed_t512_bf16,
    gelu_forward_packed = packed::gelu_forward_packed_bf16, gelu_backward_packed = packed::gelu_backward_packed_bf16,
    norm_backward_weights_partial_packed = packed::norm_backward_weights_partial_packed_bf16,
    layernorm_backward_fused_packed = packed::layernorm_backward_fused_packed_bf16,
    rmsnorm_backward_fused_packed = packed::rmsnorm_backward_fused_packed_bf16,
    sum_of_squares_packed = packed::sum_of_squares_packed_bf16,
    silu_and_mul_forward_packed = packed::silu_and_mul_forward_packed_bf16,
    silu_and_mul_backward_packed = packed::silu_and_mul_backward_packed_bf16,
    rotary_embedding_packed = packed::rotary_embedding_packed_bf16, adamw_step_packed = packed::adamw_step_packed_bf16,
);
instances_of!(for_f16, "The `f16` instances.":
    rmsnorm_forward = rmsnorm_forward_f16, add_rmsnorm_forward = add_rmsnorm_forward_f16,
    layernorm_forward = layernorm_forward_f16, add_layernorm_forward = add_layernorm_forward_f16,
    layernorm_backward = layernorm_backward_f16, rmsnorm_backward = rmsnorm_backward_f16,
    norm_backward_weights_partial = norm_backward_weights_partial_f16,
    softmax_forward = softmax_forward_f16, cross_entropy_forward_backward = cross_entropy_forward_backward_f16,
    cross_entropy_forward = cross_entropy_forward_f16, cross_entropy_backward = cross_entropy_backward_f16,
    gelu_forward = gelu_forward_f16, gelu_backward = gelu_backward_f16,
    silu_and_mul_forward = silu_and_mul_forward_f16, silu_and_mul_backward = silu_and_mul_backward_f16,
    rotary_embedding = rotary_embedding_f16, adamw_step = adamw_step_f16,
    sum_of_squares = sum_of_squares_f16, clip_by_global_norm = clip_by_global_norm_f16,
    attention_forward = attention::attention_forward_f16, attention_forward_mma = attention::attention_forward_mma_f16,
    attention_backward_dq = attention::attention_backward_dq_f16,
    attention_backward_dkv = attention::attention_backward_dkv_f16,
    attention_backward_delta = attention_backward::attention_backward_delta_f16,
    attention_backward_dkv_mma = attention_backward::attention_backward_dkv_mma_f16, attention_backward_dq_mma = attention_backward::attention_backward_dq_mma_f16,
    attention_backward_prep = attention_backward::attention_backward_prep_f16, attention_backward_dq_convert = attention_backward::attention_backward_dq_convert_f16,
    rmsnorm_forward_packed = packed::rmsnorm_forward_packed_f16, rmsnorm_forward_packed_t96 = packed::rmsnorm_forward_packed_t96_f16, rmsnorm_forward_packed_t128 = packed::rmsnorm_forward_packed_t128_f16, add_rmsnorm_forward_packed = packed::add_rmsnorm_forward_packed_f16, add_rmsnorm_forward_packed_t512 = packed::add_rmsnorm_forward_packed_t512_f16,
    layernorm_forward_packed16 = packed::wide::layernorm_forward_packed16_f16, layernorm_forward_packed16_t256 = packed::layernorm_forward_packed16_t256_f16,
    rmsnorm_forward_packed16 = packed::rmsnorm_forward_packed16_f16,
    cross_entropy_backward_packed = packed::cross_entropy_backward_packed_f16,
    layernorm_forward_packed = packed::layernorm_forward_packed_f16, add_layernorm_forward_packed = packed::add_layernorm_forward_packed_f16,
    norm_backward_packed = packed::norm_backward_packed_f16, softmax_forward_packed = packed::softmax_forward_packed_f16, softmax_forward_packed_t512 = packed::softmax_forward_packed_t512_f16,
    gelu_forward_packed = packed::gelu_forward_packed_f16, gelu_backward_packed = packed::gelu_backward_packed_f16,
    norm_backward_weights_partial_packed = packed::norm_backward_weights_partial_packed_f16,
    layernorm_backward_fused_packed = packed::layernorm_backward_fused_packed_f16,
    rmsnorm_backward_fused_packed = packed::rmsnorm_backward_fused_packed_f16,
    sum_of_squares_packed = packed::sum_of_squares_packed_f16,
    silu_and_mul_forward_packed = packed::silu_and_mul_forward_packed_f16,
    silu_and_mul_backward_packed = packed::silu_and_mul_backward_packed_f16,
    rotary_embedding_packed = packed::rotary_embedding_packed_f16, adamw_step_packed = packed::adamw_step_packed_f16,
);
