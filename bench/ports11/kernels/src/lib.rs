//! Issue 30's eleventh held-out port: six llm.c kernels and two vLLM kernels written from
//! ferrocuda's docs alone, each once (the first try), beside the launch stubs of their CUDA C++
//! twins ([`twins`], the public sources as written in `bench/ports11/cuda/ports11.cu`).
//!
//! llm.c's `dev/cuda` files are built with `--use_fast_math` (except `matmul_backward_bias.cu`);
//! this crate is built without the builder's `fast_math` so that vLLM's kernel keeps its
//! precise division, and the llm.c ports call the [`FastMath`] methods where nvcc's fast math
//! rewrites the source's operation (`expf` -> `fast_exp`, `/` -> `fast_div`, `1.0f / x` ->
//! `fast_recip`, `rsqrtf` -> `fast_rsqrt`), as docs/performance.md offers for a crate that mixes
//! both.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// On the host `f32`'s own methods win over the device library's math traits.
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use core::num::NonZeroU32;

use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointSlice, PerBlock, PerWarpRow, block_row, once_per_block, unique_index, warp_row};
use ferrocuda_device::half::fp8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::sync::sync_warp;
use ferrocuda_device::thread::grid_stride_range;
use ferrocuda_device::{shared_array, unroll, warp};

ferrocuda_device::embed_kernels!();

pub mod s24;
pub mod twins;

// ------------------------------------------------------------------------------------------
// llm.c, dev/cuda (karpathy/llm.c f1e2ace)
// ------------------------------------------------------------------------------------------

/// L1, `layernorm_forward_kernel5` (dev/cuda/layernorm_forward.cu): one block per row of `c`
/// columns, any block size up to 1024 (a multiple of 32): each thread sums `x` and `x²` over
/// its columns, the warps reduce by shuffles, warp `w`'s sums go through shared memory, and
/// every warp reduces the `blockDim.x / 32` partials; then `out = (x - mean) · rstd · weight +
/// bias`, `x` read and `out` written streaming (`__ldcs`/`__stcs`). `mean` and `rstd` get one
/// value per row (block). Grid: `n` blocks.
#[kernel(cols(out = c))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel5(
    mut out: DisjointSlice<f32, BlockRows>,
    mut mean: PerBlock<f32>,
    mut rstd: PerBlock<f32>,
    inp: &[f32],
    weight: &[f32],
    bias: &[f32],
    n: u32,
    c: u32,
) {
    let _ = n; // the grid is the rows, as in the source
    let shared_sum = shared_array![f32; 32];
    let shared_sum2 = shared_array![f32; 32];
    let tid = thread_idx_x();
    let num_warps = block_dim_x() / 32;
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let me = block_row();
    // Uniform per block: every thread of a block returns here or none does.
    let Some(row) = out.row_mut(me) else { return };
    let start = me.row() as usize * c as usize;
    let (Some(x), Some(weight), Some(bias)) = (inp.get(start..start + c as usize), weight.get(..c as usize), bias.get(..c as usize)) else {
        return;
    };
    let mut thread_sum = 0.0f32;
    let mut thread_sum2 = 0.0f32;
    // The source's `for (i = threadIdx.x; i < C; i += blockDim.x)` read-only pass, four loads
    // in flight as nvcc's unrolled loop (docs/performance.md, run-time block size).
    unroll::strided_x4(x, tid as usize, block_dim_x() as usize, |&xi| {
        thread_sum += xi;
        thread_sum2 += xi * xi;
    });
    let warp_sum = warp::reduce_sum(thread_sum);
    let warp_sum2 = warp::reduce_sum(thread_sum2);
    // The source lets all 32 lanes store the same value; one store a warp here, since the CPU
    // executor's race detector reports a word written by two threads between barriers.
    if lane_id == 0 {
        shared_sum.set(warp_id as usize, warp_sum);
        shared_sum2.set(warp_id as usize, warp_sum2);
    }
    sync_threads();
    let warp_sum = if lane_id < num_warps { shared_sum.get(lane_id as usize) } else { 0.0 };
    let warp_sum2 = if lane_id < num_warps { shared_sum2.get(lane_id as usize) } else { 0.0 };
    let block_sum = warp::reduce_sum(warp_sum).fast_div(c as f32);
    let block_sum2 = warp::reduce_sum(warp_sum2).fast_div(c as f32);
    let m = block_sum;
    let var = block_sum2 - m * m;
    let s = (var + 1e-5).fast_rsqrt();
    if let Some(b) = once_per_block() {
        if let Some(v) = mean.get_mut(b) {
            cache::store(v, m, Store::Streaming);
        }
        if let Some(v) = rstd.get_mut(b) {
            cache::store(v, s, Store::Streaming);
        }
    }
    row.zip_inputs([x, weight, bias]).for_each(|([x, w, b], o)| {
        let n = s * (cache::load(x, Load::Streaming) - m);
        cache::store(o, n * *w + *b, Store::Streaming);
    });
}

/// L1, fix round (beside the first try above; RESULTS.md): the same kernel with (1) the sum
/// pass as the source's loop, a `u32` column counter, instead of `unroll::strided_x4`, whose
/// 64-bit walk and prologue ran in every thread although at 768 columns and 256 threads no
/// thread has the four columns its unrolled step needs (the first try's 220 SASS instructions
/// against nvcc's 134, at 22.5 µs against 20.4: the launch is issue-bound at this size), and (2)
/// the statistics as nvcc's fast math computes them, for the same bits: `x / C` is `x · rcp(C)`
/// there, which the compiler then fuses with the variance's subtraction (`fma(Σx², rcp(C),
/// -m²)`); the first try's `fast_div` kept the product separate (`m2 - m·m` as
/// `fma(-m, m, m2)`), so `rstd` differed in the last bit in 1150 of 8192 rows.
#[kernel(cols(out = c))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel5_fix(
    mut out: DisjointSlice<f32, BlockRows>,
    mut mean: PerBlock<f32>,
    mut rstd: PerBlock<f32>,
    inp: &[f32],
    weight: &[f32],
    bias: &[f32],
    n: u32,
    c: u32,
) {
    let _ = n;
    let shared_sum = shared_array![f32; 32];
    let shared_sum2 = shared_array![f32; 32];
    let tid = thread_idx_x();
    let num_warps = block_dim_x() / 32;
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let me = block_row();
    let Some(row) = out.row_mut(me) else { return };
    let start = me.row() as usize * c as usize;
    let (Some(x), Some(weight), Some(bias)) = (inp.get(start..start + c as usize), weight.get(..c as usize), bias.get(..c as usize)) else {
        return;
    };
    let mut thread_sum = 0.0f32;
    let mut thread_sum2 = 0.0f32;
    let mut i = tid;
    while (i as usize) < x.len() {
        let xi = x[i as usize];
        thread_sum += xi;
        thread_sum2 += xi * xi;
        i += block_dim_x();
    }
    let warp_sum = warp::reduce_sum(thread_sum);
    let warp_sum2 = warp::reduce_sum(thread_sum2);
    if lane_id == 0 {
        shared_sum.set(warp_id as usize, warp_sum);
        shared_sum2.set(warp_id as usize, warp_sum2);
    }
    sync_threads();
    let warp_sum = if lane_id < num_warps { shared_sum.get(lane_id as usize) } else { 0.0 };
    let warp_sum2 = if lane_id < num_warps { shared_sum2.get(lane_id as usize) } else { 0.0 };
    let inv_c = (c as f32).fast_recip();
    let m = warp::reduce_sum(warp_sum) * inv_c;
    let var = warp::reduce_sum(warp_sum2).mul_add(inv_c, -(m * m));
    let s = (var + 1e-5).fast_rsqrt();
    if let Some(b) = once_per_block() {
        if let Some(v) = mean.get_mut(b) {
            cache::store(v, m, Store::Streaming);
        }
        if let Some(v) = rstd.get_mut(b) {
            cache::store(v, s, Store::Streaming);
        }
    }
    row.zip_inputs([x, weight, bias]).for_each(|([x, w, b], o)| {
        let n = s * (cache::load(x, Load::Streaming) - m);
        cache::store(o, n * *w + *b, Store::Streaming);
    });
}

/// L2, `matmul_backward_bias_kernel3` (dev/cuda/matmul_backward_bias.cu, bf16): one block per
/// output channel `blockIdx.x`: each thread sums `dout[i * oc + channel]` over its rows `i =
/// threadIdx.x + blockDim.x k` below `b * t`, the warps reduce by shuffles, then through
/// shared memory every warp reduces the partials, and thread 0 adds the sum to `dbias[channel]`
/// (read, added in `f32`, rounded to bf16). Grid: `oc` blocks.
#[kernel]
pub fn matmul_backward_bias_kernel3(mut dbias: PerBlock<bf16>, dout: &[bf16], b: u32, t: u32, oc: u32) {
    let shared_sum = shared_array![f32; 32];
    let bt = b as usize * t as usize;
    let tid = thread_idx_x();
    let num_warps = block_dim_x() / 32;
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let idx = block_idx_x() as usize;
    let Some(d) = dout.get(..bt * oc as usize) else { return };
    let mut thread_sum = 0.0f32;
    // Row i's element of this channel is `i * oc + idx`: a strided read-only pass.
    unroll::strided_x4(d, tid as usize * oc as usize + idx, block_dim_x() as usize * oc as usize, |v| {
        thread_sum += v.widen();
    });
    let warp_sum = warp::reduce_sum(thread_sum);
    if lane_id == 0 {
        shared_sum.set(warp_id as usize, warp_sum);
    }
    sync_threads();
    let warp_sum = if lane_id < num_warps { shared_sum.get(lane_id as usize) } else { 0.0 };
    let block_sum = warp::reduce_sum(warp_sum);
    if let Some(block) = once_per_block()
        && let Some(o) = dbias.get_mut(block)
    {
        *o = (o.widen() + block_sum).to_bf16();
    }
}

/// L2, fix round (beside the first try; RESULTS.md): the column gather as the source's loop,
/// one load in flight and the row index in `u32` (`i * oc + channel`, CUDA's `int`), instead of
/// the first try's `unroll::strided_x4`: four 2-byte loads in flight a thread, each from
/// another 32-sector warp access, with 64-bit addresses, took 38 registers (3 blocks of 512 an
/// SM; nvcc 13, 4 blocks) and ran at 0.77x nvcc on an H200. More loads in flight do not help an
/// uncoalesced gather whose warps already keep the memory system busy; occupancy does.
#[kernel]
pub fn matmul_backward_bias_kernel3_fix(mut dbias: PerBlock<bf16>, dout: &[bf16], b: u32, t: u32, oc: u32) {
    let shared_sum = shared_array![f32; 32];
    let bt = b * t;
    let tid = thread_idx_x();
    let num_warps = block_dim_x() / 32;
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let idx = block_idx_x();
    let mut thread_sum = 0.0f32;
    let mut i = tid;
    while i < bt {
        if let Some(v) = dout.get((i * oc + idx) as usize) {
            thread_sum += v.widen();
        }
        i += block_dim_x();
    }
    let warp_sum = warp::reduce_sum(thread_sum);
    if lane_id == 0 {
        shared_sum.set(warp_id as usize, warp_sum);
    }
    sync_threads();
    let warp_sum = if lane_id < num_warps { shared_sum.get(lane_id as usize) } else { 0.0 };
    let block_sum = warp::reduce_sum(warp_sum);
    if let Some(block) = once_per_block()
        && let Some(o) = dbias.get_mut(block)
    {
        *o = (o.widen() + block_sum).to_bf16();
    }
}

/// L3, `softmax_forward_online_kernel8` (dev/cuda/softmax_forward.cu): a warp per row, one
/// pass for the maximum and the sum (online softmax: the sum rescaled when the maximum grows),
/// then a shuffle-down reduction of the (max, sum) pairs, lane 0's pair broadcast, and `out =
/// exp(x - max) / sum`. Grid: `ceil(n / (blockDim.x / 32))` blocks.
#[kernel(cols(out = c))]
pub fn softmax_forward_online_kernel8(mut out: PerWarpRow<f32>, inp: &[f32], n: u32, c: u32) {
    let tid = thread_idx_x();
    if tid >= c {
        return;
    }
    let me = warp_row();
    let lane_id = me.lane();
    if me.row() >= n {
        return;
    }
    let Some(y) = out.row_mut(me) else { return };
    let start = me.row() as usize * c as usize;
    let Some(x) = inp.get(start..start + c as usize) else { return };
    let mut maxval = f32::NEG_INFINITY;
    let mut sumval = 0.0f32;
    let mut i = lane_id as usize;
    while i < x.len() {
        let xi = x[i];
        let bigger = maxval.max(xi);
        sumval = sumval * (maxval - bigger).fast_exp() + (xi - bigger).fast_exp();
        maxval = bigger;
        i += 32;
    }
    let mut offset = 16;
    while offset > 0 {
        sync_warp(warp::FULL_MASK);
        let offset_maxval = warp::shuffle_down(maxval, offset);
        let mut offset_sumval = warp::shuffle_down(sumval, offset);
        if offset_maxval > maxval {
            sumval *= (maxval - offset_maxval).fast_exp();
            maxval = offset_maxval;
        } else {
            offset_sumval *= (offset_maxval - maxval).fast_exp();
        }
        sumval += offset_sumval;
        offset >>= 1;
    }
    let maxval = warp::shuffle(maxval, 0);
    let sumval = warp::shuffle(sumval, 0);
    y.zip_input(x).for_each(|(&xi, o)| *o = (xi - maxval).fast_exp().fast_div(sumval));
}

/// L4, `norm_kernel2<__nv_bfloat16>` (dev/cuda/global_norm.cu): a grid-stride sum of squares,
/// a warp reduction, and one atomic add a warp into `out[0]` (no shared memory). `out` is
/// added to, not overwritten: zero it first.
#[kernel]
pub fn norm_kernel2(out: AtomicSlice<f32>, data: &[bf16]) {
    let mut accumulator = 0.0f32;
    for i in grid_stride_range(data.len()) {
        let v = data[i].widen();
        accumulator += v * v;
    }
    let warp_result = warp::reduce_sum(accumulator);
    if warp::lane_id() == 0
        && let Some(total) = out.get(0)
    {
        total.add(warp_result);
    }
}

/// L5, `attention_softmax_kernel1` (dev/cuda/attention_forward.cu): a thread per query row
/// `(b, t, h)` (thread `idx = (b T + t) NH + h`, the source's order) of the causal attention
/// scores `preatt` `[B, NH, T, T]`: the maximum and the sum of `exp` over columns `0..=t`, then
/// the row of `att` written, `exp(x - max) / sum` there and 0 past `t`.
///
/// The source writes `exp` into `att` and scales it in a third pass; here the third pass
/// computes the same `exp` again (the same bits) and writes each element once. `att` is an
/// [`AtomicSlice`]: thread `idx` writes row `(b NH + h) T + t`, a map no partition states
/// (docs/performance.md: "a write at an index no partition expresses").
#[kernel]
pub fn attention_softmax_kernel1(att: AtomicSlice<f32>, preatt: &[f32], b: u32, t: NonZeroU32, nh: NonZeroU32) {
    let idx = block_idx_x() * block_dim_x() + thread_idx_x();
    let total_threads = b * t.get() * nh.get();
    let Some(nh_t) = NonZeroU32::new(nh.get() * t.get()) else { return };
    if idx < total_threads {
        let h = idx % nh;
        let tt = (idx / nh) % t;
        let bb = idx / nh_t;
        let tq = t.get();
        let base = (bb * nh.get() * tq * tq + h * tq * tq + tt * tq) as usize;
        let Some(row) = preatt.get(base..base + tt as usize + 1) else { return };
        let mut maxval = -f32::MAX;
        for &v in row {
            if v > maxval {
                maxval = v;
            }
        }
        let mut expsum = 0.0f32;
        for &v in row {
            expsum += (v - maxval).fast_exp();
        }
        let expsum_inv = if expsum == 0.0 { 0.0 } else { expsum.fast_recip() };
        for t2 in 0..tq {
            let v = match row.get(t2 as usize) {
                Some(&v) => (v - maxval).fast_exp() * expsum_inv,
                None => 0.0,
            };
            if let Some(a) = att.get(base + t2 as usize) {
                a.store(v);
            }
        }
    }
}

/// L6, `scale_kernel` (dev/cuda/attention_forward.cu): in place over `[B, NH, T, T]`, one
/// element a thread: `inp *= scale` on and below the diagonal, `-inf` above it (the causal
/// mask). `b` is implied by `inp`'s length (the source's `idx < B NH T T`).
#[kernel]
pub fn scale_kernel(mut inp: DisjointSlice<f32>, scale: f32, b: u32, nh: u32, t: NonZeroU32) {
    let _ = b;
    let i = unique_index();
    let Some(v) = inp.get_mut(i) else { return };
    let (Some(nh_tt), Some(tt)) = (NonZeroU32::new(nh * t.get() * t.get()), NonZeroU32::new(t.get() * t.get())) else { return };
    let idx = i.get() as u32;
    let rest = idx % nh_tt;
    let rest = rest % tt;
    let t2 = rest / t;
    let col = rest % t;
    if col > t2 {
        *v = f32::NEG_INFINITY;
    } else {
        *v *= scale;
    }
}

// ------------------------------------------------------------------------------------------
// vLLM
// ------------------------------------------------------------------------------------------

/// V1, `convert_fp8_kernel<uint8_t, __nv_bfloat16, kFp8E4M3>` (csrc/cache_kernels.cu): one
/// block per cache block of `block_stride` elements: `dst = fp8_e4m3(src / scale)` (a precise
/// division, then the saturating conversion). Grid: the cache's blocks.
#[kernel(cols(dst_cache = block_stride))]
pub fn convert_fp8_kernel(src_cache: &[bf16], mut dst_cache: DisjointSlice<u8, BlockRows>, scale: f32, block_stride: u32) {
    let me = block_row();
    let Some(row) = dst_cache.row_mut(me) else { return };
    let start = me.row() as usize * block_stride as usize;
    let Some(src) = src_cache.get(start..start + block_stride as usize) else { return };
    // A load, a division and a conversion: docs/performance.md's "small body" x4 form for a
    // row loop with a run-time block size.
    row.zip_input_for_each_x4(src, |x, o| *o = fp8::e4m3(x.widen() / scale));
}

/// Threads a block of [`advance_step_kernel()`] (vLLM's `max_threads`, its template argument).
pub const ADVANCE_STEP_THREADS: u32 = 256;

/// V2, `prepare_inputs::advance_step_kernel<256>` (csrc/prepare_inputs/advance_step.cu): a
/// thread per sequence: `seq_lens += 1` in place, `input_positions = seq_len` (the new token's
/// position), `slot_mapping = block_tables[seq][pos / block_size] * block_size + pos %
/// block_size`. Blocks of [`ADVANCE_STEP_THREADS`] (`reqntid`: vLLM's compile-time size); the
/// source's grid is the SM count, without a stride loop, so at most `SMs x 256` sequences.
/// `sampled_token_ids` is not read (as in the source). Positions are non-negative, so the
/// divisions are unsigned.
#[kernel(reqntid(256), same_len(input_positions, seq_lens, slot_mapping))]
pub fn advance_step_kernel(
    block_size: NonZeroU32,
    sampled_token_ids: &[i64],
    mut input_positions: DisjointSlice<i64>,
    mut seq_lens: DisjointSlice<i32>,
    mut slot_mapping: DisjointSlice<i32>,
    block_tables: &[i32],
    block_tables_stride: u32,
) {
    let _ = sampled_token_ids;
    let i = unique_index();
    let (Some(len), Some(pos), Some(slot)) = (seq_lens.get_mut(i), input_positions.get_mut(i), slot_mapping.get_mut(i)) else {
        return;
    };
    let seq_len = *len;
    let next_seq_len = seq_len + 1;
    let next_input_pos = next_seq_len - 1;
    *len = next_seq_len;
    *pos = next_input_pos as i64;
    let p = next_input_pos as u32;
    let block_index = p / block_size;
    let block_offset = p % block_size;
    let Some(&block) = block_tables.get(block_tables_stride as usize * i.get() + block_index as usize) else { return };
    *slot = block * block_size.get() as i32 + block_offset as i32;
}

// ------------------------------------------------------------------------------------------
// Docs probes (not ports): what a port's first try assumed, checked.
// ------------------------------------------------------------------------------------------

/// Probe for L1/L2's shared-memory hand-off as llm.c writes it: every lane of a warp stores its
/// warp's (identical) sum to `shared[warp_id]` ("we could have lane_id == 0 guard but not
/// needed"), a barrier, then lane `l` reads slot `l`. `out[t]` = the slot thread `t` read, or
/// 0. The ports guard the store with `lane_id == 0`; `tests/ports11.rs` runs this form on the
/// CPU executor to see whether the race detector accepts it.
#[kernel]
pub fn probe_all_lanes_store_one_slot(mut out: DisjointSlice<f32>) {
    let slots = shared_array![f32; 32];
    let tid = thread_idx_x();
    slots.set((tid / 32) as usize, (tid / 32) as f32);
    sync_threads();
    let lane = tid % 32;
    let v = if lane < block_dim_x() / 32 { slots.get(lane as usize) } else { 0.0 };
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}
