//! Shared by the CPU-executor and GPU tests: inputs, `f64` references, comparisons.
#![allow(dead_code)]

use ferrocuda_kernels::Element;

/// Deterministic values in `[-scale, scale)` (a linear congruential generator).
pub fn values(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `values` rounded to `T`, and the rounded values back in `f64` (what the kernel sees).
pub fn input<T: Element>(n: usize, seed: u64, scale: f64) -> (Vec<T>, Vec<f64>) {
    let t: Vec<T> = values(n, seed, scale).iter().map(|&v| T::from_f32(v as f32)).collect();
    let back = t.iter().map(|v| v.to_f32() as f64).collect();
    (t, back)
}

pub fn widen<T: Element>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| v.to_f32() as f64).collect()
}

/// Relative tolerance of a stored `T` result: f32 1e-4, f16 4e-3, bf16 2e-2 (a few roundings
/// of the last bit, and f32 accumulation).
pub fn tolerance<T: Element>() -> f64 {
    match std::mem::size_of::<T>() {
        4 => 1e-4,
        _ if std::any::type_name::<T>().contains("bf16") => 2e-2,
        _ => 4e-3,
    }
}

/// Asserts `|got - want| <= tol * (1 + |want|)` elementwise, naming the first failure.
#[track_caller]
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: got {g}, want {w} (tol {tol})");
    }
}

pub fn rmsnorm_ref(x: &[f64], w: &[f64], cols: usize, eps: f64) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; x.len()];
    let mut rstd = vec![];
    for (r, row) in x.chunks(cols).enumerate() {
        let s = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / cols as f64 + eps).sqrt();
        for c in 0..cols {
            out[r * cols + c] = row[c] * s * w[c];
        }
        rstd.push(s);
    }
    (out, rstd)
}

pub fn layernorm_ref(x: &[f64], w: &[f64], b: &[f64], cols: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; x.len()];
    let (mut mean, mut rstd) = (vec![], vec![]);
    for (r, row) in x.chunks(cols).enumerate() {
        let m = row.iter().sum::<f64>() / cols as f64;
        let s = 1.0 / (row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / cols as f64 + eps).sqrt();
        for c in 0..cols {
            out[r * cols + c] = (row[c] - m) * s * w[c] + b[c];
        }
        mean.push(m);
        rstd.push(s);
    }
    (out, mean, rstd)
}

/// Layer norm (centred) or RMSNorm backward: `(dx, dweight, dbias)`.
pub fn norm_backward_ref(dout: &[f64], x: &[f64], w: &[f64], cols: usize, eps: f64, centred: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = cols as f64;
    let mut dx = vec![0.0; x.len()];
    let (mut dw, mut db) = (vec![0.0; cols], vec![0.0; cols]);
    for (r, row) in x.chunks(cols).enumerate() {
        let m = if centred { row.iter().sum::<f64>() / n } else { 0.0 };
        let s = 1.0 / (row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n + eps).sqrt();
        let d = &dout[r * cols..(r + 1) * cols];
        let xhat: Vec<f64> = row.iter().map(|v| (v - m) * s).collect();
        let g: Vec<f64> = (0..cols).map(|c| d[c] * w[c]).collect();
        let gm = if centred { g.iter().sum::<f64>() / n } else { 0.0 };
        let gx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n;
        for c in 0..cols {
            dx[r * cols + c] = s * (g[c] - gm - xhat[c] * gx);
            dw[c] += d[c] * xhat[c];
            db[c] += d[c];
        }
    }
    (dx, dw, db)
}

pub fn gelu_ref(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// Attention reference: `(out, lse)` and, with `dout`, `(dq, dk, dv)`; BHSD or BSHD.
pub struct AttnRef {
    pub out: Vec<f64>,
    pub lse: Vec<f64>,
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

/// [`attention_ref_scaled`] with the default scale `1 / sqrt(d)`.
#[allow(clippy::too_many_arguments)]
pub fn attention_ref(q: &[f64], k: &[f64], v: &[f64], dout: &[f64], dims: (usize, usize, usize, usize, usize, usize), bshd: bool, causal: bool) -> AttnRef {
    attention_ref_scaled(q, k, v, dout, dims, bshd, causal, 1.0 / (dims.5 as f64).sqrt())
}

/// The f64 attention forward and backward with scores `scale · q·k` (pass the call's
/// `shape.scale`: a reference that ignored it failed a correct kernel on the H100 run).
#[allow(clippy::too_many_arguments)]
pub fn attention_ref_scaled(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    dout: &[f64],
    (b_n, hq, hkv, sq, skv, d): (usize, usize, usize, usize, usize, usize),
    bshd: bool,
    causal: bool,
    scale: f64,
) -> AttnRef {
    let row = |b: usize, h: usize, s: usize, heads: usize, seq: usize| if bshd { (b * seq + s) * heads + h } else { (b * heads + h) * seq + s };
    let mut r = AttnRef { out: vec![0.0; q.len()], lse: vec![0.0; b_n * hq * sq], dq: vec![0.0; q.len()], dk: vec![0.0; k.len()], dv: vec![0.0; v.len()] };
    for b in 0..b_n {
        for h in 0..hq {
            let hk = h / (hq / hkv);
            for i in 0..sq {
                let rq = row(b, h, i, hq, sq);
                let keys = if causal { (i + 1).min(skv) } else { skv };
                let qi = &q[rq * d..rq * d + d];
                let s: Vec<f64> = (0..keys)
                    .map(|j| {
                        let rk = row(b, hk, j, hkv, skv);
                        qi.iter().zip(&k[rk * d..rk * d + d]).map(|(a, b)| a * b).sum::<f64>() * scale
                    })
                    .collect();
                let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = s.iter().map(|x| (x - max).exp()).sum();
                r.lse[rq] = max + sum.ln();
                let p: Vec<f64> = s.iter().map(|x| (x - max).exp() / sum).collect();
                for (j, pj) in p.iter().enumerate() {
                    let rk = row(b, hk, j, hkv, skv);
                    for c in 0..d {
                        r.out[rq * d + c] += pj * v[rk * d + c];
                    }
                }
                // Backward.
                let doi = &dout[rq * d..rq * d + d];
                let delta: f64 = (0..d).map(|c| doi[c] * r.out[rq * d + c]).sum();
                for (j, pj) in p.iter().enumerate() {
                    let rk = row(b, hk, j, hkv, skv);
                    let dp: f64 = (0..d).map(|c| doi[c] * v[rk * d + c]).sum();
                    let ds = pj * (dp - delta);
                    for c in 0..d {
                        r.dq[rq * d + c] += ds * k[rk * d + c] * scale;
                        r.dk[rk * d + c] += ds * qi[c] * scale;
                        r.dv[rk * d + c] += pj * doi[c];
                    }
                }
            }
        }
    }
    r
}

/// Device 0's primary context and a stream, or `None` (printed "SKIPPED") without a GPU; a
/// failure instead of a skip under `REQUIRE_GPU=1`.
pub fn gpu(test: &str) -> Option<(ferrocuda_host::Context, ferrocuda_host::Stream)> {
    let attempt = || -> Result<_, String> {
        let context = ferrocuda_host::Context::primary(0).map_err(|e| e.to_string())?;
        let stream = ferrocuda_host::Stream::new(&context).map_err(|e| e.to_string())?;
        Ok((context, stream))
    };
    match attempt() {
        Ok(pair) => Some(pair),
        Err(why) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but {test} cannot run: {why}");
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}
