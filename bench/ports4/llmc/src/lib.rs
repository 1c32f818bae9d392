//! llm.c kernels (karpathy/llm.c @ f1e2ace651495b74ae22d45d1723443fd00ecd3a), ported to safe Rust
//! from ferrocuda's docs alone: issue 30's fourth held-out port (session 13), first try. Each
//! kernel keeps its source's name, parameters (plus a length per slice) and algorithm;
//! `floatX` is bf16 and `x128` is [`X128`]. Built with the builder's fast math (llm.c compiles
//! with `--use_fast_math`).
//!
//! Sources: `gelu_forward_kernel2` (llmc/gelu.cuh), `softmax_autoregressive_backward_inplace_kernel`
//! and `unpermute_kernel` (llmc/attention.cuh), `encoder_backward_kernel1`
//! (dev/cuda/encoder_backward.cu), `fused_residual_forward3` (dev/cuda/fused_residual_forward.cu,
//! built there with `ENABLE_BF16`).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use core::num::NonZeroU32;

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointSlice, PerWarpRow, block_rows, unique_index, warp_row};
use ferrocuda_device::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
// The host build's `f32` has `tanh` and `sqrt` itself, so there the prelude is unused.
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::prelude::*;
use ferrocuda_device::{block_scratch, kernel, vector, warp};

ferrocuda_device::embed_kernels!();

/// llm.c's `x128` for bf16: eight values in one 16-byte aligned pack (`Packed128<floatX>`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct X128 {
    /// The eight values.
    pub v: [bf16; 8],
}

/// `GELU_SCALING_FACTOR`, `sqrtf(2.0f / M_PI)` as nvcc folds it.
pub const GELU_SCALING_FACTOR: f32 = 0.797_884_5;

/// llm.c's `gelu_forward_kernel2`: the tanh GELU of eight bf16 per thread, read with
/// `load128cs` (streaming) and written with `store128`. Block 512, `grid = N / (512 * 8)`.
#[kernel(same_len(out, inp))]
pub fn gelu_forward_kernel2(mut out: DisjointSlice<X128>, inp: &[X128]) {
    let i = unique_index();
    let Some(o) = out.get_mut(i) else { return };
    let packed_inp = cache::load(&inp[i], Load::Streaming);
    let mut packed_out = X128::default();
    for k in 0..4 {
        let mut pair = [0.0f32; 2];
        for (h, p) in pair.iter_mut().enumerate() {
            let xi = packed_inp.v[2 * k + h].widen();
            let cube = 0.044715 * xi * xi * xi;
            *p = 0.5 * xi * (1.0 + (GELU_SCALING_FACTOR * (xi + cube)).tanh());
        }
        let packed = Bf16x2::from_f32s(pair[0], pair[1]);
        packed_out.v[2 * k] = packed.lo();
        packed_out.v[2 * k + 1] = packed.hi();
    }
    vector::store16(o, packed_out);
}

/// llm.c's `softmax_autoregressive_backward_inplace_kernel`: for each row `t` of each `T x T`
/// attention matrix, `datt[t][t3] = scale * att[t][t3] * (datt[t][t3] - sum)` for `t3 <= t`
/// (0 above the diagonal), `sum` the block's reduction of `att[t][t2] * datt[t][t2]` over `t2 <=
/// t`; in place in `datt`. The source's grid is `(T / 4, B * NH)` with four consecutive rows per
/// block, taken from the last row backwards; no safe output hands a block those rows, so this
/// port runs a 1-D grid of `B * NH * T / 4` blocks of 256 threads, each taking four rows
/// grid-strided (`BlockRows`).
#[kernel(cols(datt = t_len))]
pub fn softmax_autoregressive_backward_inplace_kernel(datt: DisjointSlice<bf16, BlockRows>, att: &[bf16], b: i32, t_len: u32, c: i32, scale: f32) {
    let _ = (b, c);
    softmax_bwd_first_try(datt, att, t_len, scale);
}

/// Session 14: the first try (its body unchanged) with `reqntid(256)`, the source's `constexpr
/// int BlockSize = 256` and launch: the entry tells the compiler the block shape, so the
/// `BlockRows` row's stride (`blockDim.x`) is the constant 256 and its column loops get a
/// trip count the compiler can compute, as nvcc's over `t2 += BlockSize`.
#[kernel(cols(datt = t_len), reqntid(256))]
pub fn softmax_autoregressive_backward_inplace_kernel_reqntid(datt: DisjointSlice<bf16, BlockRows>, att: &[bf16], b: i32, t_len: u32, c: i32, scale: f32) {
    let _ = (b, c);
    softmax_bwd_first_try(datt, att, t_len, scale);
}

/// The body of the first try of `softmax_autoregressive_backward_inplace_kernel`, as written.
#[inline(always)]
fn softmax_bwd_first_try(mut datt: DisjointSlice<bf16, BlockRows>, att: &[bf16], t_len: u32, scale: f32) {
    let t_cols = t_len as usize;
    let Some(rows) = NonZeroU32::new(t_len).map(|t| att.len() as u32 / t) else { return };
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    for me in block_rows(rows) {
        let r = me.row();
        let t = (r % t_len) as usize;
        let start = r as usize * t_cols;
        let Some(att_row) = att.get(start..start + t_cols) else { break };
        let Some(mut row) = datt.row_mut(me) else { break };
        let (lane, stride) = (row.lane() as usize, row.stride() as usize);
        let mut local_sum = 0.0f32;
        let mut j = 0;
        let mut col = lane;
        while col <= t {
            if let (Some(d), Some(a)) = (row.get_mut(j), att_row.get(col)) {
                local_sum += a.widen() * d.widen();
            }
            j += 1;
            col += stride;
        }
        let local_sum = reduce.sum_all(local_sum);
        let mut j = 0;
        let mut col = lane;
        while col < t_cols {
            if let (Some(d), Some(a)) = (row.get_mut(j), att_row.get(col)) {
                let value = if col <= t {
                    let acc = cache::load(a, Load::Streaming).widen() * (cache::load(&*d, Load::Streaming).widen() - local_sum);
                    (scale * acc).to_bf16()
                } else {
                    bf16::ZERO
                };
                cache::store(d, value, Store::Streaming);
            }
            j += 1;
            col += stride;
        }
    }
}

/// The fix round's `softmax_autoregressive_backward_inplace_kernel` (after the GPU run; the
/// first try above is unchanged): the two column loops as the row's own iterators, `zip_input`
/// beside `att[t][..=t]` for the sum (the input's length bounds the columns: `t2 <= t`) and beside
/// the whole `att` row for the write, with a column counter for the diagonal test. The first
/// try's `row.get_mut(j)` per element, with a run-time `blockDim.x` stride, kept a 64-bit counter,
/// a checked multiply and a power-of-two test per element, and one load in flight (0.69x nvcc).
/// Launched as the first try (the row order is still not the source's).
#[kernel(cols(datt = t_len))]
pub fn softmax_autoregressive_backward_inplace_kernel_fixed(datt: DisjointSlice<bf16, BlockRows>, att: &[bf16], b: i32, t_len: u32, c: i32, scale: f32) {
    let _ = (b, c);
    softmax_bwd_fixed(datt, att, t_len, scale);
}

/// Session 14: the fix round's variant with `reqntid(256)` (see
/// [`softmax_autoregressive_backward_inplace_kernel_reqntid()`]): its `zip_input` loops stride by
/// the constant 256.
#[kernel(cols(datt = t_len), reqntid(256))]
pub fn softmax_autoregressive_backward_inplace_kernel_fixed_reqntid(
    datt: DisjointSlice<bf16, BlockRows>,
    att: &[bf16],
    b: i32,
    t_len: u32,
    c: i32,
    scale: f32,
) {
    let _ = (b, c);
    softmax_bwd_fixed(datt, att, t_len, scale);
}

/// The body of the fix round's `softmax_autoregressive_backward_inplace_kernel_fixed`.
#[inline(always)]
fn softmax_bwd_fixed(mut datt: DisjointSlice<bf16, BlockRows>, att: &[bf16], t_len: u32, scale: f32) {
    let t_cols = t_len as usize;
    let Some(rows) = NonZeroU32::new(t_len).map(|t| att.len() as u32 / t) else { return };
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    for me in block_rows(rows) {
        let r = me.row();
        let t = (r % t_len) as usize;
        let start = r as usize * t_cols;
        let Some(att_row) = att.get(start..start + t_cols) else { break };
        let Some(causal) = att_row.get(..=t) else { break };
        let Some(row) = datt.row_mut(me) else { break };
        let mut local_sum = 0.0f32;
        row.zip_input(causal).for_each(|(a, d)| local_sum += a.widen() * d.widen());
        let local_sum = reduce.sum_all(local_sum);
        let Some(row) = datt.row_mut(me) else { break };
        let (mut col, stride) = (row.lane() as usize, row.stride() as usize);
        row.zip_input(att_row).for_each(|(a, d)| {
            let value = if col <= t {
                let acc = cache::load(a, Load::Streaming).widen() * (cache::load(&*d, Load::Streaming).widen() - local_sum);
                (scale * acc).to_bf16()
            } else {
                bf16::ZERO
            };
            cache::store(d, value, Store::Streaming);
            col += stride;
        });
    }
}

/// llm.c's `unpermute_kernel`: `out[b][n][nh][d] = inp[b][nh][n][d]` (`__ldcs` reads), one
/// thread per element of `inp`, 256 threads a block. The write index is computed, so `out` is
/// an `AtomicSlice` written with relaxed stores (the porting table's row for `out[f(i)] = v`).
#[kernel]
pub fn unpermute_kernel(inp: &[bf16], out: AtomicSlice<bf16>, b: u32, n: u32, nh: u32, d: u32) {
    let idx = unique_index().get();
    let _ = b;
    let (Some(nhnd), Some(nd), Some(dd)) = (NonZeroU32::new(nh * n * d), NonZeroU32::new(n * d), NonZeroU32::new(d)) else { return };
    let Some(x) = inp.get(idx) else { return };
    let i = idx as u32;
    let bb = i / nhnd;
    let rest = i % nhnd;
    let nh_ = rest / nd;
    let rest = rest % nd;
    let n_ = rest / dd;
    let d_ = rest % dd;
    let other = bb * nh * n * d + n_ * nh * d + nh_ * d + d_;
    if let Some(slot) = out.get(other as usize) {
        slot.store(cache::load(x, Load::Streaming));
    }
}

/// llm.c's `encoder_backward_kernel1` (dev/cuda): one thread per `(b, t, c)`, `atomicAdd` of
/// `dout[b][t][c]` into `dwte[inp[b][t]][c]` and `dwpe[t][c]`.
#[kernel]
pub fn encoder_backward_kernel1(dwte: AtomicSlice<f32>, dwpe: AtomicSlice<f32>, dout: &[f32], inp: &[i32], b: u32, t: u32, c: u32) {
    let idx = unique_index().get();
    let n = (b * t * c) as usize;
    if idx < n {
        let (Some(cc), Some(tt)) = (NonZeroU32::new(c), NonZeroU32::new(t)) else { return };
        let i = idx as u32;
        let bt = i / cc;
        let b_ = bt / tt;
        let t_ = bt % tt;
        let c_ = i % cc;
        let (Some(&ix), Some(&d)) = (inp.get((b_ * t + t_) as usize), dout.get(idx)) else { return };
        if let Some(cell) = dwte.get(ix as usize * c as usize + c_ as usize) {
            cell.add(d);
        }
        if let Some(cell) = dwpe.get((t_ * c + c_) as usize) {
            cell.add(d);
        }
    }
}

/// llm.c's `fused_residual_forward3` (dev/cuda, bf16): one warp per token: `residual = inp1 +
/// inp2` (rounded to bf16), its mean and variance by warp reductions, `normed = (residual - m)
/// * s * weight + bias`, and `mean`, `rstd` from lane 0. The source's blocks are `(32, 4)`; here
/// 128 threads in 1-D (the same warps).
#[kernel(cols(residual = c, normed = c, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments, reason = "the source's parameters")]
pub fn fused_residual_forward3(
    mut residual: PerWarpRow<bf16>,
    mut normed: PerWarpRow<bf16>,
    mut mean: PerWarpRow<bf16>,
    mut rstd: PerWarpRow<bf16>,
    inp1: &[bf16],
    inp2: &[bf16],
    weight: &[bf16],
    bias: &[bf16],
    n: i32,
    c: u32,
) {
    let _ = n;
    let me = warp_row();
    let row = me.row() as usize;
    let cols = c as usize;
    let (Some(x1), Some(x2)) = (inp1.get(row * cols..(row + 1) * cols), inp2.get(row * cols..(row + 1) * cols)) else { return };
    let Some(res) = residual.row_mut(me) else { return };
    let eps = 1e-5f32;
    let mut m = 0.0f32;
    res.zip_inputs([x1, x2]).for_each(|([a, b], o)| {
        let out = a.widen() + b.widen();
        m += out;
        *o = out.to_bf16();
    });
    let m = warp::reduce_sum(m) / c as f32;
    let mut v = 0.0f32;
    if let Some(res) = residual.row_mut(me) {
        for o in res.iter_mut() {
            let xshift = o.widen() - m;
            v += xshift * xshift;
        }
    }
    let v = warp::reduce_sum(v) / c as f32;
    let s = 1.0 / (v + eps).sqrt();
    if let (Some(mut res), Some(out)) = (residual.row_mut(me), normed.row_mut(me)) {
        let mut j = 0;
        out.zip_inputs([weight, bias]).for_each(|([w, b], o)| {
            if let Some(r) = res.get_mut(j) {
                let nv = s * (r.widen() - m);
                *o = (nv * w.widen() + b.widen()).to_bf16();
            }
            j += 1;
        });
    }
    if let Some(mut mr) = mean.row_mut(me)
        && let Some(o) = mr.get_mut(0)
    {
        *o = m.to_bf16();
    }
    if let Some(mut sr) = rstd.row_mut(me)
        && let Some(o) = sr.get_mut(0)
    {
        *o = s.to_bf16();
    }
}

/// Launchers for the CUDA C++ twins that run on the source's launch shape, which the ports'
/// own launchers refuse (a 2-D grid, a 2-D block): the same parameters with an output that
/// allows any shape. Never launched from this crate's module (their bodies are empty); the
/// benchmark launches them from the twins' cubin, where `cuda/ports4.cu` defines them.
pub mod twin_abi {
    use ferrocuda_device::global::UncheckedSlice;
    use ferrocuda_device::half::bf16;
    use ferrocuda_device::kernel;

    /// `softmax_autoregressive_backward_inplace_kernel` on its `(T / 4, B * NH)` grid.
    #[kernel]
    pub fn softmax_autoregressive_backward_inplace_kernel_twin(datt: UncheckedSlice<bf16>, att: &[bf16], b: i32, t: u32, c: i32, scale: f32) {
        let _ = (datt, att, b, t, c, scale);
    }

    /// `fused_residual_forward3` on its `dim3(32, 4)` blocks.
    #[kernel]
    #[allow(clippy::too_many_arguments, reason = "the source's parameters")]
    pub fn fused_residual_forward3_twin(
        residual: UncheckedSlice<bf16>,
        normed: UncheckedSlice<bf16>,
        mean: UncheckedSlice<bf16>,
        rstd: UncheckedSlice<bf16>,
        inp1: &[bf16],
        inp2: &[bf16],
        weight: &[bf16],
        bias: &[bf16],
        n: i32,
        c: u32,
    ) {
        let _ = (residual, normed, mean, rstd, inp1, inp2, weight, bias, n, c);
    }
}
