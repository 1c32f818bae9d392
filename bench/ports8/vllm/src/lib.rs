//! Issue 30's eighth held-out port: vLLM kernels (vllm-project/vllm; commits in each item's
//! doc) written in safe Rust from ferrocuda's docs alone, first try. The CUDA C++ twins, as the
//! public source writes them, are in `bench/ports8/cuda/ports8.cu`; bench/ports8/RESULTS.md has
//! the figures.
//!
//! - [`reshape_and_cache_kernel()`] (csrc/cache_kernels.cu, bf16, `kAuto`): a token per block
//!   scattered into the paged key cache (`[blocks, heads, head_size / x, block_size, x]`) and
//!   value cache (`[blocks, heads, head_size, block_size]`) at its slot.
//! - [`segmented_max_reduction()`] (csrc/quantization/fp8/common.cu, bf16): the absolute maximum of
//!   the tensor over `448` (the FP8 E4M3 maximum), a shared-memory tree per block and
//!   `atomicMaxFloat` into one scale.
//! - [`scaled_fp8_quant_kernel()`] (same file): every element times `1 / scale`, clamped to
//!   `±448`, as FP8 E4M3, four a step (8-byte loads, 4-byte stores), grid-strided.
//! - [`fused_add_rms_norm_static_fp8_quant_kernel()`] (csrc/layernorm_quant_kernels.cu, the
//!   width-8 bf16 specialisation): `residual += input` in place (bf16x2 adds), the RMS of the
//!   row, then `fp8((residual * rms) * weight / scale)`, a token per block.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use core::num::NonZeroU32;

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{BlockRows, block_row, grid_stride};
use ferrocuda_device::half::fp8::e4m3x2;
use ferrocuda_device::pack16::Bf16x8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::thread::strided_range;

ferrocuda_device::embed_kernels!();

/// vLLM's largest block: `dim3 block(std::min(num_heads * head_size, 512))` for the cache, 1024
/// for the FP8 quantisers.
pub const QUANT_BLOCK: u32 = 1024;
/// The largest FP8 E4M3 value (`std::numeric_limits<c10::Float8_e4m3fn>::max()`).
pub const FP8_E4M3_MAX: f32 = 448.0;

/// vLLM's `vec4_t<scalar_t>` for bf16: four values, 8-byte aligned (one 8-byte load).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Bf16x4(pub [bf16; 4]);

/// vLLM's `float8x4_t`: four FP8 E4M3 bytes, 4-byte aligned (one 4-byte store).
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Fp8x4(pub [u8; 4]);

/// vLLM's `reshape_and_cache_kernel<__nv_bfloat16, __nv_bfloat16, kAuto>` (commit
/// 693083ae80680811c9c2a22edad2568e6635e190): block `t` copies token `t`'s `num_heads *
/// head_size` keys and values (rows `key_stride` / `value_stride` apart) into the caches at
/// slot `slot_mapping[t]` (skipped when negative: a padding token). `k_scale` and `v_scale`
/// are unused for `kAuto`. Launch: `num_tokens` blocks of `min(num_heads * head_size, 512)`
/// threads. The caches are `AtomicSlice<bf16>`: each element is written at a computed index
/// (the docs' row for `reshape_and_cache_flash`), one relaxed 2-byte store each.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn reshape_and_cache_kernel(
    key: &[bf16],
    value: &[bf16],
    key_cache: AtomicSlice<bf16>,
    value_cache: AtomicSlice<bf16>,
    slot_mapping: &[i64],
    key_stride: u32,
    value_stride: u32,
    num_heads: u32,
    head_size: NonZeroU32,
    block_size: NonZeroU32,
    x: NonZeroU32,
    k_scale: f32,
    v_scale: f32,
) {
    let _ = (k_scale, v_scale);
    let token_idx = block_idx_x();
    let Some(&slot_idx) = slot_mapping.get(token_idx as usize) else { return };
    if slot_idx < 0 {
        // Padding token that should be ignored.
        return;
    }
    let slot = slot_idx as u64;
    let block_idx = slot / u64::from(block_size.get());
    let block_offset = slot % u64::from(block_size.get());
    let head_size_u = head_size.get();
    let bs = block_size.get();
    let xs = x.get();
    let n = num_heads * head_size_u;
    for i in strided_range(thread_idx_x(), n, block_dim_x()) {
        let src_key_idx = token_idx as usize * key_stride as usize + i as usize;
        let src_value_idx = token_idx as usize * value_stride as usize + i as usize;

        let head_idx = i / head_size;
        let head_offset = i % head_size;
        let x_idx = head_offset / x;
        let x_offset = head_offset % x;

        let tgt_key_idx = block_idx * u64::from(num_heads * (head_size_u / xs) * bs * xs)
            + u64::from(head_idx * (head_size_u / xs) * bs * xs + x_idx * bs * xs)
            + block_offset * u64::from(xs)
            + u64::from(x_offset);
        let tgt_value_idx = block_idx * u64::from(num_heads * head_size_u * bs) + u64::from(head_idx * head_size_u * bs + head_offset * bs) + block_offset;
        let (Some(&k), Some(&v)) = (key.get(src_key_idx), value.get(src_value_idx)) else { return };
        if let Some(c) = key_cache.get(tgt_key_idx as usize) {
            c.store(k);
        }
        if let Some(c) = value_cache.get(tgt_value_idx as usize) {
            c.store(v);
        }
    }
}

/// vLLM's `segmented_max_reduction<__nv_bfloat16>` (commit
/// 006ccf0ea309e73ee3b7dc3bbb7017fa2bf7b721): each thread takes the absolute maximum of its
/// grid-strided elements, the block reduces them in a shared-memory tree (`cache[tid]`,
/// `blockDim.x * 4` bytes of dynamic shared memory here where vLLM declares `__shared__ float
/// cache[1024]`), and thread 0 raises `scale[0]` to `max / 448` atomically (vLLM's
/// `atomicMaxFloat`). `scale[0]` must start at a value `<= 0`. Launch: `num_tokens` blocks of
/// [`QUANT_BLOCK`] threads (a power of two), `QUANT_BLOCK * 4` dynamic shared bytes.
#[kernel]
pub fn segmented_max_reduction(scale: AtomicSlice<f32>, input: &[bf16]) {
    let Some(cache) = dynamic_shared::<f32>().per_thread::<1>() else { return };
    let start = block_dim_x() * block_idx_x() + thread_idx_x();
    let mut tmp = 0.0f32;
    for i in strided_range(start, input.len() as u32, block_dim_x() * grid_dim_x()) {
        if let Some(x) = input.get(i as usize) {
            tmp = tmp.max(x.widen().abs());
        }
    }
    let me = cache.mine();
    cache.set(me, 0, tmp);
    sync_threads();

    let mut ib = block_dim_x() / 2;
    while ib != 0 {
        if let Some(p) = cache.partner(ib) {
            let other = cache.get(p, 0);
            if other > cache.get(me, 0) {
                cache.set(me, 0, other);
            }
        }
        sync_threads();
        ib /= 2;
    }
    if thread_idx_x() == 0
        && let Some(s) = scale.get(0)
    {
        s.fetch_max(cache.get(cache.first(), 0) / FP8_E4M3_MAX);
    }
}

/// [`segmented_max_reduction()`] with vLLM's own `__shared__ float cache[1024]` (session 20,
/// issue 30's eighth port, gap 7): the tree over `shared_array![f32; 1024].per_thread::<1>()`,
/// which holds a slot for every thread of any block, so the launch passes no dynamic shared
/// bytes (as vLLM's) and nothing is checked. Otherwise the port as written.
#[kernel]
pub fn segmented_max_reduction_static(scale: AtomicSlice<f32>, input: &[bf16]) {
    let Some(cache) = shared_array![f32; 1024].per_thread::<1>() else { return };
    let start = block_dim_x() * block_idx_x() + thread_idx_x();
    let mut tmp = 0.0f32;
    for i in strided_range(start, input.len() as u32, block_dim_x() * grid_dim_x()) {
        if let Some(x) = input.get(i as usize) {
            tmp = tmp.max(x.widen().abs());
        }
    }
    let me = cache.mine();
    cache.set(me, 0, tmp);
    sync_threads();

    let mut ib = block_dim_x() / 2;
    while ib != 0 {
        if let Some(p) = cache.partner(ib) {
            let other = cache.get(p, 0);
            if other > cache.get(me, 0) {
                cache.set(me, 0, other);
            }
        }
        sync_threads();
        ib /= 2;
    }
    if thread_idx_x() == 0
        && let Some(s) = scale.get(0)
    {
        s.fetch_max(cache.get(cache.first(), 0) / FP8_E4M3_MAX);
    }
}

/// vLLM's `scaled_fp8_conversion`: `x * inverted_scale` clamped to `±448`, as E4M3 bits.
#[inline(always)]
// `min`/`max`, not `clamp`: vLLM's `fmax(-448, fmin(x, 448))` turns a NaN into 448 (fmin and fmax
// return the number), where `clamp` keeps the NaN.
#[allow(clippy::manual_clamp)]
fn scaled_fp8_pair(a: f32, b: f32, inverted_scale: f32) -> [u8; 2] {
    let clamp = |v: f32| (v * inverted_scale).min(FP8_E4M3_MAX).max(-FP8_E4M3_MAX);
    e4m3x2(clamp(a), clamp(b))
}

/// vLLM's `scaled_fp8_quant_kernel<__nv_bfloat16>` (commit
/// 006ccf0ea309e73ee3b7dc3bbb7017fa2bf7b721) for a tensor of a multiple of 4 elements: `out[i]
/// = fp8(input[i] / scale[0])`, four elements (one [`Bf16x4`] in, one [`Fp8x4`] out) a
/// grid-strided step. vLLM's scalar loop over a tail of `num_elems % 4` bytes has no safe
/// output here (a thread's 4-byte pack and another's tail byte would be two views of one
/// buffer), so the port takes whole packs. Launch: `num_tokens` blocks of [`QUANT_BLOCK`].
#[kernel(same_len(out, input))]
pub fn scaled_fp8_quant_kernel(mut out: DisjointSlice<Fp8x4>, input: &[Bf16x4], scale: &[f32]) {
    let Some(&s) = scale.first() else { return };
    // Invert the scale so that we can use multiplications to avoid expensive division.
    let inverted_scale = 1.0 / s;
    for i in grid_stride(out.len()) {
        let v = input[i];
        let [a, b, c, d] = v.0.map(|h| h.widen());
        let [o0, o1] = scaled_fp8_pair(a, b, inverted_scale);
        let [o2, o3] = scaled_fp8_pair(c, d, inverted_scale);
        if let Some(o) = out.get_mut(i) {
            *o = Fp8x4([o0, o1, o2, o3]);
        }
    }
}

/// Eight FP8 E4M3 bytes, 8-byte aligned: one 8-byte store (the docs' row for vLLM's
/// `vec_n_t<Float8_e4m3fn, 8>`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Fp8x8(pub [u8; 8]);

/// vLLM's `fused_add_rms_norm_static_fp8_quant_kernel<__nv_bfloat16, 8, Float8_e4m3fn>`
/// (commit 0112cf233e0c60674c2844a09695ddeb2b901dc0; `_f16Vec` from csrc/type_convert.cuh,
/// `scaled_fp8_conversion<true>` from csrc/quantization/fp8/common.cuh): block `t` adds token
/// `t`'s `input` row (rows `vec_input_stride` packs apart) to its `residual` row in place, pair
/// by pair in bf16 (`__hadd2`), sums the squares, and writes `out[t] = fp8(clamp(((residual *
/// rsqrt(mean square + epsilon)) as bf16 * weight) as bf16 / scale))`. Rows of
/// `vec_hidden_size` 16-byte packs (`hidden_size = 8 vec_hidden_size`). Launch: `num_tokens`
/// blocks of `min(hidden_size, num_tokens < 256 ? 1024 : 256)` threads.
#[kernel(cols(out = vec_hidden_size, residual = vec_hidden_size))]
#[allow(clippy::too_many_arguments)]
pub fn fused_add_rms_norm_static_fp8_quant_kernel(
    mut out: DisjointSlice<Fp8x8, BlockRows>,
    input: &[Bf16x8],
    vec_input_stride: u32,
    mut residual: DisjointSlice<Bf16x8, BlockRows>,
    weight: &[Bf16x8],
    scale: &[f32],
    epsilon: f32,
    num_tokens: u32,
    vec_hidden_size: u32,
) {
    let me = block_row();
    if me.row() >= num_tokens {
        return;
    }
    let start = me.row() as usize * vec_input_stride as usize;
    let Some(x) = input.get(start..start + vec_hidden_size as usize) else { return };
    let Some(row) = residual.row_mut(me) else { return };
    let mut variance = 0.0f32;
    row.zip_input(x).for_each(|(inp, res)| {
        let (a, b) = (inp.pairs(), Bf16x8::load(res).pairs());
        let temp = Bf16x8([a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]);
        for pair in temp.pairs() {
            let (zx, zy) = pair.to_f32s();
            variance += zx * zx + zy * zy;
        }
        temp.store(res);
    });
    let hidden_size = (vec_hidden_size * 8) as f32;
    let s_variance = RuntimeBlockReduce::new(block_scratch!(f32)).sum_broadcast(variance, |v| (v / hidden_size + epsilon).rsqrt());

    // Invert scale to avoid division.
    let Some(&s) = scale.first() else { return };
    let scale_inv = 1.0 / s;
    let Some(row) = residual.row_mut(me) else { return };
    let Some(out_row) = out.row_mut(me) else { return };
    let Some(w) = weight.get(..vec_hidden_size as usize) else { return };
    // The output row, the weights and the residual row at the same columns (lane + stride j).
    let mut res_iter = row.iter_mut();
    out_row.zip_input(w).for_each(|(wv, o)| {
        let Some(res) = res_iter.next() else { return };
        let temp = Bf16x8::load(res).pairs();
        let wp = wv.pairs();
        let mut bytes = [0u8; 8];
        for k in 0..4 {
            let (a, b) = temp[k].to_f32s();
            let scaled = Bf16x2::from_f32s(a * s_variance, b * s_variance) * wp[k];
            let (c, d) = scaled.to_f32s();
            let [q0, q1] = scaled_fp8_pair(c, d, scale_inv);
            bytes[2 * k] = q0;
            bytes[2 * k + 1] = q1;
        }
        *o = Fp8x8(bytes);
    });
}

/// [`reshape_and_cache_kernel()`], fix round: the first try checked both input reads in every
/// step (`key.get(token * stride + i)`, 64-bit compares: 37 `ISETP` against nvcc's 11, 32
/// registers against 24). Here the token's key and value rows are sliced once before the loop
/// (the docs' "slice inputs of the output's shape once" advice), so `i < n` bounds them.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn reshape_and_cache_kernel_fixed(
    key: &[bf16],
    value: &[bf16],
    key_cache: AtomicSlice<bf16>,
    value_cache: AtomicSlice<bf16>,
    slot_mapping: &[i64],
    key_stride: u32,
    value_stride: u32,
    num_heads: u32,
    head_size: NonZeroU32,
    block_size: NonZeroU32,
    x: NonZeroU32,
    k_scale: f32,
    v_scale: f32,
) {
    let _ = (k_scale, v_scale);
    let token_idx = block_idx_x();
    let Some(&slot_idx) = slot_mapping.get(token_idx as usize) else { return };
    if slot_idx < 0 {
        // Padding token that should be ignored.
        return;
    }
    let slot = slot_idx as u64;
    let block_idx = slot / u64::from(block_size.get());
    let block_offset = slot % u64::from(block_size.get());
    let head_size_u = head_size.get();
    let bs = block_size.get();
    let xs = x.get();
    let n = num_heads * head_size_u;
    let key_start = token_idx as usize * key_stride as usize;
    let value_start = token_idx as usize * value_stride as usize;
    let (Some(key_row), Some(value_row)) = (key.get(key_start..key_start + n as usize), value.get(value_start..value_start + n as usize)) else {
        return;
    };
    let key_base = block_idx * u64::from(num_heads * (head_size_u / xs) * bs * xs) + block_offset * u64::from(xs);
    let value_base = block_idx * u64::from(num_heads * head_size_u * bs) + block_offset;
    for i in strided_range(thread_idx_x(), key_row.len() as u32, block_dim_x()) {
        let head_idx = i / head_size;
        let head_offset = i % head_size;
        let x_idx = head_offset / x;
        let x_offset = head_offset % x;
        let tgt_key_idx = key_base + u64::from(head_idx * (head_size_u / xs) * bs * xs + x_idx * bs * xs + x_offset);
        let tgt_value_idx = value_base + u64::from(head_idx * head_size_u * bs + head_offset * bs);
        let (Some(&k), Some(&v)) = (key_row.get(i as usize), value_row.get(i as usize)) else { return };
        if let Some(c) = key_cache.get(tgt_key_idx as usize) {
            c.store(k);
        }
        if let Some(c) = value_cache.get(tgt_value_idx as usize) {
            c.store(v);
        }
    }
}
