//! CPU references for issue 30's sixth held-out port (bench/ports6): each written from the
//! public source's CPU reference or its kernel's arithmetic, independently of the ports (the
//! FP8 rounding is c10's algorithm, written here, not the device library's). The tests
//! (`tests/ports6.rs`) run every port on the CPU executor against these; the GPU bench
//! (`src/bin/ports6_bench.rs`) checks each port against its nvcc-built twin.

use half::bf16;

/// Deterministic pseudo-random values in `[-1, 1)` (xorshift), for test and bench inputs.
pub fn random_f32(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// [`random_f32`] scaled by `scale` and rounded to `bf16`.
pub fn random_bf16(len: usize, seed: u64, scale: f32) -> Vec<bf16> {
    random_f32(len, seed).into_iter().map(|x| bf16::from_f32(x * scale)).collect()
}

/// llm.c's `rope_forward_cpu` (dev/cuda/rope.cu): `inp` `(B, T, n_head, head_dim)`, `freqs_cis`
/// `(T, head_dim / 2)` pairs of cos, sin.
pub fn rope_forward(inp: &[f32], freqs_cis: &[f32], b: usize, t: usize, n_head: usize, head_dim: usize) -> Vec<f32> {
    let mut out = vec![0.0; inp.len()];
    for bi in 0..b {
        for ti in 0..t {
            for h in 0..n_head {
                for d in 0..head_dim / 2 {
                    let i = ((bi * t + ti) * n_head + h) * head_dim + 2 * d;
                    let (xr, xi) = (inp[i], inp[i + 1]);
                    let (c, s) = (freqs_cis[ti * head_dim + 2 * d], freqs_cis[ti * head_dim + 2 * d + 1]);
                    out[i] = xr * c - xi * s;
                    out[i + 1] = xr * s + xi * c;
                }
            }
        }
    }
    out
}

/// The gradient of llm.c's `repkv_forward_cpu`: `dout` `(B, N, 3, NH, HD)` to `dinp` `(B, N,
/// NH + 2 NH / rep, HD)`, queries copied, each K/V head the sum of its `rep` replicas.
pub fn repkv_backward(dout: &[f32], b: usize, n: usize, nh: usize, rep: usize, hd: usize) -> Vec<f32> {
    let kv = nh / rep;
    let total = nh + 2 * kv;
    let mut dinp = vec![0.0; b * n * total * hd];
    for bi in 0..b {
        for ni in 0..n {
            let src = &dout[(bi * n + ni) * 3 * nh * hd..][..3 * nh * hd];
            let dst = &mut dinp[(bi * n + ni) * total * hd..][..total * hd];
            dst[..nh * hd].copy_from_slice(&src[..nh * hd]);
            for part in 1..3 {
                for g in 0..kv {
                    for d in 0..hd {
                        let sum: f32 = (0..rep).map(|r| src[(part * nh + g * rep + r) * hd + d]).sum();
                        dst[(nh + (part - 1) * kv + g) * hd + d] = sum;
                    }
                }
            }
        }
    }
    dinp
}

/// llm.c's `matmul_forward_cpu`: `out (BT, OC) = inp (BT, C) · weight (OC, C)ᵀ + bias`, in
/// `f32` in the source's order (`val = bias; val += inp * w` for `i` in order), as llm.c's
/// CPU reference computes it.
pub fn matmul_forward(inp: &[f32], weight: &[f32], bias: Option<&[f32]>, bt: usize, c: usize, oc: usize) -> Vec<f32> {
    let mut out = vec![0.0; bt * oc];
    for r in 0..bt {
        for o in 0..oc {
            let mut val = bias.map_or(0.0, |b| b[o]);
            for i in 0..c {
                val += inp[r * c + i] * weight[o * c + i];
            }
            out[r * oc + o] = val;
        }
    }
    out
}

/// Softmax over each row of `C` (llm.c's `softmax_forward_cpu`), in `f64`.
pub fn softmax_forward(inp: &[f32], n: usize, c: usize) -> Vec<f32> {
    let mut out = vec![0.0; n * c];
    for r in 0..n {
        let x = &inp[r * c..][..c];
        let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = x.iter().map(|&v| (v as f64 - max).exp()).sum();
        for (o, &v) in out[r * c..][..c].iter_mut().zip(x) {
            *o = ((v as f64 - max).exp() / sum) as f32;
        }
    }
    out
}

/// llm.c's attention pre-softmax scores: `preatt (B, NH, T, T)` from `inp (B, T, 3C)`, `q · k /
/// sqrt(hs)` on and below the diagonal, `-inf` above.
pub fn attention_query_key(inp: &[f32], b: usize, t: usize, c: usize, nh: usize) -> Vec<f32> {
    let hs = c / nh;
    let scale = 1.0 / (hs as f64).sqrt();
    let mut out = vec![0.0; b * nh * t * t];
    for bi in 0..b {
        for h in 0..nh {
            for ti in 0..t {
                for t2 in 0..t {
                    let o = ((bi * nh + h) * t + ti) * t + t2;
                    if t2 > ti {
                        out[o] = f32::NEG_INFINITY;
                        continue;
                    }
                    let q = &inp[(bi * t + ti) * 3 * c + h * hs..][..hs];
                    let k = &inp[(bi * t + t2) * 3 * c + h * hs + c..][..hs];
                    let dot: f64 = q.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum();
                    out[o] = (dot * scale) as f32;
                }
            }
        }
    }
    out
}

/// vLLM's `gelu_new_kernel<c10::BFloat16>`: every `bf16` operation an `f32` operation rounded to
/// `bf16` (c10's arithmetic), `tanhf` the host's.
pub fn gelu_new(x: bf16) -> bf16 {
    let r = bf16::from_f32;
    let f = |v: bf16| v.to_f32();
    let x3 = f(r(f(r(f(x) * f(x))) * f(x)));
    let inner = r(f(x) + f(r(0.044715f32 * x3)));
    let t = r(f(r(0.797_884_6_f32 * f(inner))).tanh());
    r(f(r(0.5 * f(x))) * f(r(1.0 + f(t))))
}

/// vLLM's `dynamic_scaled_int8_azp_quant_kernel` per row of `hidden`: `(out, scale, azp)`.
pub fn int8_azp_quant(input: &[bf16], hidden: usize) -> (Vec<i8>, Vec<f32>, Vec<i32>) {
    let rows = input.len() / hidden;
    let (mut out, mut scales, mut azps) = (vec![0i8; input.len()], vec![0.0; rows], vec![0; rows]);
    for r in 0..rows {
        let x = &input[r * hidden..][..hidden];
        let max = x.iter().fold(f32::MIN_POSITIVE, |m, v| m.max(v.to_f32()));
        let min = x.iter().fold(f32::MAX, |m, v| m.min(v.to_f32()));
        let scale = (max - min) / 255.0;
        let azp = (-128.0 - min / scale).round_ties_even() as i32;
        scales[r] = scale;
        azps[r] = azp;
        for (o, v) in out[r * hidden..][..hidden].iter_mut().zip(x) {
            let q = ((v.to_f32() / scale).round_ties_even() as i32).saturating_add(azp);
            *o = q.clamp(-128, 127) as i8;
        }
    }
    (out, scales, azps)
}

/// c10's `fp8e4m3fn_from_fp32_value` (c10/util/Float8_e4m3fn.h), written out: the FP8 E4M3
/// bits of `f` (NaN, `0x7f`, from 480 up: c10 does not saturate).
pub fn c10_fp8e4m3fn(f: f32) -> u8 {
    const FP8_MAX: u32 = 1087 << 20;
    const DENORM_MASK: u32 = 141 << 23;
    let mut bits = f.to_bits();
    let sign = bits & 0x8000_0000;
    bits ^= sign;
    let result = if bits >= FP8_MAX {
        0x7f
    } else if bits < (121 << 23) {
        let sum = (f32::from_bits(bits) + f32::from_bits(DENORM_MASK)).to_bits();
        sum.wrapping_sub(DENORM_MASK) as u8
    } else {
        let mant_odd = (bits >> 20) & 1;
        let b = bits.wrapping_add((7u32.wrapping_sub(127) << 23).wrapping_add(0x7ffff)).wrapping_add(mant_odd);
        (b >> 20) as u8
    };
    result | (sign >> 24) as u8
}

/// vLLM's `per_token_group_quant_8bit_kernel` (FP8 E4M3, row-major scales): `(q, scales)` for
/// groups of `group` elements.
pub fn per_token_group_quant_fp8(input: &[bf16], group: usize, eps: f32, min: f32, max: f32) -> (Vec<u8>, Vec<f32>) {
    let groups = input.len() / group;
    let (mut q, mut scales) = (vec![0u8; input.len()], vec![0.0; groups]);
    for g in 0..groups {
        let x = &input[g * group..][..group];
        let absmax = x.iter().fold(eps, |m, v| m.max(v.to_f32().abs()));
        let y_s = absmax / max;
        scales[g] = y_s;
        for (o, v) in q[g * group..][..group].iter_mut().zip(x) {
            *o = c10_fp8e4m3fn((v.to_f32() / y_s).max(min).min(max));
        }
    }
    (q, scales)
}

/// The largest `|a - b| / (|b| + floor)` over two slices (infinities must match exactly).
pub fn max_rel_err(a: &[f32], b: &[f32], floor: f32) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(&x, &y)| if x.is_infinite() || y.is_infinite() { if x == y { 0.0 } else { f32::INFINITY } } else { (x - y).abs() / (y.abs() + floor) })
        .fold(0.0, f32::max)
}
