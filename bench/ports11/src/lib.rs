//! Issue 30's eleventh held-out port (bench/ports11): the host side of six llm.c and two vLLM
//! kernels ported from ferrocuda's docs alone (`ports11_kernels`). This library holds the
//! inputs the tests and the bench share and the references the tests compare with (plain Rust,
//! `f64` where the kernel sums, written from the sources' semantics, not from the ports).

use half::bf16;

/// A deterministic pseudo-random sequence in `[-1, 1)` (a 32-bit LCG's high bits): the same
/// inputs for the CPU tests, the GPU tests and the bench.
pub fn uniform(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// [`uniform`] scaled by `scale` and rounded to bf16.
pub fn uniform_bf16(n: usize, seed: u32, scale: f32) -> Vec<bf16> {
    uniform(n, seed).into_iter().map(|v| bf16::from_f32(v * scale)).collect()
}

/// L1's reference: for each of the `n` rows of `c` columns, the mean, `1 / sqrt(E[x²] - mean² +
/// 1e-5)` (the source's variance formula) and `(x - mean) rstd weight + bias`, in `f64`.
pub fn layernorm_reference(inp: &[f32], weight: &[f32], bias: &[f32], n: usize, c: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut out, mut mean, mut rstd) = (vec![0.0; n * c], vec![0.0; n], vec![0.0; n]);
    for r in 0..n {
        let x = &inp[r * c..(r + 1) * c];
        let m = x.iter().map(|&v| v as f64).sum::<f64>() / c as f64;
        let m2 = x.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / c as f64;
        let s = 1.0 / (m2 - m * m + 1e-5).sqrt();
        for j in 0..c {
            out[r * c + j] = (x[j] as f64 - m) * s * weight[j] as f64 + bias[j] as f64;
        }
        (mean[r], rstd[r]) = (m, s);
    }
    (out, mean, rstd)
}

/// L2's reference: `dbias[o] + Σ_i dout[i oc + o]` in `f64` (before the kernel's bf16 rounding).
pub fn bias_grad_reference(dbias: &[bf16], dout: &[bf16], bt: usize, oc: usize) -> Vec<f64> {
    (0..oc).map(|o| dbias[o].to_f64() + (0..bt).map(|i| dout[i * oc + o].to_f64()).sum::<f64>()).collect()
}

/// The distance between `v`'s bf16 neighbours (one unit in the last place), for a tolerance.
pub fn bf16_ulp(v: f64) -> f64 {
    let b = bf16::from_f64(v.abs());
    let next = bf16::from_bits(b.to_bits() + 1);
    (next.to_f64() - b.to_f64()).abs()
}

/// L3's reference: each row's softmax in `f64`.
pub fn softmax_reference(inp: &[f32], n: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * c];
    for r in 0..n {
        let x = &inp[r * c..(r + 1) * c];
        let m = x.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
        for j in 0..c {
            out[r * c + j] = (x[j] as f64 - m).exp() / s;
        }
    }
    out
}

/// L4's reference: `Σ x²` in `f64`.
pub fn sum_of_squares_reference(data: &[bf16]) -> f64 {
    data.iter().map(|v| v.to_f64() * v.to_f64()).sum()
}

/// L5's reference: the causal softmax of each query row of `preatt` `[b, nh, t, t]` (columns
/// `0..=row`), zeros past the diagonal, in `f64`.
pub fn causal_softmax_reference(preatt: &[f32], b: usize, nh: usize, t: usize) -> Vec<f64> {
    let mut att = vec![0.0; b * nh * t * t];
    for row in 0..b * nh * t {
        let q = row % t;
        let x = &preatt[row * t..row * t + q + 1];
        let m = x.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
        for (j, &v) in x.iter().enumerate() {
            att[row * t + j] = (v as f64 - m).exp() / s;
        }
    }
    att
}

/// L6's reference: `x * scale` on and below each `t x t` matrix's diagonal, `-inf` above.
pub fn scale_reference(inp: &[f32], scale: f32, t: usize) -> Vec<f32> {
    inp.iter()
        .enumerate()
        .map(|(i, &v)| {
            let (row, col) = ((i / t) % t, i % t);
            if col > row { f32::NEG_INFINITY } else { v * scale }
        })
        .collect()
}

/// The value of FP8 E4M3 (`e4m3fn`) bits `code`: NaN for `0x7f`/`0xff`.
pub fn e4m3_value(code: u8) -> f64 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = ((code >> 3) & 0xf) as i32;
    let mantissa = (code & 7) as f64;
    if code & 0x7f == 0x7f {
        f64::NAN
    } else if exponent == 0 {
        sign * mantissa / 8.0 * 2f64.powi(-6)
    } else {
        sign * (1.0 + mantissa / 8.0) * 2f64.powi(exponent - 7)
    }
}

/// V1's reference conversion, written independently of the device library: the E4M3 code
/// nearest `x` (ties to the even code), `±448` beyond the largest finite value, `0x7f` for NaN.
pub fn e4m3_reference(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let x = x as f64;
    let mut best = 0u8;
    let mut best_err = f64::INFINITY;
    for code in 0u8..=255 {
        let v = e4m3_value(code);
        // A zero of the other sign is not a candidate (-0 and tiny negatives give 0x80).
        if v.is_nan() || (code == 0x80 && !x.is_sign_negative()) || (code == 0 && x.is_sign_negative()) {
            continue;
        }
        let err = (v - x).abs();
        if err < best_err || (err == best_err && code & 1 == 0) {
            (best, best_err) = (code, err);
        }
    }
    best
}

/// V2's reference on host copies: `seq_lens += 1`, positions and slots as vLLM's kernel computes
/// them. Returns `(input_positions, slot_mapping)`; updates `seq_lens`.
pub fn advance_step_reference(seq_lens: &mut [i32], block_tables: &[i32], stride: usize, block_size: i32) -> (Vec<i64>, Vec<i32>) {
    let mut positions = vec![0i64; seq_lens.len()];
    let mut slots = vec![0i32; seq_lens.len()];
    for (s, len) in seq_lens.iter_mut().enumerate() {
        *len += 1;
        let pos = *len - 1;
        positions[s] = pos as i64;
        slots[s] = block_tables[s * stride + (pos / block_size) as usize] * block_size + pos % block_size;
    }
    (positions, slots)
}

/// Block tables for [`advance_step_reference`]'s shape: `seqs` rows of `stride` block numbers.
pub fn block_tables(seqs: usize, stride: usize) -> Vec<i32> {
    (0..seqs * stride).map(|i| ((i as u64 * 2_654_435_761) % 100_003) as i32).collect()
}
