//! The kernels the GPT-2 trainer (`ferrocuda-gpt2`) needs that `ferrocuda-kernels` does not
//! have (yet): candidates for the library.
//!
//! - [`encoder_forward`]: token embedding gather plus position embedding;
//! - [`encoder_backward_wte`] (scatter-add of the token embedding's gradient, `f32` atomics)
//!   and [`encoder_backward_wpe`] (the position embedding's gradient, a deterministic sum over
//!   the batch);
//! - [`split_heads`] (`[B, T, .., H, D]` rows to `[B, H, T, D]` heads, for the attention
//!   kernels' fast layout) and [`merge_heads`] (back, up to three tensors side by side, as the
//!   QKV projection's gradient wants them), and their packed forms [`split_heads_packed`] and
//!   [`merge_heads_packed`] (8 elements a thread, 16-byte accesses);
//! - [`column_partials()`] and [`sum_partials()`] or [`sum_partials_split()`] (a warp per 4
//!   columns): a bias gradient (the sum over rows of the output gradient) in two deterministic
//!   steps;
//! - [`cast_from_f32`]: the `f32` master weights rounded to the parameters' storage type.
//!
//! Index math is 32-bit: the host keeps every operand below 2^32 elements.
//!
//! Every kernel but `sum_partials_split` is element-wise over its output (a grid-stride loop,
//! `DisjointSlice`, or `DisjointChunks` of 8 for the packed ones), generic
//! over the storage type ([`Elem`]: `f32`, `bf16`), with `f32` arithmetic; built once per type
//! (`encoder_forward_f32`, `encoder_forward_bf16`, ...).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{AtomicSlice, DisjointChunks, DisjointSlice, PerWarpRow, ThreadIndex, grid_stride, warp_row};
pub use ferrocuda_device::half::bf16;
use ferrocuda_device::half::{F32ToHalf, HalfFloat};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::vector::{load16, store16};
use ferrocuda_device::{kernel, warp};

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

/// Elements per thread of the packed kernels: 16 bytes of `bf16`, 32 of `f32`.
pub const CHUNK: usize = 8;

/// 16 bytes, aligned to 16: one vector access.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Vec16([u32; 4]);

/// 16-byte accesses per chunk of 8 `T`s: 1 (`bf16`) or 2 (`f32`).
const fn words<T>() -> usize {
    (CHUNK * core::mem::size_of::<T>()).div_ceil(16)
}

/// The 8 elements of `x` at `at .. at + 8` as raw words (zeros past the end): 16-byte loads
/// when the run is 16-byte aligned (checked here, at run time), element loads otherwise.
#[inline(always)]
fn load8<T: Elem>(x: &[T], at: usize) -> [Vec16; 2] {
    let mut raw = [Vec16::default(); 2];
    let n = words::<T>();
    match x.get(at..at + CHUNK).map(bytemuck::try_cast_slice::<T, Vec16>) {
        Some(Ok(vectors)) if vectors.len() == n => unroll::<2>(|k| {
            if k < n {
                raw[k] = load16(&vectors[k]);
            }
        }),
        _ => {
            let values: &mut [T] = bytemuck::cast_slice_mut(&mut raw[..n]);
            unroll::<CHUNK>(|u| values[u] = x.get(at + u).copied().unwrap_or_default());
        }
    }
    raw
}

/// The 8 elements of `raw` (from [`load8`]) as `T`s.
#[inline(always)]
fn values<T: Elem>(raw: &[Vec16; 2]) -> &[T] {
    bytemuck::cast_slice(&raw[..words::<T>()])
}

/// Stores `raw` (8 `T`s) into this thread's chunk `i` of `out`: 16-byte stores when the chunk
/// is aligned, element stores otherwise; nothing past the last whole chunk.
#[inline(always)]
fn store8<T: Elem>(out: &mut DisjointChunks<T, CHUNK>, i: ThreadIndex, raw: [Vec16; 2]) {
    let Some(chunk) = out.get_mut(i) else { return };
    let n = words::<T>();
    match bytemuck::try_cast_slice_mut::<T, Vec16>(&mut chunk[..]) {
        Ok(vectors) if vectors.len() == n => unroll::<2>(|k| {
            if k < n {
                store16(&mut vectors[k], raw[k]);
            }
        }),
        _ => chunk.copy_from_slice(&values::<T>(&raw)[..CHUNK]),
    }
}

/// [`split_heads`] 8 elements per thread (16-byte accesses): chunk `i` of `dst` is head
/// positions `8 (i % (D / 8)) ..` of row `i / (D / 8)` of `[B, H, T, D]`. The host picks it
/// when `head_dim`, `row_stride` and `offset` are multiples of 8.
#[kernel(instances(f32, bf16))]
pub fn split_heads_packed<T: Elem>(src: &[T], mut dst: DisjointChunks<T, 8>, shape: Heads) {
    let (seq, heads, dim) = (shape.seq, shape.heads, shape.head_dim);
    let per_head = dim / CHUNK as u32;
    for i in grid_stride(dst.len()) {
        let index = i.get() as u32;
        let d = (index % per_head.max(1)) * CHUNK as u32;
        let rest = index / per_head.max(1);
        let t = rest % seq.max(1);
        let bh = rest / seq.max(1);
        let (b, h) = (bh / heads.max(1), bh % heads.max(1));
        let at = (b * seq + t) as usize * shape.row_stride as usize + (shape.offset + h * dim + d) as usize;
        store8(&mut dst, i, load8(src, at));
    }
}

/// [`merge_heads`] 8 elements per thread (16-byte accesses): chunk `i` of `dst` is columns
/// `8 (i % (parts H D / 8)) ..` of row `i / (parts H D / 8)`. The host picks it when
/// `head_dim` is a multiple of 8.
#[kernel(instances(f32, bf16))]
pub fn merge_heads_packed<T: Elem>(q: &[T], k: &[T], v: &[T], mut dst: DisjointChunks<T, 8>, shape: Heads, parts: u32) {
    let (seq, heads, dim) = (shape.seq.max(1), shape.heads, shape.head_dim.max(1));
    let width = (heads * dim).max(1);
    let row_chunks = (parts * width / CHUNK as u32).max(1);
    for i in grid_stride(dst.len()) {
        let index = i.get() as u32;
        let (bt, col) = (index / row_chunks, (index % row_chunks) * CHUNK as u32);
        let (part, within) = (col / width, col % width);
        let (h, d) = (within / dim, within % dim);
        let (b, t) = (bt / seq, bt % seq);
        let at = (((b * heads + h) * seq + t) * dim + d) as usize;
        let src = match part {
            0 => q,
            1 => k,
            _ => v,
        };
        store8(&mut dst, i, load8(src, at));
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

/// The second step with a warp per 4 columns: lane `l` sums chunks `l / 4, l / 4 + 8, ...` of
/// column `4 w + l % 4` (in order), then the eight lanes of a column add their sums by
/// shuffles (the same order in every run: deterministic). `cols / 4` warps; `cols` a multiple
/// of 4.
#[kernel(cols(out = 4))]
pub fn sum_partials_split(partial: &[f32], mut out: PerWarpRow<f32>, chunks: u32) {
    let me = warp_row();
    let cols = out.len();
    if me.row() as usize >= cols / 4 {
        return;
    }
    let lane = me.lane() as usize;
    let (slice, c) = (lane / 4, me.row() as usize * 4 + lane % 4);
    let mut total = 0.0f32;
    let mut k = slice;
    while k < chunks as usize {
        total += partial.get(k * cols + c).copied().unwrap_or(0.0);
        k += 8;
    }
    unroll::<3>(|s| total += warp::shuffle_xor(total, 4u32 << s));
    if let Some(mut row) = out.row_mut(me)
        && let Some(o) = row.get_mut(0)
    {
        *o = total;
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
