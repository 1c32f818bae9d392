//! vLLM kernels (vllm-project/vllm, `csrc/`), ported to safe Rust from ferrocuda's docs alone:
//! issue 30's fourth held-out port (session 13), first try. Each kernel keeps its source's name,
//! parameters (plus a length per slice, which ferrocuda passes) and algorithm; `scalar_t` is
//! bf16 where the source is usually run in bf16. Built without fast math, as vLLM builds.
//!
//! Sources (read at these commits):
//! - `silu_and_mul_kernel`: `act_and_mul_kernel<bf16, silu_kernel, true>`,
//!   csrc/activation_kernels.cu @ 00ccbd42dc1f40412cc711c5737cc4be0e7a8145;
//! - `rms_norm_kernel`: `rms_norm_kernel<bf16>`, csrc/layernorm_kernels.cu @
//!   0112cf233e0c60674c2844a09695ddeb2b901dc0;
//! - `segmented_max_reduction`: `segmented_max_reduction<float>` (the first kernel of
//!   `dynamic_scaled_fp8_quant`), csrc/quantization/fp8/common.cu @
//!   006ccf0ea309e73ee3b7dc3bbb7017fa2bf7b721.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::atomic::Atomic;
use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointSlice, block_row};
use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::prelude::*;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, grid_stride_range, strided_range, thread_idx_x};
use ferrocuda_device::{block_scratch, kernel, shared_array, warp};

ferrocuda_device::embed_kernels!();

/// The largest finite FP8 E4M3 value (`std::numeric_limits<c10::Float8_e4m3fn>::max()`).
pub const FP8_E4M3_MAX: f32 = 448.0;

/// vLLM's `silu_and_mul`: `out[t][i] = silu(x) * y` with `x = input[t][i]`, `y = input[t][d +
/// i]`; `silu` rounds to bf16 before the bf16 product, as `compute<bf16, silu_kernel, true>`.
/// One block per token (`grid = num_tokens`, `block = min(d, 1024)`).
#[kernel(cols(out = d))]
pub fn silu_and_mul_kernel(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32) {
    let me = block_row();
    let width = d as usize;
    let token = me.row() as usize;
    let Some(row_in) = input.get(token * 2 * width..(token + 1) * 2 * width) else { return };
    let (xs, ys) = row_in.split_at(width);
    let Some(row) = out.row_mut(me) else { return };
    row.zip_inputs([xs, ys]).for_each(|([&x, &y], o)| {
        let xf = x.widen();
        let act = (xf / (1.0 + (-xf).exp())).to_bf16();
        *o = act.mul_rn(y);
    });
}

/// vLLM's `rms_norm_kernel`: one block per token; the sum of squares of the (strided) input row
/// reduced over the block (cub's `BlockReduce<float, 1024>` with `blockDim.x` valid threads),
/// `s = rsqrtf(mean + epsilon)` through shared memory, then `out = bf16(x * s) * weight`.
#[kernel(cols(out = hidden_size))]
pub fn rms_norm_kernel(
    mut out: DisjointSlice<bf16, BlockRows>,
    input: &[bf16],
    input_stride: i64,
    weight: &[bf16],
    epsilon: f32,
    num_tokens: i32,
    hidden_size: u32,
) {
    let _ = num_tokens;
    let s_variance = shared_array![f32; 1];
    let me = block_row();
    let start = me.row() as usize * input_stride as usize;
    let Some(x) = input.get(start..start + hidden_size as usize) else { return };
    let mut variance = 0.0f32;
    for i in strided_range(thread_idx_x() as usize, x.len(), block_dim_x() as usize) {
        let v = x[i].widen();
        variance += v * v;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    if let Some(total) = reduce.sum(variance) {
        s_variance.set(0, (total / hidden_size as f32 + epsilon).rsqrt());
    }
    sync_threads();
    let s = s_variance.get(0);
    let Some(row) = out.row_mut(me) else { return };
    row.zip_inputs([x, weight]).for_each(|([&xv, &w], o)| {
        *o = (xv.widen() * s).to_bf16().mul_rn(w);
    });
}

/// The fix round's `rms_norm_kernel` (after the GPU run; the first try above is unchanged):
/// `RuntimeBlockReduce::sum_all` gives every thread the total, so each computes `s` itself: two
/// barriers per row (the reduction's), where the first try's `sum` (thread 0, then a trailing
/// barrier) plus the `s_variance` hand-off through shared memory and its `sync_threads()` made
/// three, one more than cub's `Reduce` and vLLM's `__syncthreads()` (0.92x nvcc at 1024 threads).
#[kernel(cols(out = hidden_size))]
pub fn rms_norm_kernel_fixed(
    mut out: DisjointSlice<bf16, BlockRows>,
    input: &[bf16],
    input_stride: i64,
    weight: &[bf16],
    epsilon: f32,
    num_tokens: i32,
    hidden_size: u32,
) {
    let _ = num_tokens;
    let me = block_row();
    let start = me.row() as usize * input_stride as usize;
    let Some(x) = input.get(start..start + hidden_size as usize) else { return };
    let mut variance = 0.0f32;
    for i in strided_range(thread_idx_x() as usize, x.len(), block_dim_x() as usize) {
        let v = x[i].widen();
        variance += v * v;
    }
    let total = RuntimeBlockReduce::new(block_scratch!(f32)).sum_all(variance);
    let s = (total / hidden_size as f32 + epsilon).rsqrt();
    let Some(row) = out.row_mut(me) else { return };
    row.zip_inputs([x, weight]).for_each(|([&xv, &w], o)| {
        *o = (xv.widen() * s).to_bf16().mul_rn(w);
    });
}

/// Session 15's `rms_norm_kernel`: the source's structure, reduction for reduction. cub's
/// `Reduce` then `if (threadIdx.x == 0) s_variance = rsqrtf(..); __syncthreads();` is
/// `RuntimeBlockReduce::sum_broadcast(variance, |total| ..)`: thread 0 computes `s` once and
/// the block gets it after the source's second barrier (the first try's `sum` plus a
/// `shared_array!` hand-off took 3 barriers; the fixed variant's `sum_all` took 2 but had all
/// 32 warps compute the division and `rsqrt`, about 25 instructions each, after the last
/// barrier). The output row is taken before the reduction (its checks off the path from the
/// last barrier to the output loop's first load, where the twin has only the `s_variance`
/// read).
#[kernel(cols(out = hidden_size))]
pub fn rms_norm_kernel_broadcast(
    mut out: DisjointSlice<bf16, BlockRows>,
    input: &[bf16],
    input_stride: i64,
    weight: &[bf16],
    epsilon: f32,
    num_tokens: i32,
    hidden_size: u32,
) {
    let _ = num_tokens;
    let me = block_row();
    let start = me.row() as usize * input_stride as usize;
    let Some(x) = input.get(start..start + hidden_size as usize) else { return };
    let Some(row) = out.row_mut(me) else { return };
    let mut variance = 0.0f32;
    for i in strided_range(thread_idx_x() as usize, x.len(), block_dim_x() as usize) {
        let v = x[i].widen();
        variance += v * v;
    }
    let s = RuntimeBlockReduce::new(block_scratch!(f32)).sum_broadcast(variance, |total| (total / hidden_size as f32 + epsilon).rsqrt());
    row.zip_inputs([x, weight]).for_each(|([&xv, &w], o)| {
        *o = (xv.widen() * s).to_bf16().mul_rn(w);
    });
}

/// Session 16's diagnostic: `rms_norm_kernel_broadcast` with cub's block reduction written out
/// in the port (not the library's): each warp's butterfly sum to `warp_sums[warp]`, a barrier,
/// then thread 0 alone adds the warps' sums one after another (cub's
/// `BLOCK_REDUCE_WARP_REDUCTIONS`, where the library's `RuntimeBlockReduce` has warp 0 fold
/// them by shuffles), computes `s` and hands it over through shared memory, a second barrier.
/// Timed beside the twin (`scripts/gpu-run/s16-ln.sh`): at the twin's time, the library's
/// second level is the gap; at the broadcast variant's, it is not. Full warps only (a block of
/// a multiple of 32 threads, as the bench's 1024).
#[kernel(cols(out = hidden_size))]
pub fn rms_norm_kernel_cub(
    mut out: DisjointSlice<bf16, BlockRows>,
    input: &[bf16],
    input_stride: i64,
    weight: &[bf16],
    epsilon: f32,
    num_tokens: i32,
    hidden_size: u32,
) {
    let _ = num_tokens;
    let warp_sums = shared_array![f32; 32];
    let s_variance = shared_array![f32; 1];
    let me = block_row();
    let start = me.row() as usize * input_stride as usize;
    let Some(x) = input.get(start..start + hidden_size as usize) else { return };
    let Some(row) = out.row_mut(me) else { return };
    let mut variance = 0.0f32;
    for i in strided_range(thread_idx_x() as usize, x.len(), block_dim_x() as usize) {
        let v = x[i].widen();
        variance += v * v;
    }
    let t = thread_idx_x();
    let partial = warp::reduce_sum(variance);
    if t % 32 == 0 {
        warp_sums.set((t / 32) as usize % 32, partial);
    }
    sync_threads();
    if t == 0 {
        let mut total = partial;
        for w in 1..block_dim_x().div_ceil(32).min(32) {
            total += warp_sums.get(w as usize);
        }
        s_variance.set(0, (total / hidden_size as f32 + epsilon).rsqrt());
    }
    sync_threads();
    let s = s_variance.get(0);
    row.zip_inputs([x, weight]).for_each(|([&xv, &w], o)| {
        *o = (xv.widen() * s).to_bf16().mul_rn(w);
    });
}

/// CUDA's `atomicMaxFloat` of vLLM: `atomicMax` on the bits as `int` for a value `>= 0`,
/// `atomicMin` on the bits as `unsigned` otherwise. ferrocuda has no `f32` atomic max and an
/// `AtomicSlice` has one element type, so the buffer is `i32` and the unsigned minimum is a
/// compare-exchange loop (never taken by `segmented_max_reduction`, whose values are `>= 0`).
#[inline(always)]
fn atomic_max_float(cell: &Atomic<i32>, value: f32) -> f32 {
    if value >= 0.0 {
        f32::from_bits(cell.fetch_max(value.to_bits() as i32) as u32)
    } else {
        let mut old = cell.load();
        loop {
            let new = (old as u32).min(value.to_bits()) as i32;
            if new == old {
                break;
            }
            let seen = cell.compare_exchange(old, new);
            if seen == old {
                break;
            }
            old = seen;
        }
        f32::from_bits(old as u32)
    }
}

/// vLLM's `segmented_max_reduction<float>`: each thread's grid-stride maximum of `|x|`, a tree
/// reduction over `cache[1024]` in shared memory, then every block's thread 0 folds `max / 448` into `*scale` with `atomicMaxFloat` (`scale` holds an `f32`'s
/// bits, zeroed first). `grid = num_tokens`, `block = 1024`.
#[kernel]
pub fn segmented_max_reduction(scale: AtomicSlice<i32>, input: &[f32], num_elems: i64) {
    let cache = shared_array![f32; 1024];
    let t = thread_idx_x() as usize;
    let n = (num_elems as usize).min(input.len());
    let x = &input[..n];
    let mut tmp = 0.0f32;
    for i in grid_stride_range(x.len()) {
        tmp = tmp.max(x[i].abs());
    }
    cache.set(t, tmp);
    sync_threads();
    let mut ib = block_dim_x() as usize / 2;
    while ib != 0 {
        if t < ib && cache.get(t + ib) > cache.get(t) {
            cache.set(t, cache.get(t + ib));
        }
        sync_threads();
        ib /= 2;
    }
    if t == 0
        && let Some(cell) = scale.get(0)
    {
        atomic_max_float(cell, cache.get(0) / FP8_E4M3_MAX);
    }
}
