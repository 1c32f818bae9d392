//! The `#[kernel]`s of `ferrocuda-kernels`, compiled to PTX at build time.
//!
//! Every kernel is generic over the element type ([`Float`]: `f32`, `bf16`, `f16`) and built
//! once per type (`rmsnorm_forward_f32`, `rmsnorm_forward_bf16`, ...); arithmetic is in `f32`
//! whatever the storage type. The kernels are safe: their outputs are the kernel model's
//! disjoint outputs (`PerWarpRow` for row kernels, one warp per row; `DisjointSlice` for
//! element-wise ones), so no launch can race. The host crate `ferrocuda-kernels` checks every
//! shape before it launches them; call them through it.
//!
//! Row kernels use one warp per row: lane `l` handles columns `l, l + 32, ...`, and row
//! statistics are warp shuffles. That is correct for any width; it is fast for widths of a few
//! thousand columns and slower for very wide rows (a vocabulary of 50k), where a block per row
//! would do better (not written yet).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use core::num::{NonZeroU32, NonZeroU64};

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{AtomicSlice, DisjointSlice, PerWarpRow, WarpRow, grid_stride, warp_row};
pub use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::half::{F32ToHalf, HalfFloat};
// `DeviceFloat` gives `sqrt`/`exp`/`ln`/`tanh`/`mul_add` on the GPU; the host has `std`'s.
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::DeviceFloat;
use ferrocuda_device::{kernel, warp};

pub mod attention;

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
}

/// Row `row` of a row-major matrix with `cols` columns, if it lies inside `x`.
#[inline(always)]
pub(crate) fn row_of<T>(x: &[T], row: u32, cols: u32) -> Option<&[T]> {
    let start = row as usize * cols as usize;
    x.get(start..start + cols as usize)
}

/// This lane's elements of a row: `lane, lane + 32, ...` (the columns its `LaneRow` owns).
#[inline(always)]
pub(crate) fn lanes<T: Float>(row: &[T], lane: usize) -> impl Iterator<Item = f32> + '_ {
    row.iter().skip(lane).step_by(32).map(|v| v.to_f32())
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

/// Mean (0 for RMS) and `1 / sqrt(variance + eps)` of a row a warp holds; `values()` yields
/// this lane's elements. Two passes over the row (the mean, then the centred squares), so
/// large means do not cancel.
#[inline(always)]
fn row_statistics<I: Iterator<Item = f32>>(values: impl Fn() -> I, cols: u32, centred: bool, eps: f32) -> (f32, f32) {
    let n = cols as f32;
    let mean = if centred { warp::reduce_sum(values().sum::<f32>()) / n } else { 0.0 };
    let squares = values().map(|v| (v - mean) * (v - mean)).sum::<f32>();
    let variance = warp::reduce_sum(squares) / n;
    (mean, 1.0 / (variance + eps).sqrt())
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
    let lane = me.lane() as usize;
    let (Some(x), Some(weight)) = (row_of(x, me.row(), cols), weight.get(..cols as usize)) else { return };
    let (_, r) = row_statistics(|| lanes(x, lane), cols, false, eps);
    if let Some(row) = out.row_mut(me) {
        for ((o, v), w) in row.iter_mut().zip(lanes(x, lane)).zip(lanes(weight, lane)) {
            *o = T::from_f32(v * r * w);
        }
    }
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
    let lane = me.lane() as usize;
    let (Some(x), Some(residual), Some(weight)) = (row_of(x, me.row(), cols), row_of(residual, me.row(), cols), weight.get(..cols as usize)) else {
        return;
    };
    let h = || lanes(x, lane).zip(lanes(residual, lane)).map(|(a, b)| T::from_f32(a + b).to_f32());
    let (_, r) = row_statistics(h, cols, false, eps);
    if let (Some(out_row), Some(sum_row)) = (out.row_mut(me), sum.row_mut(me)) {
        for (((o, s), v), w) in out_row.iter_mut().zip(sum_row.iter_mut()).zip(h()).zip(lanes(weight, lane)) {
            *s = T::from_f32(v);
            *o = T::from_f32(v * r * w);
        }
    }
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
    let lane = me.lane() as usize;
    let (Some(x), Some(weight), Some(bias)) = (row_of(x, me.row(), cols), weight.get(..cols as usize), bias.get(..cols as usize)) else { return };
    let (m, r) = row_statistics(|| lanes(x, lane), cols, true, eps);
    if let Some(row) = out.row_mut(me) {
        for (((o, v), w), b) in row.iter_mut().zip(lanes(x, lane)).zip(lanes(weight, lane)).zip(lanes(bias, lane)) {
            *o = T::from_f32((v - m) * r * w + b);
        }
    }
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
    let lane = me.lane() as usize;
    let (Some(x), Some(residual), Some(weight), Some(bias)) =
        (row_of(x, me.row(), cols), row_of(residual, me.row(), cols), weight.get(..cols as usize), bias.get(..cols as usize))
    else {
        return;
    };
    let h = || lanes(x, lane).zip(lanes(residual, lane)).map(|(a, b)| T::from_f32(a + b).to_f32());
    let (m, r) = row_statistics(h, cols, true, eps);
    if let (Some(out_row), Some(sum_row)) = (out.row_mut(me), sum.row_mut(me)) {
        for ((((o, s), v), w), b) in out_row.iter_mut().zip(sum_row.iter_mut()).zip(h()).zip(lanes(weight, lane)).zip(lanes(bias, lane)) {
            *s = T::from_f32(v);
            *o = T::from_f32((v - m) * r * w + b);
        }
    }
    write_row_value(&mut mean, me, m);
    write_row_value(&mut rstd, me, r);
}

/// The input gradient of layer norm (`centred`) or RMSNorm for one row: with `xhat = (x -
/// mean) * rstd` and `g = dout * weight`, `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`
/// (RMSNorm: no `mean(g)` term, `mean = 0`), plus `dresidual` when `add` (the gradient that
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
    let lane = me.lane() as usize;
    let n = cols as f32;
    let g = || lanes(dout, lane).zip(lanes(weight, lane)).map(|(d, w)| d * w);
    let xhat = || lanes(x, lane).map(|v| (v - mean) * rstd);
    let g_mean = if centred { warp::reduce_sum(g().sum::<f32>()) / n } else { 0.0 };
    let gx_mean = warp::reduce_sum(g().zip(xhat()).map(|(g, xh)| g * xh).sum::<f32>()) / n;
    let Some(row) = dx.row_mut(me) else { return };
    let extra = dresidual.into_iter().flat_map(|d| lanes(d, lane)).chain(core::iter::repeat(0.0));
    for (((o, g), xh), e) in row.iter_mut().zip(g()).zip(xhat()).zip(extra) {
        *o = T::from_f32(rstd * (g - g_mean - xh * gx_mean) + e);
    }
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
pub fn rmsnorm_backward<T: Float>(dout: &[T], x: &[T], weight: &[T], rstd: &[f32], dresidual: &[T], mut dx: PerWarpRow<T>, rows: u32, cols: u32, add_dresidual: u32) {
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

/// Layer norm's weight and bias gradients, one thread per column summing over the rows in
/// order (deterministic): `dweight[c] = sum_r dout[r, c] * xhat[r, c]`, `dbias[c] = sum_r
/// dout[r, c]`, written (not accumulated) in `f32`.
#[kernel(instances(f32, bf16, f16), same_len(dweight, dbias))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_weights<T: Float>(
    dout: &[T],
    x: &[T],
    mean: &[f32],
    rstd: &[f32],
    mut dweight: DisjointSlice<f32>,
    mut dbias: DisjointSlice<f32>,
    rows: u32,
    cols: u32,
) {
    for c in grid_stride(dweight.len().min(cols as usize)) {
        let (mut dw, mut db) = (0.0f32, 0.0f32);
        for r in 0..rows as usize {
            let at = r * cols as usize + c.get();
            if let (Some(d), Some(v), Some(&m), Some(&s)) = (dout.get(at), x.get(at), mean.get(r), rstd.get(r)) {
                let d = d.to_f32();
                dw += d * (v.to_f32() - m) * s;
                db += d;
            }
        }
        if let Some(w) = dweight.get_mut(c) {
            *w = dw;
        }
        if let Some(b) = dbias.get_mut(c) {
            *b = db;
        }
    }
}

/// RMSNorm's weight gradient, one thread per column (deterministic): `dweight[c] = sum_r
/// dout[r, c] * x[r, c] * rstd[r]`, written in `f32`.
#[kernel(instances(f32, bf16, f16))]
pub fn rmsnorm_backward_weight<T: Float>(dout: &[T], x: &[T], rstd: &[f32], mut dweight: DisjointSlice<f32>, rows: u32, cols: u32) {
    for c in grid_stride(dweight.len().min(cols as usize)) {
        let mut dw = 0.0f32;
        for r in 0..rows as usize {
            let at = r * cols as usize + c.get();
            if let (Some(d), Some(v), Some(&s)) = (dout.get(at), x.get(at), rstd.get(r)) {
                dw += d.to_f32() * v.to_f32() * s;
            }
        }
        if let Some(w) = dweight.get_mut(c) {
            *w = dw;
        }
    }
}

/// Online maximum and `sum(exp(x - max))` of a row a warp holds (each lane over its columns,
/// then combined by shuffles; the sum is rescaled whenever the maximum grows).
#[inline(always)]
pub(crate) fn online_max_sum(values: impl Iterator<Item = f32>) -> (f32, f32) {
    // A finite start: a lane that sees no element combines as (MIN, 0) without NaN.
    let (mut max, mut sum) = (f32::MIN, 0.0f32);
    for v in values {
        if v > max {
            sum *= (max - v).exp();
            max = v;
        }
        sum += (v - max).exp();
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
    let lane = me.lane() as usize;
    let Some(x) = row_of(x, me.row(), cols) else { return };
    let (max, sum) = online_max_sum(lanes(x, lane));
    let scale = 1.0 / sum;
    if let Some(row) = out.row_mut(me) {
        for (o, v) in row.iter_mut().zip(lanes(x, lane)) {
            *o = T::from_f32((v - max).exp() * scale);
        }
    }
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
    let lane = me.lane() as usize;
    let (Some(x), Some(&target)) = (row_of(logits, me.row(), vocab), targets.get(me.row() as usize)) else { return };
    let (max, sum) = online_max_sum(lanes(x, lane));
    let lse = max + sum.ln();
    let (loss, scale) = match x.get(target as usize) {
        Some(t) => (lse - t.to_f32(), dloss),
        None if target == IGNORE_TARGET => (0.0, 0.0),
        None => (f32::NAN, f32::NAN),
    };
    write_row_value(&mut losses, me, loss);
    if let Some(row) = dlogits.row_mut(me) {
        let mut c = lane as u32;
        for (o, v) in row.iter_mut().zip(lanes(x, lane)) {
            let hot = if c == target { 1.0 } else { 0.0 };
            *o = T::from_f32(((v - lse).exp() - hot) * scale);
            c += 32;
        }
    }
}

/// `sqrt(2 / pi)`, GPT-2's GELU scaling factor.
const GELU_SCALE: f32 = 0.797_884_6;

/// GPT-2's GELU (tanh approximation): `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let u = GELU_SCALE * (x + 0.044_715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

/// The derivative of [`gelu`].
#[inline(always)]
pub fn gelu_derivative(x: f32) -> f32 {
    let u = GELU_SCALE * (x + 0.044_715 * x * x * x);
    let t = u.tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_SCALE * (1.0 + 3.0 * 0.044_715 * x * x)
}

/// `out = gelu(x)` element-wise (grid-stride loop).
#[kernel(instances(f32, bf16, f16), same_len(x, out))]
pub fn gelu_forward<T: Float>(x: &[T], mut out: DisjointSlice<T>) {
    for i in grid_stride(out.len()) {
        if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
            *o = T::from_f32(gelu(v.to_f32()));
        }
    }
}

/// `dx = gelu'(x) * dout` element-wise.
#[kernel(instances(f32, bf16, f16), same_len(x, dout, dx))]
pub fn gelu_backward<T: Float>(x: &[T], dout: &[T], mut dx: DisjointSlice<T>) {
    for i in grid_stride(dx.len()) {
        if let (Some(o), Some(v), Some(d)) = (dx.get_mut(i), x.get(i.get()), dout.get(i.get())) {
            *o = T::from_f32(gelu_derivative(v.to_f32()) * d.to_f32());
        }
    }
}

/// `x * sigmoid(x)`.
#[inline(always)]
fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// SiLU-and-mul (SwiGLU's gate): `input` is `rows x 2d` (gate in columns `0..d`, up in
/// `d..2d`), `out[r, c] = silu(gate[r, c]) * up[r, c]` for `out` of `rows x d`.
#[kernel(instances(f32, bf16, f16))]
pub fn silu_and_mul_forward<T: Float>(input: &[T], mut out: DisjointSlice<T>, d: NonZeroU32) {
    let d64 = NonZeroU64::from(d);
    for i in grid_stride(out.len()) {
        let (r, c) = (i.get() as u64 / d64, i.get() as u64 % d64);
        let at = (r * 2 * d64.get() + c) as usize;
        if let (Some(o), Some(g), Some(u)) = (out.get_mut(i), input.get(at), input.get(at + d.get() as usize)) {
            *o = T::from_f32(silu(g.to_f32()) * u.to_f32());
        }
    }
}

/// SiLU-and-mul's input gradient: `dinput` (`rows x 2d`) from `dout` (`rows x d`) and the
/// forward's `input`: `dgate = dout * up * silu'(gate)`, `dup = dout * silu(gate)`.
#[kernel(instances(f32, bf16, f16), same_len(input, dinput))]
pub fn silu_and_mul_backward<T: Float>(input: &[T], dout: &[T], mut dinput: DisjointSlice<T>, d: NonZeroU32) {
    let d64 = NonZeroU64::from(d);
    let width = d64.saturating_mul(const { NonZeroU64::new(2).unwrap() });
    for i in grid_stride(dinput.len()) {
        let (r, c) = (i.get() as u64 / width, i.get() as u64 % width);
        let is_gate = c < d64.get();
        let col = if is_gate { c } else { c - d64.get() };
        let base = (r * width.get()) as usize;
        let (Some(g), Some(u), Some(dy)) =
            (input.get(base + col as usize), input.get(base + (col + d64.get()) as usize), dout.get((r * d64.get() + col) as usize))
        else {
            continue;
        };
        let (g, u, dy) = (g.to_f32(), u.to_f32(), dy.to_f32());
        let s = 1.0 / (1.0 + (-g).exp());
        let value = if is_gate { dy * u * s * (1.0 + g * (1.0 - s)) } else { dy * g * s };
        if let Some(o) = dinput.get_mut(i) {
            *o = T::from_f32(value);
        }
    }
}

/// Shape of a rotary-embedding launch (by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
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
pub fn rotary_embedding<T: Float>(x: &[T], positions: &[u32], cos: &[f32], sin: &[f32], mut out: DisjointSlice<T>, head_dim: NonZeroU32, heads: NonZeroU32, shape: RopeShape) {
    let half = (shape.rotary_dim / 2) as usize;
    let sign = if shape.inverse != 0 { -1.0 } else { 1.0 };
    for i in grid_stride(out.len()) {
        let (row, c) = (i.get() as u64 / NonZeroU64::from(head_dim), (i.get() as u64 % NonZeroU64::from(head_dim)) as usize);
        let token = (row / NonZeroU64::from(heads)) as usize;
        let value = if c >= 2 * half {
            x.get(i.get()).map(|v| v.to_f32())
        } else {
            let (k, first) = if c < half { (c, true) } else { (c - half, false) };
            let pair = i.get() - c + k;
            let table = positions.get(token).and_then(|&p| if p < shape.max_positions { Some(p as usize * half + k) } else { None });
            match (table.and_then(|t| cos.get(t).zip(sin.get(t))), x.get(pair), x.get(pair + half)) {
                (Some((&cs, &sn)), Some(x1), Some(x2)) => {
                    let (x1, x2, sn) = (x1.to_f32(), x2.to_f32(), sign * sn);
                    Some(if first { x1 * cs - x2 * sn } else { x2 * cs + x1 * sn })
                }
                _ => Some(f32::NAN),
            }
        };
        if let (Some(o), Some(v)) = (out.get_mut(i), value) {
            *o = T::from_f32(v);
        }
    }
}

/// AdamW's hyperparameters for one step (by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
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
    for i in grid_stride(params.len()) {
        let (Some(p), Some(m_i), Some(v_i), Some(g)) = (params.get_mut(i), m.get_mut(i), v.get_mut(i), grads.get(i.get())) else { continue };
        let g = g.to_f32() * hp.grad_scale;
        let mean = hp.beta1 * *m_i + (1.0 - hp.beta1) * g;
        let var = hp.beta2 * *v_i + (1.0 - hp.beta2) * g * g;
        *m_i = mean;
        *v_i = var;
        let (mean, var) = (mean / hp.beta1_correction, var / hp.beta2_correction);
        let old = p.to_f32();
        *p = T::from_f32(old - hp.learning_rate * (mean / (var.sqrt() + hp.eps) + hp.weight_decay * old));
    }
}

/// Adds `sum(x^2)` into `total[0]` (f32, atomically, one add per warp): call once per tensor
/// on one `total` to get the squared global norm of several gradients.
#[kernel(instances(f32, bf16, f16))]
pub fn sum_of_squares<T: Float>(x: &[T], total: AtomicSlice<f32>) {
    let mut sum = 0.0f32;
    for i in grid_stride(x.len()) {
        if let Some(v) = x.get(i.get()) {
            let v = v.to_f32();
            sum += v * v;
        }
    }
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
    for i in grid_stride(grads.len()) {
        if let Some(g) = grads.get_mut(i) {
            *g = T::from_f32(g.to_f32() * scale);
        }
    }
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
    layernorm_backward_weights = layernorm_backward_weights_f32, rmsnorm_backward_weight = rmsnorm_backward_weight_f32,
    softmax_forward = softmax_forward_f32, cross_entropy_forward_backward = cross_entropy_forward_backward_f32,
    gelu_forward = gelu_forward_f32, gelu_backward = gelu_backward_f32,
    silu_and_mul_forward = silu_and_mul_forward_f32, silu_and_mul_backward = silu_and_mul_backward_f32,
    rotary_embedding = rotary_embedding_f32, adamw_step = adamw_step_f32,
    sum_of_squares = sum_of_squares_f32, clip_by_global_norm = clip_by_global_norm_f32,
    attention_forward = attention::attention_forward_f32, attention_backward_dq = attention::attention_backward_dq_f32,
    attention_backward_dkv = attention::attention_backward_dkv_f32,
);
instances_of!(for_bf16, "The `bf16` instances.":
    rmsnorm_forward = rmsnorm_forward_bf16, add_rmsnorm_forward = add_rmsnorm_forward_bf16,
    layernorm_forward = layernorm_forward_bf16, add_layernorm_forward = add_layernorm_forward_bf16,
    layernorm_backward = layernorm_backward_bf16, rmsnorm_backward = rmsnorm_backward_bf16,
    layernorm_backward_weights = layernorm_backward_weights_bf16, rmsnorm_backward_weight = rmsnorm_backward_weight_bf16,
    softmax_forward = softmax_forward_bf16, cross_entropy_forward_backward = cross_entropy_forward_backward_bf16,
    gelu_forward = gelu_forward_bf16, gelu_backward = gelu_backward_bf16,
    silu_and_mul_forward = silu_and_mul_forward_bf16, silu_and_mul_backward = silu_and_mul_backward_bf16,
    rotary_embedding = rotary_embedding_bf16, adamw_step = adamw_step_bf16,
    sum_of_squares = sum_of_squares_bf16, clip_by_global_norm = clip_by_global_norm_bf16,
    attention_forward = attention::attention_forward_bf16, attention_backward_dq = attention::attention_backward_dq_bf16,
    attention_backward_dkv = attention::attention_backward_dkv_bf16,
);
instances_of!(for_f16, "The `f16` instances.":
    rmsnorm_forward = rmsnorm_forward_f16, add_rmsnorm_forward = add_rmsnorm_forward_f16,
    layernorm_forward = layernorm_forward_f16, add_layernorm_forward = add_layernorm_forward_f16,
    layernorm_backward = layernorm_backward_f16, rmsnorm_backward = rmsnorm_backward_f16,
    layernorm_backward_weights = layernorm_backward_weights_f16, rmsnorm_backward_weight = rmsnorm_backward_weight_f16,
    softmax_forward = softmax_forward_f16, cross_entropy_forward_backward = cross_entropy_forward_backward_f16,
    gelu_forward = gelu_forward_f16, gelu_backward = gelu_backward_f16,
    silu_and_mul_forward = silu_and_mul_forward_f16, silu_and_mul_backward = silu_and_mul_backward_f16,
    rotary_embedding = rotary_embedding_f16, adamw_step = adamw_step_f16,
    sum_of_squares = sum_of_squares_f16, clip_by_global_norm = clip_by_global_norm_f16,
    attention_forward = attention::attention_forward_f16, attention_backward_dq = attention::attention_backward_dq_f16,
    attention_backward_dkv = attention::attention_backward_dkv_f16,
);
