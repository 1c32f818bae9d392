//! The ported kernels' results computed plainly on the host, in the sources' own arithmetic
//! (`f32`, bf16 rounding where the source rounds), one function per kernel.

use half::bf16;

/// `out[i] = bf16(f32(a[i]) + f32(b[i]))` (llm.c `residual_forward_kernel2`).
pub fn residual_forward(a: &[bf16], b: &[bf16]) -> Vec<bf16> {
    a.iter().zip(b).map(|(x, y)| bf16::from_f32(x.to_f32() + y.to_f32())).collect()
}

/// `losses[bt] = -ln(probs[bt V + targets[bt]])` (llm.c `crossentropy_forward_kernel1`).
pub fn crossentropy_forward(probs: &[f32], targets: &[i32], v: usize) -> Vec<f32> {
    targets.iter().enumerate().map(|(bt, &ix)| -probs[bt * v + ix as usize].ln()).collect()
}

/// `dlogits[bt, c] += (probs[bt, c] - (c == target)) * dlosses[bt]` (llm.c
/// `crossentropy_softmax_backward_kernel1`), in place.
pub fn crossentropy_softmax_backward(dlogits: &mut [f32], dlosses: &[f32], probs: &[f32], targets: &[i32], v: usize) {
    for (i, d) in dlogits.iter_mut().enumerate() {
        let (bt, c) = (i / v, i % v);
        let indicator = if c as i32 == targets[bt] { 1.0 } else { 0.0 };
        *d += (probs[i] - indicator) * dlosses[bt];
    }
}

/// `dst[y sd + x] = bf16(src[y ss + x])` for `x < n`, `y < slices` (llm.c `copy_and_cast_kernel`).
pub fn copy_and_cast(dst: &mut [bf16], src: &[f32], n: usize, slices: usize, stride_dst: usize, stride_src: usize) {
    for y in 0..slices {
        for x in 0..n {
            dst[y * stride_dst + x] = bf16::from_f32(src[y * stride_src + x]);
        }
    }
}

/// PyTorch's tanh GELU of a bf16, rounded to bf16 (vLLM `gelu_tanh_kernel`).
pub fn gelu_tanh(x: bf16) -> bf16 {
    let beta = std::f32::consts::SQRT_2 * std::f32::consts::FRAC_2_SQRT_PI * 0.5;
    let f = x.to_f32();
    bf16::from_f32(0.5 * f * (1.0 + (beta * (f + 0.044715 * f * f * f)).tanh()))
}

/// `out[t, i] = bf16(gelu_tanh(x) * y)` with `x = input[t, i]`, `y = input[t, d + i]` (vLLM
/// `act_and_mul_kernel`; bf16 `*` rounds the `f32` product once).
pub fn gelu_tanh_and_mul(input: &[bf16], d: usize) -> Vec<bf16> {
    let mut out = Vec::with_capacity(input.len() / 2);
    for row in input.chunks_exact(2 * d) {
        let (xs, ys) = row.split_at(d);
        out.extend(xs.iter().zip(ys).map(|(&x, &y)| bf16::from_f32(gelu_tanh(x).to_f32() * y.to_f32())));
    }
    out
}

/// c10's `Float8_e4m3fn` from a float within `±448` (round to nearest even; what vLLM's clamp
/// leaves), as bits.
pub fn e4m3(x: f32) -> u8 {
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let a = f32::from_bits(bits & 0x7fff_ffff);
    if a.is_nan() {
        return sign | 0x7f;
    }
    // Candidates: every non-negative E4M3 value up to 448 (0x7e); pick the nearest, ties to even.
    let value = |c: u8| -> f32 {
        let (e, m) = ((c >> 3) as i32, (c & 7) as f32);
        if e == 0 { m / 8.0 * 2f32.powi(-6) } else { (1.0 + m / 8.0) * 2f32.powi(e - 7) }
    };
    let mut best = 0u8;
    for c in 0..=0x7eu8 {
        let (dc, db) = ((value(c) - a).abs(), (value(best) - a).abs());
        if dc < db || (dc == db && c % 2 == 0 && best % 2 == 1) {
            best = c;
        }
    }
    sign | best
}

/// vLLM `rms_norm_static_fp8_quant_kernel`: per token, `rstd = 1 / sqrt(mean(x^2) + eps)`,
/// `out = e4m3(clamp(f32(bf16(bf16(x rstd) * w)) / scale, ±448))`. Returns the FP8 bits.
pub fn rms_norm_static_fp8_quant(input: &[bf16], weight: &[bf16], scale: f32, eps: f32, hidden: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    for row in input.chunks_exact(hidden) {
        let var: f32 = row.iter().map(|x| x.to_f32() * x.to_f32()).sum();
        let rstd = 1.0 / (var / hidden as f32 + eps).sqrt();
        let inv = 1.0 / scale;
        for (x, w) in row.iter().zip(weight) {
            let n = bf16::from_f32(bf16::from_f32(x.to_f32() * rstd).to_f32() * w.to_f32()).to_f32();
            out.push(e4m3((n * inv).clamp(-448.0, 448.0)));
        }
    }
    out
}

/// vLLM `apply_repetition_penalties_kernel`, in place.
pub fn apply_repetition_penalties(logits: &mut [f32], prompt: &[u8], output: &[u8], penalties: &[f32], vocab: usize) {
    for (i, l) in logits.iter_mut().enumerate() {
        if prompt[i] != 0 || output[i] != 0 {
            let p = penalties[i / vocab];
            *l = if *l > 0.0 { *l / p } else { *l * p };
        }
    }
}

/// vLLM `topkGatingSoftmax` (every row active, experts `start..end` of this node): per row of
/// `experts` logits, the softmax's top `k` as (weight, expert index or `experts` when outside
/// the node, source row `j rows + row`), ties to the lower expert.
pub fn topk_gating_softmax(input: &[f32], experts: usize, k: usize, start: i32, end: i32) -> (Vec<f32>, Vec<i32>, Vec<i32>) {
    topk_gating_softmax_finished(input, None, experts, k, start, end)
}

/// [`topk_gating_softmax`] with vLLM's `finished` flags (`None`: `nullptr`, every row active):
/// a row whose flag is non-zero gets `experts` for every index (not routed), its weights and
/// source rows as an active row's.
pub fn topk_gating_softmax_finished(input: &[f32], finished: Option<&[u8]>, experts: usize, k: usize, start: i32, end: i32) -> (Vec<f32>, Vec<i32>, Vec<i32>) {
    let rows = input.len() / experts;
    let (mut w, mut ix, mut src) = (vec![0.0; rows * k], vec![0; rows * k], vec![0; rows * k]);
    for (r, row) in input.chunks_exact(experts).enumerate() {
        let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let e: Vec<f32> = row.iter().map(|&x| (x - m).exp()).collect();
        let s: f32 = e.iter().sum();
        let mut p: Vec<f32> = e.iter().map(|&x| x * (1.0 / s)).collect();
        for j in 0..k {
            let (mut best, mut bv) = (0usize, p[0]);
            for (c, &v) in p.iter().enumerate() {
                if v > bv {
                    best = c;
                    bv = v;
                }
            }
            w[r * k + j] = bv;
            let e = best as i32;
            let active = finished.is_none_or(|f| f[r] == 0);
            ix[r * k + j] = if active && e >= start && e < end { e - start } else { experts as i32 };
            src[r * k + j] = (j * rows + r) as i32;
            p[best] = -10000.0;
        }
    }
    (w, ix, src)
}
