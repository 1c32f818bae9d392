//! Issue 30's ninth held-out port, vLLM part: three kernels of vllm-project/vllm written in
//! safe Rust from ferrocuda's docs alone, each beside its CUDA C++ twin in
//! `bench/ports9/cuda/ports9.cu`. The first try of each is kept as written; see
//! bench/ports9/RESULTS.md.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointSlice, block_row};
use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::math::DeviceFloat;
use ferrocuda_device::pack16::Bf16x8;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_idx, strided_range, thread_idx_x};
use ferrocuda_device::{block_scratch, kernel, multi_block_reduce, shared_array, warp};

ferrocuda_device::embed_kernels!();

/// csrc/cache_kernels.cu `copy_blocks_kernel<bf16>`: grid `(num_layers, num_pairs)`; block
/// `pair` copies cache block `block_mapping[2 pair]` onto block `block_mapping[2 pair + 1]`
/// of layer `blockIdx.x`, keys then values. vLLM passes one pointer per layer; here each of
/// `key_caches`/`value_caches` holds every layer, `layer_numel` elements apart. Source and
/// destination blocks come from data and lie in the one buffer that is written, so the
/// elements are read and written through `AtomicSlice` (relaxed loads and stores; vLLM's
/// contract that no block is both a source and a destination makes the copy's result the
/// source's).
#[kernel]
pub fn copy_blocks_kernel(key_caches: AtomicSlice<bf16>, value_caches: AtomicSlice<bf16>, block_mapping: &[i64], numel_per_block: u32, layer_numel: u64) {
    let grid = block_idx();
    let (layer, pair) = (grid.x as u64, grid.y as usize);
    let (Some(&src_block), Some(&dst_block)) = (block_mapping.get(2 * pair), block_mapping.get(2 * pair + 1)) else { return };
    let base = layer * layer_numel;
    let src = base.wrapping_add((src_block as u64).wrapping_mul(numel_per_block as u64));
    let dst = base.wrapping_add((dst_block as u64).wrapping_mul(numel_per_block as u64));
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    for cache in [&key_caches, &value_caches] {
        for i in strided_range(tid, numel_per_block, threads) {
            let (s, d) = ((src + i as u64) as usize, (dst + i as u64) as usize);
            if let (Some(from), Some(to)) = (cache.get(s), cache.get(d)) {
                to.store(from.load());
            }
        }
    }
}

/// csrc/layernorm_kernels.cu `poly_norm_kernel<bf16, 0>` (the generic kernel): per token
/// row, `out = w2 x / rms2 + w1 x^2 / rms4 + w0 x^3 / rms6 + bias` with `rmsK = sqrt(mean(x^K)
/// + eps)`, a row per block of `min(hidden, 1024)` threads.
#[kernel(cols(out = hidden))]
pub fn poly_norm_kernel(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], weight: &[bf16], bias: &[bf16], epsilon: f32, hidden: u32) {
    let me = block_row();
    let start = me.row() as usize * hidden as usize;
    // Block-uniform: every thread of the block returns, before the reductions' barriers.
    let (Some(x_row), Some(w), Some(b0)) = (input.get(start..start + hidden as usize), weight.get(..3), bias.first()) else {
        return;
    };
    let (mut variance, mut variance2, mut variance3) = (0.0f32, 0.0f32, 0.0f32);
    for i in strided_range(thread_idx_x() as usize, x_row.len(), block_dim_x() as usize) {
        let x = x_row[i].widen();
        let x2 = x * x;
        let x4 = x2 * x2;
        let x6 = x4 * x2;
        variance += x2;
        variance2 += x4;
        variance3 += x6;
    }
    // CUB reduces the three as one `float3`; the library's block reductions take one value
    // each: the first two in one pair (2 barriers), the third alone.
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let (variance, variance2) = reduce.sum_then_sum_all(variance, |_| variance2);
    let variance3 = reduce.sum_all(variance3);
    let (w0, w1, w2) = (w[0].widen(), w[1].widen(), w[2].widen());
    let s_bias = b0.widen();
    let h = hidden as f32;
    let w2_inv_std = w2 * (variance / h + epsilon).rsqrt();
    let w1_inv_std2 = w1 * (variance2 / h + epsilon).rsqrt();
    let w0_inv_std3 = w0 * (variance3 / h + epsilon).rsqrt();

    let Some(row) = out.row_mut(me) else { return };
    for (x, o) in row.zip_input(x_row) {
        let x = x.widen();
        let x2 = x * x;
        let x3 = x2 * x;
        *o = (x * w2_inv_std + x2 * w1_inv_std2 + x3 * w0_inv_std3 + s_bias).to_bf16();
    }
}

/// [`poly_norm_kernel()`]'s fix round: CUB reduces the three sums as one `float3` (one barrier,
/// then thread 0's hand-off: 2), where the first try's library reductions took 4 barriers
/// (`sum_then_sum_all` 2, `sum_all` 2). Here, in blocks of whole warps, each warp folds its
/// three sums by shuffles, lane 0 stores them, one barrier, and every thread adds the warps'
/// partials (llm.c's `blockReduce` shape, three values at once); a block with a partial last
/// warp keeps the library's reductions.
#[kernel(cols(out = hidden))]
pub fn poly_norm_kernel_fixed(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], weight: &[bf16], bias: &[bf16], epsilon: f32, hidden: u32) {
    let me = block_row();
    let start = me.row() as usize * hidden as usize;
    let (Some(x_row), Some(w), Some(b0)) = (input.get(start..start + hidden as usize), weight.get(..3), bias.first()) else {
        return;
    };
    let (mut variance, mut variance2, mut variance3) = (0.0f32, 0.0f32, 0.0f32);
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    for i in strided_range(tid as usize, x_row.len(), threads as usize) {
        let x = x_row[i].widen();
        let x2 = x * x;
        let x4 = x2 * x2;
        let x6 = x4 * x2;
        variance += x2;
        variance2 += x4;
        variance3 += x6;
    }
    let parts = shared_array![f32; 96];
    let (variance, variance2, variance3) = if threads.is_multiple_of(32) {
        let sums = [warp::reduce_sum(variance), warp::reduce_sum(variance2), warp::reduce_sum(variance3)];
        let (lane, wid) = (tid % 32, (tid / 32) % 32);
        if lane == 0 {
            for (k, s) in sums.into_iter().enumerate() {
                parts.set(3 * wid as usize + k, s);
            }
        }
        sync_threads();
        let mut total = [0.0f32; 3];
        for wp in 0..(threads / 32).min(32) {
            for (k, t) in total.iter_mut().enumerate() {
                *t += parts.get(3 * wp as usize + k);
            }
        }
        (total[0], total[1], total[2])
    } else {
        let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
        let (v1, v2) = reduce.sum_then_sum_all(variance, |_| variance2);
        (v1, v2, reduce.sum_all(variance3))
    };
    let (w0, w1, w2) = (w[0].widen(), w[1].widen(), w[2].widen());
    let s_bias = b0.widen();
    let h = hidden as f32;
    let w2_inv_std = w2 * (variance / h + epsilon).rsqrt();
    let w1_inv_std2 = w1 * (variance2 / h + epsilon).rsqrt();
    let w0_inv_std3 = w0 * (variance3 / h + epsilon).rsqrt();

    let Some(row) = out.row_mut(me) else { return };
    for (x, o) in row.zip_input(x_row) {
        let x = x.widen();
        let x2 = x * x;
        let x3 = x2 * x;
        *o = (x * w2_inv_std + x2 * w1_inv_std2 + x3 * w0_inv_std3 + s_bias).to_bf16();
    }
}

/// Four `bf16` in one 8-byte aligned value: vLLM's `int2` store of four outputs.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Bf16x4(pub [bf16; 4]);

/// vLLM's `swigluoai_and_mul` of one gate/up pair: `(clamp(up, -limit, limit) + 1) *
/// min(gate, limit) * sigmoid(alpha * min(gate, limit))`, rounded once to bf16.
#[inline(always)]
fn swigluoai(gate: bf16, up: bf16, alpha: f32, limit: f32) -> bf16 {
    let g = gate.widen().min(limit);
    let u = up.widen().min(limit).max(-limit);
    ((u + 1.0) * g / (1.0 + (-g * alpha).exp())).to_bf16()
}

/// [`poly_norm_kernel()`] with the library's multi-value block reduction (session 21's gaps
/// round, `block::MultiBlockReduce`): CUB's shape for its `BlockReduce<float3>` and vLLM's
/// hand-off, 2 barriers a row where the first try took 4: each warp folds the three sums by
/// shuffles, lane 0 stores them, one barrier, warp 0 folds the warps' partials and thread 0
/// computes the three coefficients, one barrier, every thread reads them.
#[kernel(cols(out = hidden))]
pub fn poly_norm_kernel_multi(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], weight: &[bf16], bias: &[bf16], epsilon: f32, hidden: u32) {
    let me = block_row();
    let start = me.row() as usize * hidden as usize;
    // Block-uniform: every thread of the block returns, before the reduction's barriers.
    let (Some(x_row), Some(w), Some(b0)) = (input.get(start..start + hidden as usize), weight.get(..3), bias.first()) else {
        return;
    };
    let (mut variance, mut variance2, mut variance3) = (0.0f32, 0.0f32, 0.0f32);
    for i in strided_range(thread_idx_x() as usize, x_row.len(), block_dim_x() as usize) {
        let x = x_row[i].widen();
        let x2 = x * x;
        let x4 = x2 * x2;
        let x6 = x4 * x2;
        variance += x2;
        variance2 += x4;
        variance3 += x6;
    }
    let h = hidden as f32;
    let reduce = multi_block_reduce!(f32; 3);
    let [w2_inv_std, w1_inv_std2, w0_inv_std3] = reduce.sum_broadcast([variance, variance2, variance3], |[v1, v2, v3]| {
        [w[2].widen() * (v1 / h + epsilon).rsqrt(), w[1].widen() * (v2 / h + epsilon).rsqrt(), w[0].widen() * (v3 / h + epsilon).rsqrt()]
    });
    let s_bias = b0.widen();

    let Some(row) = out.row_mut(me) else { return };
    for (x, o) in row.zip_input(x_row) {
        let x = x.widen();
        let x2 = x * x;
        let x3 = x2 * x;
        *o = (x * w2_inv_std + x2 * w1_inv_std2 + x3 * w0_inv_std3 + s_bias).to_bf16();
    }
}

/// csrc/activation_kernels.cu `swigluoai_and_mul_kernel<bf16>`, its vectorised path: a token
/// row per block; the row's `2 d` interleaved `(gate, up)` values read as 16-byte packs (four
/// pairs), four outputs written as one 8-byte value. `vecs = d / 4`: the port covers `d % 4 ==
/// 0` (the source's scalar tail and unaligned fallback are not ported).
#[kernel(cols(out = vecs))]
pub fn swigluoai_and_mul_kernel(mut out: DisjointSlice<Bf16x4, BlockRows>, input: &[Bf16x8], vecs: u32, alpha: f32, limit: f32) {
    let me = block_row();
    let start = me.row() as usize * vecs as usize;
    let (Some(in_row), Some(row)) = (input.get(start..start + vecs as usize), out.row_mut(me)) else { return };
    for (v, o) in row.zip_input(in_row) {
        let v = Bf16x8::load(v);
        *o = Bf16x4([
            swigluoai(v.get(0), v.get(1), alpha, limit),
            swigluoai(v.get(2), v.get(3), alpha, limit),
            swigluoai(v.get(4), v.get(5), alpha, limit),
            swigluoai(v.get(6), v.get(7), alpha, limit),
        ]);
    }
}

/// The 16-byte pack the swigluoai kernel reads, for host code (`Bf16x8::collect` makes the
/// `Vec<Bf16x8>` a launch takes): the `ferrocuda` facade does not re-export `pack16`.
pub use ferrocuda_device::pack16::Bf16x8 as InputPack;
