//! vLLM kernels (vllm-project/vllm, `csrc/`), ported to safe Rust from the docs alone: issue
//! 30's third held-out port, first try. Each kernel keeps its source's name, launch
//! configuration and algorithm, with `scalar_t` = bf16; built without fast math, as vLLM
//! builds them. The llm.c half is `ferrocuda-ports3-llmc` (bench/ports3/llmc).
//!
//! Where the port had to differ from the source, the kernel's docs say so (and
//! bench/ports3/RESULTS.md records it).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// The ports keep their sources' indexed loops (`for (k = 0; k < 8; k++) out[k] = f(in[k])`).
#![allow(clippy::needless_range_loop)]

use core::num::NonZeroU32;

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::block_row;
use ferrocuda_device::global::partition::BlockRows;
use ferrocuda_device::half::{Bf16x2, HalfFloat, bf16, fp8};
use ferrocuda_device::prelude::*;
use ferrocuda_device::{kernel, shared_array};

ferrocuda_device::embed_kernels!();

/// Eight bf16 in one 16-byte access (vLLM's `pack_128b_t` / `uint4` of bf16, half of a
/// `vec_n_t<bf16, 16>`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct X128 {
    /// The eight values.
    pub v: [bf16; 8],
}

/// Sixteen FP8 E4M3FN values (bits), vLLM's `q8_n_t<fp8, 16>`: one 16-byte store.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Fp8x16 {
    /// The sixteen values' bits.
    pub v: [u8; 16],
}

#[inline(always)]
fn widen8(x: X128) -> [f32; 8] {
    let mut f = [0.0f32; 8];
    for k in 0..8 {
        f[k] = x.v[k].widen();
    }
    f
}

/// vLLM `csrc/attention/merge_attn_states.cu`, `merge_attn_states_kernel<bf16, 128>`: merges
/// two partial attention outputs by their log-sum-exps (one 16-byte pack per thread) and
/// writes the merged log-sum-exp once per head. `output`, `prefix_output`, `suffix_output`:
/// `[n, h, d]` as packs; the lse arrays `[h, n]`. Launch: `CEIL_DIV(n h d / 8, 128)` blocks
/// of 128.
///
/// `output_lse` is written at a computed index (`head * num_tokens + token`, by the head's
/// pack-0 thread): an `AtomicSlice` relaxed store, as the porting table says.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn merge_attn_states_kernel(
    mut output: DisjointSlice<X128>,
    output_lse: AtomicSlice<f32>,
    prefix_output: &[X128],
    prefix_lse: &[f32],
    suffix_output: &[X128],
    suffix_lse: &[f32],
    num_tokens: u32,
    num_heads: u32,
    head_size: u32,
) {
    let pack_size = 8;
    let Some(threads_per_head) = NonZeroU32::new(head_size / pack_size) else { return };
    let Some(heads) = NonZeroU32::new(num_heads) else { return };
    let i = unique_index();
    let global_idx = i.get() as u32;
    let token_head_threads = num_tokens * num_heads * threads_per_head.get();
    if global_idx >= token_head_threads {
        return;
    }
    let token_head_idx = global_idx / threads_per_head;
    let pack_idx = global_idx % threads_per_head;
    let token_idx = token_head_idx / heads;
    let head_idx = token_head_idx % heads;
    let lse_idx = (head_idx * num_tokens + token_idx) as usize;
    let (Some(&p_lse), Some(&s_lse)) = (prefix_lse.get(lse_idx), suffix_lse.get(lse_idx)) else { return };
    let p_lse = if p_lse.is_infinite() { f32::NEG_INFINITY } else { p_lse };
    let s_lse = if s_lse.is_infinite() { f32::NEG_INFINITY } else { s_lse };
    let max_lse = p_lse.max(s_lse);
    let p_lse = p_lse - max_lse;
    let s_lse = s_lse - max_lse;
    let p_se = p_lse.exp();
    let s_se = s_lse.exp();
    let out_se = p_se + s_se;
    let p_scale = p_se / out_se;
    let s_scale = s_se / out_se;

    if pack_idx * pack_size < head_size
        && let Some(o) = output.get_mut(i)
        && let (Some(p), Some(s)) = (prefix_output.get(global_idx as usize), suffix_output.get(global_idx as usize))
    {
        let p = widen8(vector::load16(p));
        let s = widen8(vector::load16(s));
        let mut out = X128::default();
        for k in 0..4 {
            let a = p[2 * k] * p_scale + s[2 * k] * s_scale;
            let b = p[2 * k + 1] * p_scale + s[2 * k + 1] * s_scale;
            let pair = Bf16x2::from_f32s(a, b);
            out.v[2 * k] = pair.lo();
            out.v[2 * k + 1] = pair.hi();
        }
        vector::store16(o, out);
    }
    if pack_idx == 0
        && let Some(slot) = output_lse.get(lse_idx)
    {
        slot.store(out_se.ln() + max_lse);
    }
}

/// vLLM `csrc/cache_kernels.cu`, `reshape_and_cache_flash_kernel<bf16, bf16, kAuto>`: block
/// `token` copies the token's keys and values (`num_heads * head_size` each) into slot
/// `slot_mapping[token]` of the paged caches `[num_blocks, block_size, num_heads,
/// head_size]`; a negative slot is a padding token. Launch: `num_tokens` blocks of
/// `min(num_heads * head_size, 512)`. Strides are in bf16 elements, as the source's.
///
/// Differs from the source: the caches are written at a slot read from memory, which no
/// partition expresses, so they are `AtomicSlice<u32>` and each thread moves a pair of bf16
/// (4 bytes, a relaxed store) per step where the source moves one bf16 (`head_size` is even).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn reshape_and_cache_flash_kernel(
    key: &[u32],
    value: &[u32],
    key_cache: AtomicSlice<u32>,
    value_cache: AtomicSlice<u32>,
    slot_mapping: &[i64],
    block_stride: u32,
    key_stride: u32,
    value_stride: u32,
    num_heads: u32,
    head_size: NonZeroU32,
    block_size: NonZeroU32,
) {
    let token_idx = block_idx_x() as u64;
    let Some(&slot_idx) = slot_mapping.get(token_idx as usize) else { return };
    if slot_idx < 0 {
        return;
    }
    let slot_idx = slot_idx as u64;
    let block_idx = slot_idx / block_size.get() as u64;
    let block_offset = slot_idx % block_size.get() as u64;
    let n = num_heads * head_size.get();
    let mut i = thread_idx_x() * 2;
    while i < n {
        let src_key_idx = token_idx * key_stride as u64 + i as u64;
        let src_value_idx = token_idx * value_stride as u64 + i as u64;
        let head_idx = i / head_size;
        let head_offset = i % head_size;
        let tgt = block_idx * block_stride as u64 + block_offset * n as u64 + (head_idx * head_size.get()) as u64 + head_offset as u64;
        if let (Some(&k), Some(&v)) = (key.get((src_key_idx / 2) as usize), value.get((src_value_idx / 2) as usize)) {
            if let Some(slot) = key_cache.get((tgt / 2) as usize) {
                slot.store(k);
            }
            if let Some(slot) = value_cache.get((tgt / 2) as usize) {
                slot.store(v);
            }
        }
        i += block_dim_x() * 2;
    }
}

/// `FP8_E4M3_MAX`: `std::numeric_limits<c10::Float8_e4m3fn>::max()`.
pub const FP8_E4M3_MAX: f32 = 448.0;

/// c10's `fp8e4m3fn_from_fp32_value` (PyTorch's `static_cast<c10::Float8_e4m3fn>(float)`),
/// round to nearest even, saturating to NaN (0x7f) above the range; written from its
/// description.
#[inline(always)]
pub fn fp8e4m3fn_from_f32(f: f32) -> u8 {
    let fp8_max: u32 = 1087 << 20;
    let denorm_mask: u32 = 141 << 23;
    let mut bits = f.to_bits();
    let sign = bits & 0x8000_0000;
    bits ^= sign;
    let result: u8 = if bits >= fp8_max {
        0x7f
    } else if bits < (121 << 23) {
        let b = (f32::from_bits(bits) + f32::from_bits(denorm_mask)).to_bits();
        b.wrapping_sub(denorm_mask) as u8
    } else {
        let mant_odd = (bits >> 20) & 1;
        let b = bits.wrapping_add((7u32.wrapping_sub(127) << 23).wrapping_add(0x7FFFF)).wrapping_add(mant_odd);
        (b >> 20) as u8
    };
    result | (sign >> 24) as u8
}

/// vLLM `csrc/quantization/fp8/common.cu`, `dynamic_per_token_scaled_fp8_quant_kernel<bf16,
/// c10::Float8_e4m3fn>` (vectorised path, `hidden_size % 16 == 0`): per token (block) the
/// absolute maximum (`cub::BlockReduce<float, 256>` max in thread 0), `scale[token] =
/// max(min(absmax, ub) / 448, 1 / (448 * 512))`, then `out = fp8(clamp(x / scale))`, 16 values
/// per step. `input` is the tokens as packs of 8; `hidden16` is `hidden_size / 16`;
/// `scale_ub` empty for none (the source's null pointer). Launch: `num_tokens` blocks of
/// `min(hidden_size, 256)`.
///
/// Differs from the source: only the vectorised path (the host checks `hidden_size % 16 ==
/// 0`; the scalar fallback writes single bytes, which no output of 16-byte packs can).
#[kernel(cols(out = hidden16))]
pub fn dynamic_per_token_scaled_fp8_quant_kernel(
    mut out: DisjointSlice<Fp8x16, BlockRows>,
    mut scale: PerBlock<f32>,
    input: &[X128],
    scale_ub: &[f32],
    hidden16: u32,
) {
    let tid = thread_idx_x() as usize;
    let step = block_dim_x() as usize;
    let token = block_idx_x() as usize;
    let h8 = 2 * hidden16 as usize;
    let Some(x) = input.get(token * h8..(token + 1) * h8) else { return };
    let (pairs, _) = x.as_chunks::<2>();

    let mut absmax_val = 0.0f32;
    let mut i = tid;
    while i < pairs.len() {
        let pair = &pairs[i];
        let lo = widen8(vector::load16(&pair[0]));
        let hi = widen8(vector::load16(&pair[1]));
        for k in 0..8 {
            absmax_val = absmax_val.max(lo[k].abs());
        }
        for k in 0..8 {
            absmax_val = absmax_val.max(hi[k].abs());
        }
        i += step;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let token_scale = shared_array![f32; 1];
    if let Some(block_absmax_val) = reduce.max(absmax_val) {
        let mut s = match scale_ub.first() {
            Some(&ub) => block_absmax_val.min(ub),
            None => block_absmax_val,
        };
        s = (s / FP8_E4M3_MAX).max(1.0 / (FP8_E4M3_MAX * 512.0));
        token_scale.set(0, s);
        if let Some(b) = once_per_block()
            && let Some(o) = scale.get_mut(b)
        {
            *o = s;
        }
    }
    sync_threads();
    let s = token_scale.get(0);

    let Some(row) = out.row_mut(block_row()) else { return };
    row.zip_input(pairs).for_each(|(pair, o)| {
        let lo = widen8(vector::load16(&pair[0]));
        let hi = widen8(vector::load16(&pair[1]));
        let mut q = Fp8x16::default();
        for k in 0..8 {
            let r = (-FP8_E4M3_MAX).max((lo[k] / s).min(FP8_E4M3_MAX));
            q.v[k] = fp8e4m3fn_from_f32(r);
        }
        for k in 0..8 {
            let r = (-FP8_E4M3_MAX).max((hi[k] / s).min(FP8_E4M3_MAX));
            q.v[8 + k] = fp8e4m3fn_from_f32(r);
        }
        vector::store16(o, q);
    });
}

/// [`dynamic_per_token_scaled_fp8_quant_kernel()`] after the fix round: the FP8 conversion is
/// the device library's `half::fp8::e4m3x2` (one `cvt.rn.satfinite.e4m3x2.f32` per pair on
/// sm_89+; the same bits as c10's conversion of the clamped value) instead of c10's bit
/// manipulation written by hand, which took 54 registers (nvcc's own compilation of it: 32)
/// and so half the occupancy (0.84x nvcc on the first try).
#[kernel(cols(out = hidden16))]
pub fn dynamic_per_token_scaled_fp8_quant_kernel_fixed(
    mut out: DisjointSlice<Fp8x16, BlockRows>,
    mut scale: PerBlock<f32>,
    input: &[X128],
    scale_ub: &[f32],
    hidden16: u32,
) {
    let tid = thread_idx_x() as usize;
    let step = block_dim_x() as usize;
    let token = block_idx_x() as usize;
    let h8 = 2 * hidden16 as usize;
    let Some(x) = input.get(token * h8..(token + 1) * h8) else { return };
    let (pairs, _) = x.as_chunks::<2>();

    let mut absmax_val = 0.0f32;
    let mut i = tid;
    while i < pairs.len() {
        let pair = &pairs[i];
        let lo = widen8(vector::load16(&pair[0]));
        let hi = widen8(vector::load16(&pair[1]));
        for k in 0..8 {
            absmax_val = absmax_val.max(lo[k].abs());
        }
        for k in 0..8 {
            absmax_val = absmax_val.max(hi[k].abs());
        }
        i += step;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let token_scale = shared_array![f32; 1];
    if let Some(block_absmax_val) = reduce.max(absmax_val) {
        let mut s = match scale_ub.first() {
            Some(&ub) => block_absmax_val.min(ub),
            None => block_absmax_val,
        };
        s = (s / FP8_E4M3_MAX).max(1.0 / (FP8_E4M3_MAX * 512.0));
        token_scale.set(0, s);
        if let Some(b) = once_per_block()
            && let Some(o) = scale.get_mut(b)
        {
            *o = s;
        }
    }
    sync_threads();
    let s = token_scale.get(0);

    let Some(row) = out.row_mut(block_row()) else { return };
    row.zip_input(pairs).for_each(|(pair, o)| {
        let lo = widen8(vector::load16(&pair[0]));
        let hi = widen8(vector::load16(&pair[1]));
        let mut q = Fp8x16::default();
        let clamp = |x: f32| (-FP8_E4M3_MAX).max((x / s).min(FP8_E4M3_MAX));
        for k in 0..4 {
            [q.v[2 * k], q.v[2 * k + 1]] = fp8::e4m3x2(clamp(lo[2 * k]), clamp(lo[2 * k + 1]));
            [q.v[8 + 2 * k], q.v[8 + 2 * k + 1]] = fp8::e4m3x2(clamp(hi[2 * k]), clamp(hi[2 * k + 1]));
        }
        vector::store16(o, q);
    });
}
