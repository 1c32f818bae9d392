//! The vLLM ports (vllm-project/vllm, csrc/quantization). vLLM builds without fast math, so
//! these use the precise functions (`exp` is nvcc's own `expf` sequence, `/` is `div.rn`).

use core::num::NonZeroU32;

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::PerWarpRow;
use ferrocuda_device::global::{RotaryPairs, RowTiles, block_row, row_tile, warp_row};
use ferrocuda_device::half::fp8;
use ferrocuda_device::half::{F16x2, f16};
use ferrocuda_device::pack16::Bf16x8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::thread::block_dim_x;
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::warp;

/// vLLM's `silu_kernel<__nv_bfloat16>`: `x / (1 + expf(-x))` in `f32`, rounded to bf16.
#[inline(always)]
fn silu_bf16(x: bf16) -> bf16 {
    let xf = x.widen();
    (xf / (1.0 + (-xf).exp())).to_bf16()
}

/// `FP8_E4M3_MAX`: the largest finite E4M3 value.
const FP8_E4M3_MAX: f32 = 448.0;

/// vLLM `act_and_mul_quant_kernel<__nv_bfloat16, silu_kernel>` (silu_and_mul_quant): token
/// `blockIdx.x`, tile `blockIdx.y` of `elems_per_block` columns; for each 16-byte pair of
/// inputs `x` (first half of the token's row) and `y` (second half), eight
/// `fp8(clamp(bf16(silu(x) * y) / scale))` stored as one 8-byte word.
///
/// The grid is `(tokens, blocks_per_token)` with a run-time tile: `RowTiles`
/// (docs/kernel-model.md). Elements are 8-byte words of eight FP8 values (`u64`); `dv = d / 8`
/// words a row and `tile = elems_per_block / 8` words a tile. The source's scalar loop for
/// `d % 8 != 0` is not ported: this port takes `d % 8 == 0` (the host wrapper says so).
#[kernel(cols(out = (dv, tile)))]
pub fn act_and_mul_quant_kernel(mut out: DisjointSlice<u64, RowTiles>, input: &[Bf16x8], scale: &[f32], dv: u32, tile: u32) {
    let me = row_tile();
    let Some(out_tile) = out.tile_mut(me) else { return };
    let (row, dvs) = (me.row() as usize, dv as usize);
    let span = out_tile.span();
    let first = span.start - row * dvs;
    let count = span.len();
    let base = row * 2 * dvs + first;
    let (Some(xs), Some(ys)) = (input.get(base..base + count), input.get(base + dvs..base + dvs + count)) else { return };
    let Some(&s) = scale.first() else { return };
    let inverted_scale = 1.0 / s;
    out_tile.zip_inputs([xs, ys]).for_each(|([x, y], o)| {
        let (x, y) = (Bf16x8::load(x), Bf16x8::load(y));
        let mut bytes = [0u8; 8];
        unroll::<4>(|p| {
            // `fmax(-MAX, fmin(x, MAX))`: a NaN becomes MAX, where `clamp` would keep it.
            #[allow(clippy::manual_clamp)]
            let v = |i: usize| {
                let val = silu_bf16(x.get(i)).mul_rn(y.get(i)).widen() * inverted_scale;
                val.min(FP8_E4M3_MAX).max(-FP8_E4M3_MAX)
            };
            let [lo, hi] = fp8::e4m3x2(v(2 * p), v(2 * p + 1));
            bytes[2 * p] = lo;
            bytes[2 * p + 1] = hi;
        });
        *o = u64::from_le_bytes(bytes);
    });
}

/// vLLM `quantize_q8_1<__nv_bfloat16>` (csrc/quantization/gguf/gguf_kernel.cu): each 32
/// values of a row padded to `kx_padded` become a `block_q8_1`: `half2 ds` (`d = amax / 127`,
/// the sum) then 32 `int8` quants `round(x / d)`; one warp per block, `amax` and the sum by
/// xor shuffles of width 32.
///
/// Output: `y` as `u32` words, a 36-byte block a warp (`PerWarpRow<u32>`, `cols = 9`): lane 0
/// writes word 0 (`ds`), lane `l` in `1..9` word `l` (quants `4(l-1) .. 4l`, gathered by
/// shuffles), where the source's lanes store a byte each and lane 0 the two halves. Launched
/// 1-D over the source's threads (`ky kx_padded`; the source's grid is `(kx_padded / 256,
/// ky)`, whose thread `(ix, iy)` is this launch's `iy kx_padded + ix`).
#[kernel(cols(y = 9))]
pub fn quantize_q8_1(x: &[bf16], mut y: PerWarpRow<u32>, kx: u32, kx_padded: NonZeroU32) {
    let me = warp_row();
    let lane = me.lane();
    let g = me.row() * 32 + lane;
    let (iy, ix) = (g / kx_padded, g % kx_padded);
    let xi = if ix < kx { x.get(iy as usize * kx as usize + ix as usize).map_or(0.0, |v| v.widen()) } else { 0.0 };
    let mut amax = xi.abs();
    let mut sum = xi;
    let mut mask = 16;
    while mask > 0 {
        amax = amax.max(warp::shuffle_xor_within::<32, f32>(amax, mask));
        sum += warp::shuffle_xor_within::<32, f32>(sum, mask);
        mask /= 2;
    }
    let d = amax / 127.0;
    let q: i8 = if amax == 0.0 { 0 } else { (xi / d).round().to_i8_rn_sat() };
    // Four lanes' quants into one word (lane 4k holds word k), then word k to lane k + 1.
    let qb = q as u8 as u32;
    let packed = qb | (warp::shuffle_down(qb, 1) << 8) | (warp::shuffle_down(qb, 2) << 16) | (warp::shuffle_down(qb, 3) << 24);
    let word = warp::shuffle(packed, (lane.wrapping_sub(1) * 4) & 31);
    let ds = (d.to_f16().to_bits() as u32) | ((sum.to_f16().to_bits() as u32) << 16);
    if let Some(mut row) = y.row_mut(me)
        && let Some(o) = row.get_mut(0)
    {
        *o = if lane == 0 { ds } else { word };
    }
}

/// GGUF's `block_q4_0` (vLLM csrc/quantization/gguf/ggml-common.h): a half scale and 16
/// bytes of two 4-bit quants each; 18 bytes, 2-byte aligned, as the C struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct BlockQ4_0 {
    /// The block's scale (delta).
    pub d: f16,
    /// Byte `j`: quant `j` in the low nibble, quant `j + 16` in the high one.
    pub qs: [u8; 16],
}

/// vLLM `dequantize_block<QK4_0, QR4_0, dequantize_q4_0, half>` (gguf/dequantize.cuh): thread
/// `g` dequantizes byte `iqs = g % 16` of block `ib = g / 16` into `y[32 ib + iqs]` (low
/// nibble) and `y[32 ib + iqs + 16]` (high), `(q - 8) d` in half precision.
///
/// The pair `(k, k + 16)` of each 32 outputs is `RotaryPairs<32, 16>`'s map; with a row of 512
/// (`cols = 512`) a block of 256 threads owns one row, its thread `t` the pair `t % 16` of
/// head `t / 16`: the source's map at its 256-thread blocks. `k` must be a multiple of 512
/// (a partial last row is not written: the host wrapper refuses it).
#[kernel(cols(y = 512))]
pub fn dequantize_block_q4_0(vx: &[BlockQ4_0], mut y: DisjointSlice<f16, RotaryPairs<32, 16>>) {
    let me = block_row();
    let r = me.row() as usize;
    let Some(pairs) = y.pairs_mut(me) else { return };
    let eight = f16::from_f32_rn(8.0);
    for (head, k, lo, hi) in pairs {
        let Some(block) = vx.get(r * 16 + head as usize) else { return };
        let d = block.d;
        let Some(&vui) = block.qs.get(k as usize) else { return };
        *lo = f16::from_f32_rn((vui & 0xF) as f32).sub_rn(eight).mul_rn(d);
        *hi = f16::from_f32_rn((vui >> 4) as f32).sub_rn(eight).mul_rn(d);
    }
}

/// **Fix round** of [`quantize_q8_1()`] (`_fix`): the first try (0.77x nvcc on an H200) split
/// each thread's global index by the run-time row length (`g / kx_padded`, `g % kx_padded`:
/// a 32-bit division in every thread) and built `ds` (two f16 conversions) in every lane.
/// The source's 2-D grid gives the row as `blockIdx.y`; this 1-D launch's rows are whole runs of
/// blocks (`kx_padded` a multiple of the block), so the row and column come from the block
/// index, a division of uniform values once a block (`blocks_per_row = kx_padded /
/// blockDim.x` from the host); `ds` is built in lane 0 only, as the source's `if (iqs > 0)
/// return`. The quants' packing is the first try's.
#[kernel(cols(y = 9))]
pub fn quantize_q8_1_fix(x: &[bf16], mut y: PerWarpRow<u32>, kx: u32, blocks_per_row: NonZeroU32) {
    let me = warp_row();
    let lane = me.lane();
    let b = block_idx_x();
    let (iy, bx) = (b / blocks_per_row, b % blocks_per_row);
    let ix = bx * block_dim_x() + thread_idx_x();
    let xi = if ix < kx { x.get(iy as usize * kx as usize + ix as usize).map_or(0.0, |v| v.widen()) } else { 0.0 };
    let mut amax = xi.abs();
    let mut sum = xi;
    let mut mask = 16;
    while mask > 0 {
        amax = amax.max(warp::shuffle_xor_within::<32, f32>(amax, mask));
        sum += warp::shuffle_xor_within::<32, f32>(sum, mask);
        mask /= 2;
    }
    let d = amax / 127.0;
    let q: i8 = if amax == 0.0 { 0 } else { (xi / d).round().to_i8_rn_sat() };
    let qb = q as u8 as u32;
    let packed = qb | (warp::shuffle_down(qb, 1) << 8) | (warp::shuffle_down(qb, 2) << 16) | (warp::shuffle_down(qb, 3) << 24);
    let word = warp::shuffle(packed, (lane.wrapping_sub(1) * 4) & 31);
    if let Some(mut row) = y.row_mut(me)
        && let Some(o) = row.get_mut(0)
    {
        *o = if lane == 0 { (d.to_f16().to_bits() as u32) | ((sum.to_f16().to_bits() as u32) << 16) } else { word };
    }
}

/// **Fix round** of [`dequantize_block_q4_0()`] (`_fix`): the first try (0.88x nvcc) converted
/// each nibble int -> f32 -> f16 and subtracted and multiplied in two scalar f16 operations
/// each, and kept `RotaryPairs`' unit loop (the block size unknown). Here the pair is one
/// `F16x2` as the source's `half2`: both nibbles converted by one `cvt.rn.f16x2.f32`, then one
/// add of `-8` (`F16x2` has no `-`; `v + (-8)` is `v - 8` exactly) and one multiply by `d`;
/// and `reqntid(256)`, the source's compile-time `CUDA_DEQUANTIZE_BLOCK_SIZE`, so the unit
/// loop is one step.
#[kernel(cols(y = 512), reqntid(256))]
pub fn dequantize_block_q4_0_fix(vx: &[BlockQ4_0], mut y: DisjointSlice<f16, RotaryPairs<32, 16>>) {
    let me = block_row();
    let r = me.row() as usize;
    let Some(pairs) = y.pairs_mut(me) else { return };
    let minus_eight = F16x2::splat(f16::from_f32_rn(-8.0));
    for (head, k, lo, hi) in pairs {
        let Some(block) = vx.get(r * 16 + head as usize) else { return };
        let d = block.d;
        let Some(&vui) = block.qs.get(k as usize) else { return };
        let v = (F16x2::from_f32s((vui & 0xF) as f32, (vui >> 4) as f32) + minus_eight) * F16x2::splat(d);
        *lo = v.lo();
        *hi = v.hi();
    }
}
