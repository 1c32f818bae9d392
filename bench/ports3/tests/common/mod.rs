//! Inputs and CPU references of the eight ported kernels, shared by tests/ports3.rs and
//! examples/ports3_bench.rs (`#[path]`): each reference is written from the source's
//! description in plain Rust (f32/f64 on the host), not from the port.
#![allow(dead_code, clippy::needless_range_loop)]

use half::bf16;

/// A deterministic pseudo-random value in `[-1, 1)` (xorshift).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u32(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
    pub fn uniform(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }
    pub fn bf16s(&mut self, n: usize, scale: f32) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f32(self.uniform() * scale)).collect()
    }
}

pub fn f(x: bf16) -> f32 {
    x.to_f32()
}

/// `encoder_forward_kernel3`: `out[bt, c] = bf16(wte[inp[bt], c] + wpe[t, c])`.
pub fn encoder_forward(inp: &[i32], wte: &[bf16], wpe: &[bf16], t_len: usize, c: usize) -> Vec<bf16> {
    let mut out = vec![bf16::ZERO; inp.len() * c];
    for (bt, &ix) in inp.iter().enumerate() {
        let t = bt % t_len;
        for k in 0..c {
            out[bt * c + k] = bf16::from_f32(f(wte[ix as usize * c + k]) + f(wpe[t * c + k]));
        }
    }
    out
}

/// Sum of squares of slice `y` (`count` values from `y * stride`), in f64.
pub fn norm_squared(data: &[bf16], count: usize, stride: usize, slices: usize) -> Vec<f64> {
    (0..slices).map(|y| data[y * stride..y * stride + count].iter().map(|&v| (f(v) as f64).powi(2)).sum()).collect()
}

/// `softmax_forward_kernel5`: causal softmax of `inv_temperature * x` over columns `0..=t % T`
/// of each row; other columns left as they were.
pub fn causal_softmax(inp: &[bf16], out: &mut [bf16], inv_temperature: f32, t_len: usize) {
    for (row, (x, o)) in inp.chunks(t_len).zip(out.chunks_mut(t_len)).enumerate() {
        let own = row % t_len;
        let max = x[..=own].iter().map(|&v| f(v)).fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = x[..=own].iter().map(|&v| ((inv_temperature * (f(v) - max)) as f64).exp()).sum();
        for c in 0..=own {
            o[c] = bf16::from_f32((((inv_temperature * (f(x[c]) - max)) as f64).exp() / sum) as f32);
        }
    }
}

/// `fused_classifier_kernel5`: per row of `V` (stride `P`), the loss update and the logits'
/// gradient (columns `V..` of the last partial chunk 0, whole padding chunks untouched).
pub fn fused_classifier(logits: &[bf16], losses: &mut [f32], dlogits: &mut [bf16], dloss: f32, targets: &[i32], v: usize, p: usize) {
    for (row, &ix) in targets.iter().enumerate() {
        let x = &logits[row * p..row * p + v];
        let max = x.iter().map(|&a| f(a)).fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = x.iter().map(|&a| ((f(a) - max) as f64).exp()).sum();
        let prob = |i: usize| (((f(x[i]) - max) as f64).exp() / sum) as f32;
        losses[row] -= prob(ix as usize).ln();
        for i in 0..v {
            let ind = if i == ix as usize { 1.0 } else { 0.0 };
            dlogits[row * p + i] = bf16::from_f32((prob(i) - ind) * dloss);
        }
        for i in v..v.next_multiple_of(8).min(p) {
            dlogits[row * p + i] = bf16::ZERO;
        }
    }
}

/// `layernorm_backward_kernel10` in f64: `dinp += ..`, `dbias += Σ dout`, `dweight += Σ norm ·
/// dout` (returned as f32 before the bf16 rounding of the kernels).
pub struct LnBackward {
    pub dinp: Vec<f32>,
    pub dbias: Vec<f32>,
    pub dweight: Vec<f32>,
}

#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward(
    dinp: &[bf16],
    dbias: &[bf16],
    dweight: &[bf16],
    dout: &[bf16],
    inp: &[bf16],
    weight: &[bf16],
    mean: &[f32],
    rstd: &[f32],
    c: usize,
) -> LnBackward {
    let rows = mean.len();
    let mut r = LnBackward {
        dinp: dinp.iter().map(|&v| f(v)).collect(),
        dbias: dbias.iter().map(|&v| f(v)).collect(),
        dweight: dweight.iter().map(|&v| f(v)).collect(),
    };
    let mut db = vec![0.0f64; c];
    let mut dw = vec![0.0f64; c];
    for row in 0..rows {
        let (m, s) = (mean[row] as f64, rstd[row] as f64);
        let d = |i: usize| f(dout[row * c + i]) as f64;
        let x = |i: usize| f(inp[row * c + i]) as f64;
        let mut dnorm_mean = 0.0;
        let mut dnorm_norm_mean = 0.0;
        for i in 0..c {
            let dn = f(weight[i]) as f64 * d(i);
            dnorm_mean += dn;
            dnorm_norm_mean += dn * x(i);
        }
        dnorm_mean /= c as f64;
        dnorm_norm_mean = dnorm_norm_mean / c as f64 * s - dnorm_mean * m * s;
        for i in 0..c {
            let norm = (x(i) - m) * s;
            db[i] += d(i);
            dw[i] += norm * d(i);
            let dval = (f(weight[i]) as f64 * d(i) - dnorm_mean - norm * dnorm_norm_mean) * s;
            r.dinp[row * c + i] += dval as f32;
        }
    }
    for i in 0..c {
        r.dbias[i] += db[i] as f32;
        r.dweight[i] += dw[i] as f32;
    }
    r
}

/// `merge_attn_states_kernel`: merged outputs (f32) and lse.
pub fn merge_attn_states(p_out: &[bf16], p_lse: &[f32], s_out: &[bf16], s_lse: &[f32], n: usize, h: usize, d: usize) -> (Vec<f32>, Vec<f32>) {
    let mut out = vec![0.0; n * h * d];
    let mut lse = vec![0.0; h * n];
    for t in 0..n {
        for hd in 0..h {
            let li = hd * n + t;
            let p = if p_lse[li].is_infinite() { f32::NEG_INFINITY } else { p_lse[li] };
            let s = if s_lse[li].is_infinite() { f32::NEG_INFINITY } else { s_lse[li] };
            let m = p.max(s);
            let (pe, se) = (((p - m) as f64).exp(), ((s - m) as f64).exp());
            let tot = pe + se;
            for k in 0..d {
                let i = (t * h + hd) * d + k;
                out[i] = (f(p_out[i]) as f64 * pe / tot + f(s_out[i]) as f64 * se / tot) as f32;
            }
            lse[li] = (tot.ln() + m as f64) as f32;
        }
    }
    (out, lse)
}

/// `reshape_and_cache_flash_kernel`: the caches after the copy (padding tokens skipped).
pub fn reshape_and_cache_flash(key: &[bf16], value: &[bf16], key_cache: &mut [bf16], value_cache: &mut [bf16], slots: &[i64], n: usize) {
    for (token, &slot) in slots.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let s = slot as usize;
        key_cache[s * n..s * n + n].copy_from_slice(&key[token * n..token * n + n]);
        value_cache[s * n..s * n + n].copy_from_slice(&value[token * n..token * n + n]);
    }
}

/// FP8 E4M3FN bits to f32 (exact).
pub fn fp8e4m3fn_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xf) as i32;
    let m = (b & 7) as f32;
    if e == 15 && b & 7 == 7 {
        return f32::NAN;
    }
    if e == 0 { sign * m / 8.0 * 2f32.powi(-6) } else { sign * (1.0 + m / 8.0) * 2f32.powi(e - 7) }
}

/// The FP8 E4M3FN value nearest `x` (ties to even mantissa), for `|x| <= 448`.
pub fn fp8_nearest(x: f32) -> f32 {
    let mut best = (f32::INFINITY, 0u8);
    for b in 0..=255u8 {
        let v = fp8e4m3fn_to_f32(b);
        if v.is_nan() {
            continue;
        }
        let d = (v - x).abs();
        if d < best.0 || (d == best.0 && b & 1 == 0 && best.1 & 1 == 1) {
            best = (d, b);
        }
    }
    fp8e4m3fn_to_f32(best.1)
}

/// `dynamic_per_token_scaled_fp8_quant_kernel`: per token, the scale and the quantised values
/// (as f32).
pub fn fp8_quant(input: &[bf16], hidden: usize) -> (Vec<f32>, Vec<f32>) {
    let mut scales = vec![];
    let mut q = vec![];
    for x in input.chunks(hidden) {
        let absmax = x.iter().map(|&v| f(v).abs()).fold(0.0f32, f32::max);
        let s = (absmax / 448.0).max(1.0 / (448.0 * 512.0));
        scales.push(s);
        q.extend(x.iter().map(|&v| fp8_nearest((f(v) / s).clamp(-448.0, 448.0))));
    }
    (scales, q)
}

/// Max of `|got - want| / (|want| + floor)` over the pairs, with the index.
pub fn max_rel(got: impl IntoIterator<Item = f32>, want: impl IntoIterator<Item = f32>, floor: f32) -> (f32, usize) {
    let mut worst = (0.0f32, 0usize);
    for (i, (g, w)) in got.into_iter().zip(want).enumerate() {
        let e = if g.is_nan() || w.is_nan() { f32::INFINITY } else { (g - w).abs() / (w.abs() + floor) };
        if e > worst.0 {
            worst = (e, i);
        }
    }
    worst
}

/// As [`fp8_quant`], with a binary search over the 127 non-negative finite FP8 values (fast
/// enough for millions of values).
pub fn fp8_quant_fast(input: &[bf16], hidden: usize) -> (Vec<f32>, Vec<f32>) {
    let table: Vec<f32> = (0..=0x7eu8).map(fp8e4m3fn_to_f32).collect();
    let nearest = |x: f32| -> f32 {
        let a = x.abs();
        let i = table.partition_point(|&v| v < a);
        let v = if i == 0 {
            table[0]
        } else if i == table.len() {
            table[i - 1]
        } else {
            let (lo, hi) = (table[i - 1], table[i]);
            let (dl, dh) = (a - lo, hi - a);
            if dl < dh || (dl == dh && (i - 1) % 2 == 0) { lo } else { hi }
        };
        if x < 0.0 { -v } else { v }
    };
    let mut scales = vec![];
    let mut q = vec![];
    for x in input.chunks(hidden) {
        let absmax = x.iter().map(|&v| f(v).abs()).fold(0.0f32, f32::max);
        let s = (absmax / 448.0).max(1.0 / (448.0 * 512.0));
        scales.push(s);
        q.extend(x.iter().map(|&v| nearest((f(v) / s).clamp(-448.0, 448.0))));
    }
    (scales, q)
}
