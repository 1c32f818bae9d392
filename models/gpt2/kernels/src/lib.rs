//! The kernels the GPT-2 trainer (`ferrocuda-gpt2`) needs that `ferrocuda-kernels` does not
//! have (yet): candidates for the library.
//!
//! - [`encoder_forward`]: token embedding gather plus position embedding;
//! - [`encoder_backward_wte`] (scatter-add of the token embedding's gradient, `f32` atomics)
//!   and [`encoder_backward_wpe`] (the position embedding's gradient, a deterministic sum over
//!   the batch);
//! - [`split_heads`] (`[B, T, .., H, D]` rows to `[B, H, T, D]` heads, for the attention
//!   kernels' fast layout) and [`merge_heads`] (back, up to three tensors side by side, as the
//!   QKV projection's gradient wants them);
//! - [`column_partials()`] and [`sum_partials()`]: a bias gradient (the sum over rows of the
//!   output gradient) in two deterministic steps;
//! - [`cast_from_f32`]: the `f32` master weights rounded to the parameters' storage type.
//!
//! Index math is 32-bit: the host keeps every operand below 2^32 elements.
//!
//! Every kernel is element-wise over its output (a grid-stride loop, `DisjointSlice`), generic
//! over the storage type ([`Elem`]: `f32`, `bf16`), with `f32` arithmetic; built once per type
//! (`encoder_forward_f32`, `encoder_forward_bf16`, ...).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use bytemuck::Pod;
use ferrocuda_device::global::{AtomicSlice, DisjointSlice, grid_stride};
pub use ferrocuda_device::half::bf16;
use ferrocuda_device::half::{F32ToHalf, HalfFloat};
use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::bf16 {}
}

/// A storage type of these kernels: `f32` or `bf16` (sealed); arithmetic is `f32`.
pub trait Elem: Pod + Default + sealed::Sealed {
    /// The value as an `f32` (exact).
    fn widen(self) -> f32;
    /// `value` rounded to this type (to nearest, ties to even).
    fn narrow(value: f32) -> Self;
}

impl Elem for f32 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    #[inline(always)]
    fn narrow(value: f32) -> f32 {
        value
    }
}

impl Elem for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        HalfFloat::widen(self)
    }
    #[inline(always)]
    fn narrow(value: f32) -> bf16 {
        value.to_bf16()
    }
}

/// `out[b, t, c] = wte[tokens[b, t], c] + wpe[t, c]`: `out` is `[B * T, C]`, `tokens` `[B *
/// T]` (a token past the table gives 0, never a read out of bounds), `wpe` at least `T` rows.
#[kernel(instances(f32, bf16))]
pub fn encoder_forward<T: Elem>(tokens: &[u32], wte: &[T], wpe: &[T], mut out: DisjointSlice<T>, seq: u32, channels: u32) {
    for i in grid_stride(out.len()) {
        // 32-bit index math (64-bit division is emulated, tens of instructions): the host
        // keeps every operand below 2^32 elements.
        let at = i.get() as u32;
        let (bt, c) = (at / channels, at % channels);
        let t = bt % seq;
        let token = tokens.get(bt as usize).map_or(usize::MAX, |&v| v as usize);
        let w = wte.get(token.saturating_mul(channels as usize).saturating_add(c as usize)).map_or(0.0, |v| v.widen());
        let p = wpe.get((t * channels + c) as usize).map_or(0.0, |v| v.widen());
        if let Some(o) = out.get_mut(i) {
            *o = T::narrow(w + p);
        }
    }
}

/// `dwte[tokens[bt], c] += dout[bt, c]` (f32 atomic adds, so the order of the sums varies
/// from run to run in the last bits). `dout` is `[B * T, C]`.
#[kernel(instances(f32, bf16))]
pub fn encoder_backward_wte<T: Elem>(tokens: &[u32], dout: &[T], dwte: AtomicSlice<f32>, channels: u32) {
    for i in grid_stride(dout.len()) {
        let index = i.get() as u32;
        let (bt, c) = (index / channels, index % channels);
        if let Some(&token) = tokens.get(bt as usize) {
            let at = token as usize * channels as usize + c as usize;
            if at < dwte.len() {
                dwte.add(at, dout[i.get()].widen());
            }
        }
    }
}

/// `dwpe[t, c] = sum_b dout[b, t, c]` (written, in batch order: deterministic). `dwpe` is
/// `[T, C]`, `dout` `[batch * T, C]`.
#[kernel(instances(f32, bf16))]
pub fn encoder_backward_wpe<T: Elem>(dout: &[T], mut dwpe: DisjointSlice<f32>, batch: u32) {
    let plane = dwpe.len();
    for i in grid_stride(plane) {
        let mut sum = 0.0f32;
        for b in 0..batch as usize {
            sum += dout.get(b * plane + i.get()).map_or(0.0, |v| v.widen());
        }
        if let Some(o) = dwpe.get_mut(i) {
            *o = sum;
        }
    }
}

/// The geometry of a head permute: `batch x seq` rows of `row_stride` elements, of which the
/// `heads x head_dim` starting at `offset` are one tensor's heads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
pub struct Heads {
    /// Sequence length `T`.
    pub seq: u32,
    /// Heads `H`.
    pub heads: u32,
    /// Elements per head `D`.
    pub head_dim: u32,
    /// Elements per row of the row-major side (`3 C` for a fused QKV, `C` for one tensor).
    pub row_stride: u32,
    /// Where this tensor's `H x D` block starts in each row.
    pub offset: u32,
}

/// `dst[b, h, t, d] = src[(b T + t) row_stride + offset + h D + d]`: one tensor's heads out of
/// row-major rows, into `[B, H, T, D]`.
#[kernel(instances(f32, bf16))]
pub fn split_heads<T: Elem>(src: &[T], mut dst: DisjointSlice<T>, shape: Heads) {
    let (seq, heads, dim) = (shape.seq, shape.heads, shape.head_dim);
    for i in grid_stride(dst.len()) {
        let index = i.get() as u32;
        let d = index % dim;
        let rest = index / dim;
        let t = rest % seq;
        let bh = rest / seq;
        let (b, h) = (bh / heads, bh % heads);
        let at = (b * seq + t) as usize * shape.row_stride as usize + (shape.offset + h * dim + d) as usize;
        let value = src.get(at).copied().unwrap_or_default();
        if let Some(o) = dst.get_mut(i) {
            *o = value;
        }
    }
}

/// The inverse of [`split_heads`] for `parts` tensors side by side: `dst` is `[B T, parts H
/// D]` and its block `p` of each row comes from `[B, H, T, D]` tensor `p` (`q`, `k`, `v`;
/// `parts` 1 reads only `q`). `shape.row_stride` and `shape.offset` are not used.
#[kernel(instances(f32, bf16))]
pub fn merge_heads<T: Elem>(q: &[T], k: &[T], v: &[T], mut dst: DisjointSlice<T>, shape: Heads, parts: u32) {
    let (seq, heads, dim) = (shape.seq, shape.heads, shape.head_dim);
    let width = heads * dim;
    let row = parts * width;
    for i in grid_stride(dst.len()) {
        let index = i.get() as u32;
        let (bt, col) = (index / row, index % row);
        let (part, within) = (col / width, col % width);
        let (h, d) = (within / dim, within % dim);
        let (b, t) = (bt / seq, bt % seq);
        let at = (((b * heads + h) * seq + t) * dim + d) as usize;
        let src = match part {
            0 => q,
            1 => k,
            _ => v,
        };
        let value = src.get(at).copied().unwrap_or_default();
        if let Some(o) = dst.get_mut(i) {
            *o = value;
        }
    }
}

/// Rows one thread of [`column_partials`] sums.
pub const ROWS_PER_CHUNK: u32 = 256;

/// The first step of a column sum (a bias gradient, `sum over rows of dout`), deterministic:
/// `partial[k, c] = sum of dout[r, c]` over the rows `r` of chunk `k` ([`ROWS_PER_CHUNK`]
/// each), in order. Adjacent threads take adjacent columns, so each row's loads coalesce.
/// `partial` is `ceil(rows / ROWS_PER_CHUNK) x cols`.
#[kernel(instances(f32, bf16))]
pub fn column_partials<T: Elem>(dout: &[T], mut partial: DisjointSlice<f32>, rows: u32, cols: u32) {
    for i in grid_stride(partial.len()) {
        let index = i.get() as u32;
        let (chunk, c) = (index / cols, index % cols);
        let first = chunk * ROWS_PER_CHUNK;
        let last = (first + ROWS_PER_CHUNK).min(rows);
        let mut sum = 0.0f32;
        for r in first..last {
            sum += dout.get((r * cols + c) as usize).map_or(0.0, |v| v.widen());
        }
        if let Some(o) = partial.get_mut(i) {
            *o = sum;
        }
    }
}

/// The second step: `out[c] = sum over k of partial[k, c]` (in order) for `chunks` chunks.
#[kernel]
pub fn sum_partials(partial: &[f32], mut out: DisjointSlice<f32>, chunks: u32) {
    let cols = out.len();
    for i in grid_stride(cols) {
        let mut sum = 0.0f32;
        for k in 0..chunks as usize {
            sum += partial.get(k * cols + i.get()).copied().unwrap_or(0.0);
        }
        if let Some(o) = out.get_mut(i) {
            *o = sum;
        }
    }
}

/// `dst[i] = round(src[i])`: the `f32` master weights to the parameters' storage type.
#[kernel(instances(f32, bf16))]
pub fn cast_from_f32<T: Elem>(src: &[f32], mut dst: DisjointSlice<T>) {
    for i in grid_stride(dst.len()) {
        let value = src.get(i.get()).copied().unwrap_or(0.0);
        if let Some(o) = dst.get_mut(i) {
            *o = T::narrow(value);
        }
    }
}
