//! Issue 30's ninth held-out port: the CPU references of the eight ported kernels, the
//! inputs the tests and the bench share, and the error measure both use. The kernels are in
//! `llmc/` and `vllm/`, the twins' launch stubs in `twins/`, the twins in `cuda/ports9.cu`;
//! `tests/ports9.rs` runs each port on the CPU executor (and the GPU) against these
//! references, `src/bin/ports9_bench.rs` times each beside its twin.

use ferrocuda::half::bf16;

/// A deterministic pseudo-random value in `[-1, 1)` for index `i` and stream `seed`.
pub fn noise(seed: u32, i: usize) -> f32 {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((seed as u64) << 32 | 0x5bd1_e995);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    ((x >> 40) as f32 / (1u64 << 23) as f32) - 1.0
}

/// `n` bf16 values of [`noise`] scaled by `scale`.
pub fn bf16_noise(seed: u32, n: usize, scale: f32) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32(noise(seed, i) * scale)).collect()
}

/// `n` f32 values of [`noise`] scaled by `scale`.
pub fn f32_noise(seed: u32, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| noise(seed, i) * scale).collect()
}

/// bf16 values as f32.
pub fn widen(v: &[bf16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// The largest `|a - b| / max(|b|, floor)` over the two slices (`b` the reference).
pub fn rel_err(a: &[f32], b: &[f32], floor: f32) -> f32 {
    assert_eq!(a.len(), b.len(), "compared outputs differ in length");
    a.iter().zip(b).map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() / y.abs().max(floor) }).fold(0.0, f32::max)
}

/// L1 `unpermute_kernel_backward`: `dinp[b][nh][n][d] = dout[b][n][nh][d]`.
pub fn unpermute_backward_ref(dout: &[bf16], b: usize, n: usize, nh: usize, d: usize) -> Vec<bf16> {
    let mut dinp = vec![bf16::ZERO; b * nh * n * d];
    for bb in 0..b {
        for h in 0..nh {
            for t in 0..n {
                for k in 0..d {
                    dinp[((bb * nh + h) * n + t) * d + k] = dout[((bb * n + t) * nh + h) * d + k];
                }
            }
        }
    }
    dinp
}

/// L2 `permute_kernel_backward`: `dinp[b][n][k][nh][d] = (dq, dk, dv)[k][b][nh][n][d]`.
pub fn permute_backward_ref(dq: &[bf16], dk: &[bf16], dv: &[bf16], b: usize, n: usize, nh: usize, d: usize) -> Vec<bf16> {
    let mut dinp = vec![bf16::ZERO; 3 * b * n * nh * d];
    for bb in 0..b {
        for t in 0..n {
            for (k, src) in [dq, dk, dv].into_iter().enumerate() {
                for h in 0..nh {
                    for e in 0..d {
                        dinp[(((bb * n + t) * 3 + k) * nh + h) * d + e] = src[((bb * nh + h) * n + t) * d + e];
                    }
                }
            }
        }
    }
    dinp
}

/// L3 `layernorm_backward_kernel2` (bf16 tensors): `(dinp after +=, dweight sums, dbias
/// sums)`, the sums in f64 (the kernel's are f32 atomics in an order that varies).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_ref(
    dinp: &[bf16],
    dout: &[bf16],
    inp: &[bf16],
    weight: &[bf16],
    mean: &[bf16],
    rstd: &[bf16],
    rows: usize,
    c: usize,
) -> (Vec<bf16>, Vec<f32>, Vec<f32>) {
    let mut out = dinp.to_vec();
    let (mut dw, mut db) = (vec![0.0f64; c], vec![0.0f64; c]);
    for r in 0..rows {
        let (m, s) = (mean[r].to_f32(), rstd[r].to_f32());
        let row = |v: &[bf16], i: usize| v[r * c + i].to_f32();
        let (mut dm, mut dnm) = (0.0f32, 0.0f32);
        for (i, w) in weight.iter().enumerate().take(c) {
            let norm = (row(inp, i) - m) * s;
            let dn = w.to_f32() * row(dout, i);
            dm += dn;
            dnm += dn * norm;
        }
        let (dm, dnm) = (dm / c as f32, dnm / c as f32);
        for i in 0..c {
            let g = row(dout, i);
            let norm = (row(inp, i) - m) * s;
            let dn = weight[i].to_f32() * g;
            db[i] += g as f64;
            dw[i] += (norm * g) as f64;
            let dval = (dn - dm - norm * dnm) * s;
            out[r * c + i] = bf16::from_f32(row(dinp, i) + dval);
        }
    }
    (out, dw.iter().map(|&v| v as f32).collect(), db.iter().map(|&v| v as f32).collect())
}

/// L4 `matmul_backward_bias_kernel4`: `dbias[oc] + sum of dout[.][oc]`, summed in the kernel's
/// order for `block` threads (warp `w` sums rows `w, w + warps, ...`; then warp 0 adds the
/// warps' sums in order), so the result is the kernel's bit for bit.
pub fn matmul_backward_bias_ref(dbias: &[bf16], dout: &[bf16], rows: usize, oc: usize, block: usize) -> Vec<bf16> {
    let warps = block / 32;
    (0..oc)
        .map(|col| {
            let partial: Vec<f32> = (0..warps)
                .map(|w| {
                    let mut s = 0.0f32;
                    let mut r = w;
                    while r < rows {
                        s += dout[r * oc + col].to_f32();
                        r += warps;
                    }
                    s
                })
                .collect();
            let sum = partial.iter().fold(0.0f32, |a, &p| a + p);
            bf16::from_f32(dbias[col].to_f32() + sum)
        })
        .collect()
}

/// L5 `encoder_backward_kernel2`: `(dwte, dwpe)` after adding every token's gradient, in
/// token order (the kernel's order per column, so bit for bit).
pub fn encoder_backward_ref(dwte: &[f32], dwpe: &[f32], dout: &[f32], inp: &[i32], bt: usize, t: usize, c: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut wte, mut wpe) = (dwte.to_vec(), dwpe.to_vec());
    for i in 0..bt {
        let (pos, ix) = (i % t, inp[i] as usize);
        for col in 0..c {
            let g = dout[i * c + col];
            wte[ix * c + col] += g;
            wpe[pos * c + col] += g;
        }
    }
    (wte, wpe)
}

/// V1 `copy_blocks_kernel`: each layer's block `pairs[2 p]` copied onto block `pairs[2 p + 1]`.
pub fn copy_blocks_ref(cache: &[bf16], pairs: &[i64], layers: usize, layer_numel: usize, numel_per_block: usize) -> Vec<bf16> {
    let mut out = cache.to_vec();
    for l in 0..layers {
        for p in pairs.chunks(2) {
            let (s, d) = (p[0] as usize * numel_per_block, p[1] as usize * numel_per_block);
            for i in 0..numel_per_block {
                out[l * layer_numel + d + i] = cache[l * layer_numel + s + i];
            }
        }
    }
    out
}

/// V2 `poly_norm_kernel`, in f64, rounded to bf16 once.
pub fn poly_norm_ref(input: &[bf16], weight: &[bf16], bias: bf16, eps: f32, hidden: usize) -> Vec<bf16> {
    let w: Vec<f64> = weight.iter().map(|v| v.to_f32() as f64).collect();
    let mut out = Vec::with_capacity(input.len());
    for row in input.chunks(hidden) {
        let x: Vec<f64> = row.iter().map(|v| v.to_f32() as f64).collect();
        let mean = |k: i32| x.iter().map(|v| v.powi(k)).sum::<f64>() / hidden as f64;
        let (a, b, c) = (w[2] / (mean(2) + eps as f64).sqrt(), w[1] / (mean(4) + eps as f64).sqrt(), w[0] / (mean(6) + eps as f64).sqrt());
        out.extend(x.iter().map(|&v| bf16::from_f64(a * v + b * v * v + c * v * v * v + bias.to_f32() as f64)));
    }
    out
}

/// V3 `swigluoai_and_mul_kernel`: `out[t][i]` from the interleaved pair `(input[t][2 i],
/// input[t][2 i + 1])`, in f32 with the host's `exp`.
pub fn swigluoai_ref(input: &[bf16], alpha: f32, limit: f32) -> Vec<bf16> {
    input
        .chunks(2)
        .map(|p| {
            let g = p[0].to_f32().min(limit);
            let u = p[1].to_f32().min(limit).max(-limit);
            bf16::from_f32((u + 1.0) * g / (1.0 + (-g * alpha).exp()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_in_range_and_varies() {
        let v = f32_noise(1, 1000, 1.0);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(v.windows(2).filter(|w| w[0] != w[1]).count() > 990);
    }

    #[test]
    fn rel_err_uses_the_floor_near_zero() {
        assert_eq!(rel_err(&[1.0, 0.0], &[1.0, 0.0], 1e-3), 0.0);
        assert!((rel_err(&[1.1], &[1.0], 1e-3) - 0.1).abs() < 1e-6);
        assert!((rel_err(&[1e-3], &[0.0], 1e-2) - 0.1).abs() < 1e-6);
    }
}
