//! Issue 30's seventh held-out port, the llm.c half: five kernels of karpathy/llm.c
//! (`llmc/layernorm.cuh`, `llmc/attention.cuh`, `llmc/matmul.cuh`, commit f1e2ace6) in bf16
//! (`floatX = __nv_bfloat16`, llm.c's default), written from ferrocuda's docs alone, safe.
//! Built with fast math, as llm.c's `-O3 --use_fast_math`.
//!
//! Each kernel keeps the source's name and launch shape (the bench launches both on the same
//! grid); where the port's launch differs (a 1-D block for llm.c's `(32, block_y)`), the doc
//! comment says so.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
// The kernels stay as measured on the GPU (bench/ports7/RESULTS.md): index loops over register
// arrays and counters mirror the CUDA source, and a rewrite could change the SASS compared.
#![allow(clippy::needless_range_loop, clippy::explicit_counter_loop, clippy::manual_is_multiple_of)]

use core::num::NonZeroU32;

use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{AtomicSlice, DisjointChunks, DisjointSlice, PerWarpRow, unique_index, warp_row};
use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::math::FastMath;
use ferrocuda_device::shared_vector::dynamic_shared_x4;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, strided_range, thread_idx_x};
use ferrocuda_device::{kernel, unroll, vector, warp};

ferrocuda_device::embed_kernels!();

/// llm.c's `x128` (eight bf16 in one 16-byte vector) and `f128` (four `f32`): the device
/// library's 16-byte packs (`ferrocuda_device::pack16`), under llm.c's names. The first try
/// defined its own (gap 8 of RESULTS.md); the SASS is the same.
pub use ferrocuda_device::pack16::{Bf16x8 as X128, F32x4 as F128};

/// `residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2)`
/// (llmc/layernorm.cuh): `out = inp1 + inp2`, one `x128` per thread, inputs read streaming
/// (`load128cs`), output stored plainly (`store128`). llm.c launches `N / (block_size * 8)`
/// blocks of 256 and has no bounds check (the size is a multiple of the block's 8-value
/// packs); the port checks `i < len` once.
#[kernel(same_len(out, inp1, inp2))]
pub fn residual_forward_kernel(mut out: DisjointSlice<X128>, inp1: &[X128], inp2: &[X128]) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i) {
        let a = cache::load(&inp1[i], Load::Streaming).to_f32s();
        let b = cache::load(&inp2[i], Load::Streaming).to_f32s();
        let mut r = [0.0f32; 8];
        for k in 0..8 {
            r[k] = a[k] + b[k];
        }
        vector::store16(o, X128::from_f32s(r));
    }
}

/// `unpermute_kernel_backward(floatX* dinp, const floatX* dout, int B, int N, int NH, int d)`
/// (llmc/attention.cuh): `dinp[b][nh][n][d] = dout[b][n][nh][d]`, one element per thread, `B NH
/// N d` threads (llm.c: blocks of 256). `n`, `nh`, `d` as `NonZeroU32` so the divisions have
/// no zero test; `B` is the output's length over `NH N d`.
#[kernel]
pub fn unpermute_kernel_backward(mut dinp: DisjointSlice<bf16>, dout: &[bf16], n: NonZeroU32, nh: NonZeroU32, d: NonZeroU32) {
    let i = unique_index();
    let Some(o) = dinp.get_mut(i) else { return };
    let (Some(nd), Some(nhd)) = (NonZeroU32::new(n.get() * d.get()), NonZeroU32::new(nh.get() * d.get())) else { return };
    let Some(nhnd) = NonZeroU32::new(nh.get() * nd.get()) else { return };
    let idx = i.get() as u32;
    let b = idx / nhnd;
    let rest = idx % nhnd;
    let nh_ = rest / nd;
    let rest = rest % nd;
    let n_ = rest / d;
    let d_ = rest % d;
    let other = b * nhnd.get() + n_ * nhd.get() + nh_ * d.get() + d_;
    let Some(&v) = dout.get(other as usize) else { return };
    *o = v;
}

/// `permute_kernel_backward(floatX* dinp, const floatX* dq, const floatX* dk, const floatX*
/// dv, int B, int N, int NH, int d)` (llmc/attention.cuh): scatters `dq`, `dk`, `dv` (each `(B,
/// NH, N, d)`) into `dinp` (`(B, N, 3, NH, d)`), one element of each per thread. The writes go
/// to computed indices, so `dinp` is an `AtomicSlice<bf16>` (docs/performance.md: "a 2-byte
/// element at a computed index": one relaxed 16-bit store each).
#[kernel(same_len(dq, dk, dv))]
pub fn permute_kernel_backward(dinp: AtomicSlice<bf16>, dq: &[bf16], dk: &[bf16], dv: &[bf16], n: NonZeroU32, nh: NonZeroU32, d: NonZeroU32) {
    let i = unique_index();
    if i.get() >= dq.len() {
        return;
    }
    let (Some(nd), Some(nhd)) = (NonZeroU32::new(n.get() * d.get()), NonZeroU32::new(nh.get() * d.get())) else { return };
    let Some(nhnd) = NonZeroU32::new(nh.get() * nd.get()) else { return };
    let idx = i.get() as u32;
    let b = idx / nhnd;
    let rest = idx % nhnd;
    let nh_ = rest / nd;
    let rest = rest % nd;
    let n_ = rest / d;
    let d_ = rest % d;
    let inp_idx = (b * 3 * nhnd.get() + n_ * 3 * nhd.get() + nh_ * d.get() + d_) as usize;
    let nhd = nhd.get() as usize;
    if let Some(c) = dinp.get(inp_idx) {
        c.store(dq[i]);
    }
    if let Some(c) = dinp.get(inp_idx + nhd) {
        c.store(dk[i]);
    }
    if let Some(c) = dinp.get(inp_idx + 2 * nhd) {
        c.store(dv[i]);
    }
}

/// `reduce_add_sum_kernel(floatX* dst, const float* src, size_t n, size_t m)`
/// (llmc/matmul.cuh): `dst[i] += sum over l < m of src[i + n l]`, four values per thread (one
/// `f128` per row of `src`), in place. `dst` holds `n` values, `src` `n m`.
#[kernel]
pub fn reduce_add_sum_kernel(mut dst: DisjointChunks<bf16, 4>, src: &[F128], n: u32, m: u32) {
    let i = unique_index();
    // llm.c: `assert(n % x128::size == 0)`.
    assert!(n % 8 == 0);
    let Some(out) = dst.get_mut(i) else { return };
    let mut acc = [0.0f32; 4];
    let n4 = (n / 4) as usize;
    for l in 0..m as usize {
        let Some(s) = src.get(i.get() + n4 * l) else { return };
        let s = vector::load16(s);
        for k in 0..4 {
            acc[k] += s.0[k];
        }
    }
    for k in 0..4 {
        out[k] = (out[k].widen() + acc[k]).to_bf16();
    }
}

/// `fused_residual_forward_kernel5(floatX* residual, floatX* normed, float* mean, float* rstd,
/// const floatX* inp1, const floatX* inp2, const floatX* weight, const floatX* bias, int N, int
/// C)` (llmc/layernorm.cuh): `residual = inp1 + inp2`, then its layer norm into `normed`, one
/// warp per row; `weight` and `bias` staged in shared memory by the whole block, each warp's
/// residual row kept in shared memory between the passes. llm.c launches blocks of `(32,
/// block_y)`; the port's are 1-D of `32 block_y` threads (the same warps: row = global warp
/// index), with `(2 + block_y) C 2` shared bytes as llm.c's. `c8 = C / 8`.
#[kernel(cols(residual = c8, normed = c8, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn fused_residual_forward_kernel5(
    mut residual: PerWarpRow<X128>,
    mut normed: PerWarpRow<X128>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp1: &[X128],
    inp2: &[X128],
    weight: &[X128],
    bias: &[X128],
    c8: u32,
) {
    let c8u = c8 as usize;
    let smem = dynamic_shared_x4::<u32>();
    let ([s_weight, s_bias], rest) = smem.carve::<2>(c8u);
    let tid = thread_idx_x() as usize;
    for v in strided_range(tid, c8u.min(weight.len()).min(bias.len()).min(s_weight.len()), block_dim_x() as usize) {
        s_weight.set(v, vector::load16(&weight[v]).to_words());
        s_bias.set(v, vector::load16(&bias[v]).to_words());
    }
    sync_threads();

    let me = warp_row();
    let lane = me.lane() as usize;
    let warp_in_block = tid / 32;
    let (_, mine) = rest.split_at(warp_in_block * c8u);
    let (s_res, _) = mine.split_at(c8u);
    let row = me.row() as usize;
    let Some(res_row) = residual.row_mut(me) else { return };
    let Some(in1) = inp1.get(row * c8u..row * c8u + c8u) else { return };
    let Some(in2) = inp2.get(row * c8u..row * c8u + c8u) else { return };

    let c = c8 as f32 * 8.0;
    let eps = 1e-5f32;
    let mut sum = 0.0f32;
    let mut col = lane;
    res_row.zip_inputs([in1, in2]).for_each(|([a, b], o)| {
        let a = cache::load(a, Load::Streaming).to_f32s();
        let b = cache::load(b, Load::Streaming).to_f32s();
        let mut r = [0.0f32; 8];
        for k in 0..8 {
            r[k] = a[k] + b[k];
        }
        let packed = X128::from_f32s(r);
        for v in packed.to_f32s() {
            sum += v;
        }
        cache::store(o, packed, Store::Streaming);
        s_res.set(col, packed.to_words());
        col += 32;
    });

    let sum = warp::reduce_sum(sum);
    let m = sum / c;
    let mut v = 0.0f32;
    for j in strided_range(lane, s_res.len(), 32) {
        for x in X128::from_words(s_res.get(j)).to_f32s() {
            v += (x - m) * (x - m);
        }
    }
    let v = warp::reduce_sum(v) / c;
    let s = (v + eps).fast_rsqrt();

    let Some(out_row) = normed.row_mut(me) else { return };
    for (j, o) in (lane..).step_by(32).zip(out_row.iter_mut()) {
        let res = X128::from_words(s_res.get(j)).to_f32s();
        let w = X128::from_words(s_weight.get(j)).to_f32s();
        let b = X128::from_words(s_bias.get(j)).to_f32s();
        let mut r = [0.0f32; 8];
        for k in 0..8 {
            let n = s * (res[k] - m);
            r[k] = n * w[k] + b[k];
        }
        cache::store(o, X128::from_f32s(r), Store::Streaming);
    }
    if let Some(mut mr) = mean.row_mut(me)
        && let Some(x) = mr.get_mut(0)
    {
        *x = m;
    }
    if let Some(mut rr) = rstd.row_mut(me)
        && let Some(x) = rr.get_mut(0)
    {
        *x = s;
    }
}

/// The fix round of [`reduce_add_sum_kernel()`] (docs/performance.md, the run-time stride row:
/// "the opt-in x4 forms do what nvcc does without its division: `unroll::strided_x4(row,
/// tid, stride, ..)` for a read-only pass"): the rows of `src` walked four at a time, so four
/// 16-byte loads are in flight where the first try's loop (two exits: `src.get(..)` and the
/// count) had one. (`strided_range` alone, the first fix tried, kept the loop rolled.)
#[kernel]
pub fn reduce_add_sum_kernel_fixed(mut dst: DisjointChunks<bf16, 4>, src: &[F128], n: u32, m: u32) {
    let i = unique_index();
    // llm.c: `assert(n % x128::size == 0)`.
    assert!(n % 8 == 0);
    let Some(out) = dst.get_mut(i) else { return };
    let mut acc = [0.0f32; 4];
    let n4 = (n / 4) as usize;
    let end = (n4 * m as usize).min(src.len());
    // `unroll::strided_x4`: four rows' loads a step, as nvcc unrolls the source's loop.
    unroll::strided_x4(&src[..end], i.get(), n4, |s| {
        let s = vector::load16(s);
        for k in 0..4 {
            acc[k] += s.0[k];
        }
    });
    for k in 0..4 {
        out[k] = (out[k].widen() + acc[k]).to_bf16();
    }
}

/// The fix round of [`fused_residual_forward_kernel5()`] (docs/performance.md, the
/// `SharedSliceX4` row: "loops bounded by the region's `len()`"): every shared access indexed
/// by a `strided_range` counter below its region's length (the first try's running column
/// counter and `step_by` zip kept a bounds check per access, and the kernel's panic path), the
/// warp's region taken with `SharedSliceX4::region` (no panic path), the output rows written
/// through `get_mut(k)`.
#[kernel(cols(residual = c8, normed = c8, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn fused_residual_forward_kernel5_fixed(
    mut residual: PerWarpRow<X128>,
    mut normed: PerWarpRow<X128>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp1: &[X128],
    inp2: &[X128],
    weight: &[X128],
    bias: &[X128],
    c8: u32,
) {
    let c8u = c8 as usize;
    let smem = dynamic_shared_x4::<u32>();
    if smem.len() < 2 * c8u {
        return;
    }
    let ([s_weight, s_bias], rest) = smem.carve::<2>(c8u);
    let tid = thread_idx_x() as usize;
    let (Some(weight), Some(bias)) = (weight.get(..c8u), bias.get(..c8u)) else { return };
    for v in strided_range(tid, s_weight.len(), block_dim_x() as usize) {
        s_weight.set(v, vector::load16(&weight[v]).to_words());
        s_bias.set(v, vector::load16(&bias[v]).to_words());
    }
    sync_threads();

    let me = warp_row();
    let lane = me.lane() as usize;
    let warp_in_block = tid / 32;
    // The warp's region, llm.c's `params + (2 + threadIdx.y) C`, without a panic path: the
    // library's `region` (session 19's gap fixes; the measured fix tested each `split_at`'s
    // condition by hand before it).
    let Some(s_res) = rest.region(warp_in_block, c8u) else { return };
    let row = me.row() as usize;
    let Some(mut res_row) = residual.row_mut(me) else { return };
    let (Some(in1), Some(in2)) = (inp1.get(row * c8u..row * c8u + c8u), inp2.get(row * c8u..row * c8u + c8u)) else { return };

    let c = c8 as f32 * 8.0;
    let eps = 1e-5f32;
    let mut sum = 0.0f32;
    let mut k = 0;
    for j in strided_range(lane, s_res.len(), 32) {
        let a = cache::load(&in1[j], Load::Streaming).to_f32s();
        let b = cache::load(&in2[j], Load::Streaming).to_f32s();
        let mut r = [0.0f32; 8];
        for t in 0..8 {
            r[t] = a[t] + b[t];
        }
        let packed = X128::from_f32s(r);
        for v in packed.to_f32s() {
            sum += v;
        }
        if let Some(o) = res_row.get_mut(k) {
            cache::store(o, packed, Store::Streaming);
        }
        s_res.set(j, packed.to_words());
        k += 1;
    }

    let sum = warp::reduce_sum(sum);
    let m = sum / c;
    let mut v = 0.0f32;
    for j in strided_range(lane, s_res.len(), 32) {
        for x in X128::from_words(s_res.get(j)).to_f32s() {
            v += (x - m) * (x - m);
        }
    }
    let v = warp::reduce_sum(v) / c;
    let s = (v + eps).fast_rsqrt();

    let Some(mut out_row) = normed.row_mut(me) else { return };
    let mut k = 0;
    for j in strided_range(lane, s_res.len(), 32) {
        let res = X128::from_words(s_res.get(j)).to_f32s();
        let w = X128::from_words(s_weight.get(j)).to_f32s();
        let b = X128::from_words(s_bias.get(j)).to_f32s();
        let mut r = [0.0f32; 8];
        for t in 0..8 {
            let n = s * (res[t] - m);
            r[t] = n * w[t] + b[t];
        }
        if let Some(o) = out_row.get_mut(k) {
            cache::store(o, X128::from_f32s(r), Store::Streaming);
        }
        k += 1;
    }
    if let Some(mut mr) = mean.row_mut(me)
        && let Some(x) = mr.get_mut(0)
    {
        *x = m;
    }
    if let Some(mut rr) = rstd.row_mut(me)
        && let Some(x) = rr.get_mut(0)
    {
        *x = s;
    }
}
