//! Issue 30's twelfth held-out port (bench/ports12): what the tests and the GPU bench share:
//! the inputs, the launch shapes each source's host code uses, and the references the ports
//! are checked against.
//!
//! Kernels (`ferrocuda-ports12-kernels`): llm.c's `attention_value_kernel1` (L1),
//! `softmax_forward_kernel7` (L2), `mean_kernel` (L3), `matmul_backward_bias_kernel2` (L4),
//! `softmax_forward_online_kernel2` (L5); vLLM's `act_and_mul_quant_kernel` (silu, bf16 -> FP8,
//! V1), `quantize_q8_1` (bf16, V2) and `dequantize_block<q4_0>` (V3).

use ferrocuda::LaunchConfig;
use half::{bf16, f16};

pub use ferrocuda_ports12_kernels as kernels;
pub use kernels::vllm::BlockQ4_0;

/// `n` pseudo-random values in `[lo, hi)` (a 64-bit LCG; the same every run).
pub fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            lo + (hi - lo) * u
        })
        .collect()
}

/// [`values`] rounded to bf16.
pub fn values_bf16(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<bf16> {
    values(n, seed, lo, hi).into_iter().map(bf16::from_f32).collect()
}

/// The largest relative error of `got` against `want`, with `floor` under `|want|`.
pub fn max_rel_err(got: &[f32], want: &[f32], floor: f32) -> f32 {
    got.iter().zip(want).map(|(&g, &w)| (g - w).abs() / w.abs().max(floor)).fold(0.0, f32::max)
}

// ---------------------------------------------------------------- L1 attention_value_kernel1

/// The attention output `out[b, t, h hs + i] = sum_{t2 <= t} att[b, h, t, t2] v[b, t2, h, i]`
/// (`f64` sums), and beside it each sum's `sum |att v|`, the scale of its rounding errors (the
/// values have both signs, so a sum near 0 is not known to a small relative error).
pub fn attention_value_ref(att: &[f32], inp: &[f32], b: usize, t: usize, c: usize, nh: usize) -> (Vec<f32>, Vec<f32>) {
    let hs = c / nh;
    let mut out = vec![0.0f32; b * t * c];
    let mut scale = vec![0.0f32; b * t * c];
    for bb in 0..b {
        for tt in 0..t {
            for h in 0..nh {
                for i in 0..hs {
                    let (mut s, mut m) = (0.0f64, 0.0f64);
                    for t2 in 0..=tt {
                        let a = att[bb * nh * t * t + h * t * t + tt * t + t2] as f64;
                        let v = inp[bb * t * 3 * c + t2 * 3 * c + 2 * c + h * hs + i] as f64;
                        s += a * v;
                        m += (a * v).abs();
                    }
                    out[bb * t * c + tt * c + h * hs + i] = s as f32;
                    scale[bb * t * c + tt * c + h * hs + i] = m as f32;
                }
            }
        }
    }
    (out, scale)
}

/// The largest `|got - want| / scale` (the error against each sum's scale, see
/// [`attention_value_ref`]).
pub fn max_scaled_err(got: &[f32], want: &[f32], scale: &[f32]) -> f32 {
    got.iter().zip(want).zip(scale).map(|((&g, &w), &m)| (g - w).abs() / m.max(f32::MIN_POSITIVE)).fold(0.0, f32::max)
}

/// llm.c's launch of `attention_value_kernel1`: one thread per `(b, t, h)`.
pub fn attention_value_config(b: usize, t: usize, nh: usize, block: u32) -> LaunchConfig {
    LaunchConfig::for_elements(b * t * nh, block)
}

// ---------------------------------------------------------------- L2, L5 softmax

/// Row softmax in `f64`.
pub fn softmax_ref(inp: &[f32], n: usize, c: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n * c];
    for r in 0..n {
        let x = &inp[r * c..(r + 1) * c];
        let m = x.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)) as f64;
        let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
        for (o, &v) in out[r * c..(r + 1) * c].iter_mut().zip(x) {
            *o = ((v as f64 - m).exp() / s) as f32;
        }
    }
    out
}

/// llm.c's launch of `softmax_forward_kernel7`: a block per row, `2 block / 32` floats of
/// dynamic shared memory (the twin's; the port's reductions use static shared memory).
pub fn softmax7_config(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig::new(n as u32, block).with_shared_bytes(2 * block / 32 * 4)
}

/// llm.c's launch of `softmax_forward_online_kernel2`: a warp per row.
pub fn softmax_online2_config(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig::new((n as u32 * 32).div_ceil(block), block)
}

// ---------------------------------------------------------------- L3 mean_kernel

/// Row means in `f64`.
pub fn mean_ref(inp: &[f32], n: usize, c: usize) -> Vec<f32> {
    (0..n).map(|r| (inp[r * c..(r + 1) * c].iter().map(|&v| v as f64).sum::<f64>() / c as f64) as f32).collect()
}

/// llm.c's launch of `mean_kernel`: a block of `block` threads per row, `block` floats of
/// dynamic shared memory.
pub fn mean_config(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig::new(n as u32, block).with_shared_bytes(block * 4)
}

// ---------------------------------------------------------------- L4 matmul_backward_bias_kernel2

/// `dbias[o] + sum_i dout[i, o]` (`f64` sum), rounded to bf16 once.
pub fn bias_ref(dbias: &[bf16], dout: &[bf16], bt: usize, oc: usize) -> Vec<bf16> {
    (0..oc)
        .map(|o| {
            let s: f64 = (0..bt).map(|i| dout[i * oc + o].to_f64()).sum();
            bf16::from_f64(dbias[o].to_f64() + s)
        })
        .collect()
}

/// llm.c's launch of `matmul_backward_bias_kernel2`: a warp per output channel.
pub fn bias2_config(oc: usize, block: u32) -> LaunchConfig {
    LaunchConfig::new((oc as u32 * 32).div_ceil(block), block)
}

// ---------------------------------------------------------------- V1 act_and_mul_quant_kernel

/// The shape vLLM's `silu_and_mul_quant` launches: grid `(tokens, blocks_per_token)` with
/// `blocks_per_token` 4, 2 or 1 for up to 16, 32 or more tokens; block `min(d, 512)`. Returns
/// the config and the port's `(dv, tile)` in 8-byte words.
pub fn act_quant_shape(tokens: usize, d: usize) -> (LaunchConfig, u32, u32) {
    assert!(d.is_multiple_of(8), "the port takes d % 8 == 0 (vLLM's scalar tail is not ported)");
    let bpt = if tokens > 16 { if tokens > 32 { 1 } else { 2 } } else { 4 };
    let tgt = d.div_ceil(bpt);
    let elems_per_block = tgt.div_ceil(8) * 8;
    (LaunchConfig::new((tokens as u32, bpt as u32), d.min(512) as u32), (d / 8) as u32, (elems_per_block / 8) as u32)
}

/// The value of an FP8 E4M3 byte.
pub fn e4m3_value(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = ((b >> 3) & 0xF, b & 7);
    if e == 0xF && m == 7 {
        return f32::NAN;
    }
    if e == 0 { sign * m as f32 / 8.0 * 2f32.powi(-6) } else { sign * (1.0 + m as f32 / 8.0) * 2f32.powi(e as i32 - 7) }
}

/// vLLM's result in `f32` before the FP8 rounding: `clamp(bf16(bf16(silu(x)) * y) / scale)`.
pub fn act_quant_prefp8(input: &[bf16], scale: f32, tokens: usize, d: usize) -> Vec<f32> {
    let inv = 1.0 / scale;
    let mut out = Vec::with_capacity(tokens * d);
    for t in 0..tokens {
        for i in 0..d {
            let x = input[t * 2 * d + i].to_f32();
            let y = input[t * 2 * d + d + i];
            let act = bf16::from_f32(x / (1.0 + (-x).exp()));
            let prod = bf16::from_f32(act.to_f32() * y.to_f32());
            out.push((prod.to_f32() * inv).clamp(-448.0, 448.0));
        }
    }
    out
}

/// Compares FP8 bytes with the pre-rounding values: each byte must be one of the two E4M3
/// values around its input (the nearest, or its neighbour where the `exp` of the device
/// differs from the host's in the last bit). Returns the count of bytes off by more, and the
/// count not the nearest.
pub fn check_fp8(got: &[u8], pre: &[f32]) -> (usize, usize) {
    let (mut bad, mut not_nearest) = (0, 0);
    for (&g, &p) in got.iter().zip(pre) {
        let v = e4m3_value(g);
        let err = (v - p).abs();
        // One E4M3 step at |p|: 2^(e - 3), subnormal step 2^-9.
        let step = if p.abs() < 2f32.powi(-6) { 2f32.powi(-9) } else { 2f32.powi(p.abs().log2().floor() as i32 - 3) };
        if err > step * 1.01 {
            bad += 1;
        }
        if err > step * 0.5 * 1.0001 {
            not_nearest += 1;
        }
    }
    (bad, not_nearest)
}

// ---------------------------------------------------------------- V2 quantize_q8_1

/// `round_up(kx, 512)`, vLLM's `kx_padded`.
pub fn q8_1_padded(kx: usize) -> usize {
    kx.div_ceil(512) * 512
}

/// The `block_q8_1`s (36 bytes each, as 9 little-endian words) of `ky` rows of `kx` values.
pub fn quantize_q8_1_ref(x: &[bf16], kx: usize, ky: usize) -> Vec<u32> {
    let kp = q8_1_padded(kx);
    let mut out = vec![0u32; ky * kp / 32 * 9];
    for iy in 0..ky {
        for blk in 0..kp / 32 {
            let vals: Vec<f32> = (0..32).map(|j| blk * 32 + j).map(|ix| if ix < kx { x[iy * kx + ix].to_f32() } else { 0.0 }).collect();
            // The warp's xor butterfly, as the kernel sums (amax is exact in any order).
            let amax = vals.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let mut sums = vals.clone();
            let mut mask = 16;
            while mask > 0 {
                sums = (0..32).map(|l| sums[l] + sums[l ^ mask]).collect();
                mask /= 2;
            }
            let d = amax / 127.0;
            let ib = iy * kp / 32 + blk;
            let mut bytes = [0u8; 36];
            let (dh, sh) = (f16::from_f32(d).to_bits(), f16::from_f32(sums[0]).to_bits());
            bytes[0..2].copy_from_slice(&dh.to_le_bytes());
            bytes[2..4].copy_from_slice(&sh.to_le_bytes());
            for (j, &v) in vals.iter().enumerate() {
                let q: i8 = if amax == 0.0 { 0 } else { (v / d).round() as i8 };
                bytes[4 + j] = q as u8;
            }
            for w in 0..9 {
                out[ib * 9 + w] = u32::from_le_bytes(bytes[4 * w..4 * w + 4].try_into().unwrap());
            }
        }
    }
    out
}

/// The port's launch: 1-D over the source's `ky kx_padded` threads, blocks of 256.
pub fn q8_1_config(kx: usize, ky: usize) -> LaunchConfig {
    LaunchConfig::new((ky * q8_1_padded(kx) / 256) as u32, 256)
}

/// vLLM's launch: grid `(kx_padded / 256, ky)`, blocks of 256.
pub fn q8_1_twin_config(kx: usize, ky: usize) -> LaunchConfig {
    LaunchConfig::new(((q8_1_padded(kx) / 256) as u32, ky as u32), 256)
}

// ---------------------------------------------------------------- V3 dequantize_block q4_0

/// `nblocks` q4_0 blocks with scales in `[-0.05, 0.05)` and random quants.
pub fn q4_0_blocks(nblocks: usize, seed: u64) -> Vec<BlockQ4_0> {
    let d = values(nblocks, seed, -0.05, 0.05);
    let q = values(nblocks * 16, seed + 1, 0.0, 256.0);
    (0..nblocks).map(|b| BlockQ4_0 { d: f16::from_f32(d[b]), qs: core::array::from_fn(|j| q[b * 16 + j] as u8) }).collect()
}

/// `y[32 ib + j] = (lo(qs[j]) - 8) d`, `y[32 ib + j + 16] = (hi(qs[j]) - 8) d`, each rounded to
/// f16 once (exact in `f32` before it).
pub fn dequant_q4_0_ref(blocks: &[BlockQ4_0]) -> Vec<f16> {
    let mut y = vec![f16::ZERO; blocks.len() * 32];
    for (ib, b) in blocks.iter().enumerate() {
        for j in 0..16 {
            let q = b.qs[j];
            y[32 * ib + j] = f16::from_f32(((q & 0xF) as f32 - 8.0) * b.d.to_f32());
            y[32 * ib + j + 16] = f16::from_f32(((q >> 4) as f32 - 8.0) * b.d.to_f32());
        }
    }
    y
}

/// The port's launch: a block of 256 threads per 512 outputs (`k % 512 == 0`).
pub fn dequant_config(k: usize) -> LaunchConfig {
    assert!(k.is_multiple_of(512), "the port takes k % 512 == 0 (RotaryPairs has no partial row)");
    LaunchConfig::new((k / 512) as u32, 256)
}

/// vLLM's launch (`dequantize_block_cuda`): `ceil(k / 512)` blocks of 256 (`k / 2` threads).
pub fn dequant_twin_config(k: usize) -> LaunchConfig {
    LaunchConfig::new(k.div_ceil(2 * 256) as u32, 256)
}

/// bf16 values as the 16-byte packs the V1 port reads (`len % 8 == 0`).
pub fn packs(values: &[bf16]) -> Vec<ferrocuda::pack16::Bf16x8> {
    ferrocuda::pack16::Bf16x8::collect(values).expect("a multiple of 8 values")
}
