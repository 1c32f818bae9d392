//! The row kernels on the CPU executor against `f64` references, for `f32`, `bf16` and `f16`
//! (tiny shapes: every GPU thread is a coroutine here). Widths that are not multiples of 32
//! check the lanes' tails.

#![allow(clippy::needless_range_loop)] // the references index several arrays by one position

mod common;

use common::*;
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::rows::{AdamW, Rope, Rows};
use ferrocuda_kernels::{Element, IGNORE_TARGET, KernelsError, bf16, cpu, f16};

const SHAPE: Rows = Rows { rows: 3, cols: 40 };
const EPS: f32 = 1e-5;

fn executor() -> CpuExecutor {
    CpuExecutor::new()
}

fn norms_forward<T: Element>(shape: Rows) {
    let e = executor();
    let n = shape.len();
    let (x, xf) = input::<T>(n, 1, 2.0);
    let (res, resf) = input::<T>(n, 2, 1.0);
    let (w, wf) = input::<T>(shape.cols, 3, 1.5);
    let (b, bf) = input::<T>(shape.cols, 4, 0.5);
    let tol = tolerance::<T>();

    let (mut out, mut rstd) = (vec![T::default(); n], vec![0.0f32; shape.rows]);
    cpu::rmsnorm(&e, &x, &w, &mut out, &mut rstd, shape, EPS).unwrap();
    let (want, want_rstd) = rmsnorm_ref(&xf, &wf, shape.cols, EPS as f64);
    assert_close("rmsnorm out", &widen(&out), &want, tol);
    assert_close("rmsnorm rstd", &rstd.iter().map(|&v| v as f64).collect::<Vec<_>>(), &want_rstd, 1e-4);

    let (mut mean, mut rstd) = (vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
    cpu::layernorm(&e, &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, EPS).unwrap();
    let (want, want_mean, want_rstd) = layernorm_ref(&xf, &wf, &bf, shape.cols, EPS as f64);
    assert_close("layernorm out", &widen(&out), &want, tol);
    assert_close("layernorm mean", &mean.iter().map(|&v| v as f64).collect::<Vec<_>>(), &want_mean, 1e-5);
    assert_close("layernorm rstd", &rstd.iter().map(|&v| v as f64).collect::<Vec<_>>(), &want_rstd, 1e-4);

    // Fused residual add: `sum` is x + residual rounded to T, and the norm is of that.
    let sum_want: Vec<f64> = xf.iter().zip(&resf).map(|(a, b)| T::from_f32((a + b) as f32).to_f32() as f64).collect();
    let mut sum = vec![T::default(); n];
    cpu::add_rmsnorm(&e, &x, &res, &w, &mut out, &mut sum, &mut rstd, shape, EPS).unwrap();
    assert_close("add_rmsnorm sum", &widen(&sum), &sum_want, 0.0);
    assert_close("add_rmsnorm out", &widen(&out), &rmsnorm_ref(&sum_want, &wf, shape.cols, EPS as f64).0, tol);
    cpu::add_layernorm(&e, &x, &res, &w, &b, &mut out, &mut sum, &mut mean, &mut rstd, shape, EPS).unwrap();
    assert_close("add_layernorm sum", &widen(&sum), &sum_want, 0.0);
    assert_close("add_layernorm out", &widen(&out), &layernorm_ref(&sum_want, &wf, &bf, shape.cols, EPS as f64).0, tol);
}

#[test]
fn norms_forward_match_f64() {
    norms_forward::<f32>(SHAPE);
    norms_forward::<bf16>(SHAPE);
    norms_forward::<f16>(SHAPE);
}

fn norms_backward<T: Element>(shape: Rows) {
    let e = executor();
    let n = shape.len();
    let (x, xf) = input::<T>(n, 5, 2.0);
    let (w, wf) = input::<T>(shape.cols, 6, 1.5);
    let (b, _) = input::<T>(shape.cols, 7, 0.5);
    let (dout, doutf) = input::<T>(n, 8, 1.0);
    let (dres, dresf) = input::<T>(n, 9, 1.0);
    let tol = tolerance::<T>() * 2.0;

    let (mut out, mut mean, mut rstd) = (vec![T::default(); n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
    cpu::layernorm(&e, &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, EPS).unwrap();
    let (mut dx, mut dw, mut db) = (vec![T::default(); n], vec![0.0f32; shape.cols], vec![0.0f32; shape.cols]);
    cpu::layernorm_backward(&e, &dout, &x, &w, &mean, &rstd, Some(&dres), &mut dx, &mut dw, &mut db, shape).unwrap();
    let (want_dx, want_dw, want_db) = norm_backward_ref(&doutf, &xf, &wf, shape.cols, EPS as f64, true);
    let want_dx: Vec<f64> = want_dx.iter().zip(&dresf).map(|(a, b)| a + b).collect();
    assert_close("layernorm dx", &widen(&dx), &want_dx, tol);
    assert_close("layernorm dweight", &widen(&dw), &want_dw, 1e-4);
    assert_close("layernorm dbias", &widen(&db), &want_db, 1e-4);

    cpu::rmsnorm(&e, &x, &w, &mut out, &mut rstd, shape, EPS).unwrap();
    cpu::rmsnorm_backward(&e, &dout, &x, &w, &rstd, None, &mut dx, &mut dw, shape).unwrap();
    let (want_dx, want_dw, _) = norm_backward_ref(&doutf, &xf, &wf, shape.cols, EPS as f64, false);
    assert_close("rmsnorm dx", &widen(&dx), &want_dx, tol);
    assert_close("rmsnorm dweight", &widen(&dw), &want_dw, 1e-4);
}

#[test]
fn norms_backward_match_f64() {
    norms_backward::<f32>(SHAPE);
    norms_backward::<bf16>(SHAPE);
    norms_backward::<f16>(SHAPE);
    // More rows than one chunk of the weight gradients' first step (64): three chunks.
    norms_backward::<f32>(Rows { rows: 130, cols: 8 });
}

/// The fused norm backward (dx and per-block weight partials in one pass) with several rows
/// per block: 300 rows of 256 take 38 blocks of 8 rows, summed in a fixed order; and a width
/// past its 4096 (4160: 520 threads a row) on the two-kernel packed path.
#[test]
fn fused_and_wide_norm_backward_match_f64() {
    let many = Rows { rows: 300, cols: 256 };
    assert_eq!(ferrocuda_kernels::rows::fused_backward_blocks(many), Some(38));
    norms_backward::<f32>(many);
    norms_backward::<bf16>(many);
    let wide = Rows { rows: 3, cols: 4160 };
    assert_eq!(ferrocuda_kernels::rows::fused_backward_blocks(wide), None);
    norms_backward::<f32>(wide);
    norms_backward::<f16>(wide);
}

fn softmax_and_cross_entropy<T: Element>(shape: Rows) {
    let e = executor();
    let (x, xf) = input::<T>(shape.len(), 10, 4.0);
    let tol = tolerance::<T>();
    let mut out = vec![T::default(); shape.len()];
    cpu::softmax(&e, &x, &mut out, shape).unwrap();
    let mut probs = vec![];
    let mut lses = vec![];
    for row in xf.chunks(shape.cols) {
        let max = row.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
        probs.extend(row.iter().map(|v| (v - max).exp() / sum));
        lses.push(max + sum.ln());
    }
    assert_close("softmax", &widen(&out), &probs, tol);

    // Row 2 ignored, row 3 out of range (NaN), the others real classes.
    let targets = [5u32, shape.cols as u32 - 1, IGNORE_TARGET, shape.cols as u32];
    let dloss = 0.25f32;
    let (mut losses, mut dlogits) = (vec![0.0f32; shape.rows], vec![T::default(); shape.len()]);
    cpu::cross_entropy(&e, &x, &targets, &mut losses, &mut dlogits, shape, dloss).unwrap();
    for r in 0..2 {
        let t = targets[r] as usize;
        let want_loss = lses[r] - xf[r * shape.cols + t];
        assert!((losses[r] as f64 - want_loss).abs() < 1e-4 * (1.0 + want_loss.abs()), "loss {r}: {} vs {want_loss}", losses[r]);
        let want: Vec<f64> = (0..shape.cols).map(|c| (probs[r * shape.cols + c] - if c == t { 1.0 } else { 0.0 }) * dloss as f64).collect();
        assert_close("dlogits", &widen(&dlogits[r * shape.cols..(r + 1) * shape.cols]), &want, tol);
    }
    assert_eq!(losses[2], 0.0, "an ignored row has no loss");
    assert!(widen(&dlogits[2 * shape.cols..3 * shape.cols]).iter().all(|&v| v == 0.0), "an ignored row has no gradient");
    assert!(losses[3].is_nan(), "a target past the vocabulary is a NaN loss, not a read out of bounds");
}

/// The two halves of cross-entropy (PyTorch's op calls them: the forward without the gradient,
/// the backward with the upstream gradient per row): the forward's losses are the fused
/// kernel's bits and its `lse` matches `f64`; the backward with a uniform `dlosses` gives the
/// fused kernel's gradient bits, and with per-row factors matches `f64` (ignored row zero,
/// a target past the vocabulary NaN). Vocabularies 70 (one element a thread) and 72, 256 (8
/// a thread).
fn cross_entropy_split<T: Element>(shape: Rows) {
    let e = executor();
    let (x, xf) = input::<T>(shape.len(), 12, 4.0);
    let tol = tolerance::<T>();
    let targets = [5u32, shape.cols as u32 - 1, IGNORE_TARGET, shape.cols as u32];
    let (mut losses, mut lse) = (vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
    cpu::cross_entropy_forward(&e, &x, &targets, &mut losses, &mut lse, shape).unwrap();
    let (mut fused_losses, mut fused_dlogits) = (vec![0.0f32; shape.rows], vec![T::default(); shape.len()]);
    cpu::cross_entropy(&e, &x, &targets, &mut fused_losses, &mut fused_dlogits, shape, 0.25).unwrap();
    assert_eq!(
        losses.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        fused_losses.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "the forward's losses are the fused kernel's"
    );
    let mut dlogits = vec![T::default(); shape.len()];
    cpu::cross_entropy_backward(&e, &x, &targets, &lse, &[0.25; 4], &mut dlogits, shape).unwrap();
    assert_eq!(widen(&dlogits[..2 * shape.cols]), widen(&fused_dlogits[..2 * shape.cols]), "a uniform dloss gives the fused kernel's gradient");
    let dlosses = [0.5f32, -2.0, 3.0, 1.0];
    cpu::cross_entropy_backward(&e, &x, &targets, &lse, &dlosses, &mut dlogits, shape).unwrap();
    for (r, row) in xf.chunks(shape.cols).enumerate().take(2) {
        let max = row.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
        let want_lse = max + sum.ln();
        assert!((lse[r] as f64 - want_lse).abs() < 1e-5 * (1.0 + want_lse.abs()), "lse {r}: {} vs {want_lse}", lse[r]);
        let t = targets[r] as usize;
        let want: Vec<f64> = row.iter().enumerate().map(|(c, v)| ((v - want_lse).exp() - if c == t { 1.0 } else { 0.0 }) * dlosses[r] as f64).collect();
        assert_close("dlogits (per-row dloss)", &widen(&dlogits[r * shape.cols..(r + 1) * shape.cols]), &want, tol);
    }
    assert!(widen(&dlogits[2 * shape.cols..3 * shape.cols]).iter().all(|&v| v == 0.0), "an ignored row has no gradient");
    assert!(widen(&dlogits[3 * shape.cols..]).iter().all(|v| v.is_nan()), "a target past the vocabulary gives NaN");
    assert_eq!(losses[2], 0.0, "an ignored row has no loss");
    assert!(losses[3].is_nan(), "a target past the vocabulary is a NaN loss");
    let err = cpu::cross_entropy_backward(&e, &x, &targets, &lse, &dlosses[..3], &mut dlogits, shape).unwrap_err();
    assert!(err.to_string().contains("dlosses"), "{err}");
}

#[test]
fn cross_entropy_forward_and_backward_match_the_fused_kernel_and_f64() {
    for vocab in [70, 72, 256] {
        let shape = Rows { rows: 4, cols: vocab };
        cross_entropy_split::<f32>(shape);
        cross_entropy_split::<bf16>(shape);
        cross_entropy_split::<f16>(shape);
    }
}

#[test]
fn softmax_and_cross_entropy_match_f64() {
    softmax_and_cross_entropy::<f32>(Rows { rows: 4, cols: 70 });
    softmax_and_cross_entropy::<bf16>(Rows { rows: 4, cols: 70 });
    softmax_and_cross_entropy::<f16>(Rows { rows: 4, cols: 70 });
}

fn activations<T: Element>(shape: Rows) {
    let e = executor();
    let tol = tolerance::<T>();
    let (x, xf) = input::<T>(shape.len(), 11, 4.0);
    let (dout, doutf) = input::<T>(shape.len(), 12, 1.0);
    let mut out = vec![T::default(); shape.len()];
    cpu::gelu(&e, &x, &mut out).unwrap();
    assert_close("gelu", &widen(&out), &xf.iter().map(|&v| gelu_ref(v)).collect::<Vec<_>>(), tol);
    cpu::gelu_backward(&e, &x, &dout, &mut out).unwrap();
    let h = 1e-6;
    let want: Vec<f64> = xf.iter().zip(&doutf).map(|(&v, d)| (gelu_ref(v + h) - gelu_ref(v - h)) / (2.0 * h) * d).collect();
    assert_close("gelu backward", &widen(&out), &want, tol * 2.0);

    // SiLU-and-mul: input rows x 2d.
    let (inp, inpf) = input::<T>(2 * shape.len(), 13, 3.0);
    cpu::silu_and_mul(&e, &inp, &mut out, shape).unwrap();
    let silu = |g: f64| g / (1.0 + (-g).exp());
    let d = shape.cols;
    let want: Vec<f64> = (0..shape.len()).map(|i| (i / d, i % d)).map(|(r, c)| silu(inpf[r * 2 * d + c]) * inpf[r * 2 * d + d + c]).collect();
    assert_close("silu_and_mul", &widen(&out), &want, tol);
    let mut dinp = vec![T::default(); 2 * shape.len()];
    cpu::silu_and_mul_backward(&e, &inp, &dout, &mut dinp, shape).unwrap();
    let mut want = vec![0.0; 2 * shape.len()];
    for r in 0..shape.rows {
        for c in 0..d {
            let (g, u, dy) = (inpf[r * 2 * d + c], inpf[r * 2 * d + d + c], doutf[r * d + c]);
            want[r * 2 * d + c] = dy * u * (silu(g + h) - silu(g - h)) / (2.0 * h);
            want[r * 2 * d + d + c] = dy * silu(g);
        }
    }
    assert_close("silu_and_mul backward", &widen(&dinp), &want, tol * 2.0);
}

#[test]
fn activations_match_f64() {
    // 3 x 37: the element-wise GELU kernels; 3 x 40 (a multiple of 8): the packed ones.
    for shape in [Rows { rows: 3, cols: 37 }, Rows { rows: 3, cols: 40 }] {
        activations::<f32>(shape);
        activations::<bf16>(shape);
        activations::<f16>(shape);
    }
}

fn rope<T: Element>(shape: Rope) {
    let e = executor();
    let n = shape.tokens * shape.heads * shape.head_dim;
    let half = shape.rotary_dim / 2;
    let (x, xf) = input::<T>(n, 14, 2.0);
    let positions = [0u32, 5, 7];
    let angle = |p: usize, k: usize| p as f64 * 10000f64.powf(-2.0 * k as f64 / shape.rotary_dim as f64);
    let cos: Vec<f32> = (0..shape.max_positions * half).map(|i| angle(i / half, i % half).cos() as f32).collect();
    let sin: Vec<f32> = (0..shape.max_positions * half).map(|i| angle(i / half, i % half).sin() as f32).collect();
    let mut out = vec![T::default(); n];
    cpu::rotary_embedding(&e, &x, &positions, &cos, &sin, &mut out, shape, false).unwrap();
    let mut want = xf.clone();
    for t in 0..shape.tokens {
        for h in 0..shape.heads {
            let base = (t * shape.heads + h) * shape.head_dim;
            for k in 0..half {
                let (c, s) = (angle(positions[t] as usize, k).cos(), angle(positions[t] as usize, k).sin());
                let (x1, x2) = (xf[base + k], xf[base + k + half]);
                want[base + k] = x1 * c - x2 * s;
                want[base + k + half] = x2 * c + x1 * s;
            }
        }
    }
    assert_close("rope", &widen(&out), &want, tolerance::<T>());
    // The inverse undoes it (the backward pass).
    let mut back = vec![T::default(); n];
    cpu::rotary_embedding(&e, &out, &positions, &cos, &sin, &mut back, shape, true).unwrap();
    assert_close("rope inverse", &widen(&back), &xf, tolerance::<T>() * 2.0);
    // A position past the tables is NaN, not a read out of bounds.
    cpu::rotary_embedding(&e, &x, &[0, 8, 1], &cos, &sin, &mut out, shape, false).unwrap();
    let row1 = &widen(&out)[shape.heads * shape.head_dim..2 * shape.heads * shape.head_dim];
    assert!(row1[0].is_nan() && !row1[shape.rotary_dim].is_nan());
}

#[test]
fn rotary_embedding_matches_f64() {
    // rotary_dim 48 (a multiple of 16) and head_dim 64: the 8-elements-a-thread kernel, with a
    // copied tail; rotary_dim 20 of head_dim 30: the element-wise one.
    for shape in [
        Rope { tokens: 3, heads: 2, head_dim: 64, rotary_dim: 48, max_positions: 8 },
        Rope { tokens: 3, heads: 2, head_dim: 30, rotary_dim: 20, max_positions: 8 },
    ] {
        rope::<f32>(shape);
        rope::<bf16>(shape);
        rope::<f16>(shape);
    }
}

/// Session 14: the packed rotary kernel finds a chunk's token and column by multiplying by a
/// reciprocal worked out once a launch (`Divider`, a multiply-high and one correction), not
/// by a division a chunk: heads and head chunks that are not powers of two (3 chunks and 5
/// heads: 15 chunks a token; 5 and 3) check the correction step.
#[test]
fn s14_rotary_packed_divides_by_any_head_count() {
    for shape in [
        Rope { tokens: 3, heads: 5, head_dim: 24, rotary_dim: 16, max_positions: 8 },
        Rope { tokens: 3, heads: 3, head_dim: 40, rotary_dim: 32, max_positions: 8 },
        Rope { tokens: 3, heads: 7, head_dim: 56, rotary_dim: 48, max_positions: 8 },
    ] {
        rope::<f32>(shape);
        rope::<bf16>(shape);
        rope::<f16>(shape);
    }
}

fn optimiser<T: Element>(n: usize) {
    let e = executor();
    let (mut params, mut pf) = input::<T>(n, 15, 1.0);
    let (g1, g1f) = input::<T>(n, 16, 3.0);
    let (g2, g2f) = input::<T>(n, 17, 3.0);
    // Global norm over two tensors, then clip both to norm 1.
    let mut total = [0.0f32];
    cpu::sum_of_squares(&e, &g1, &mut total).unwrap();
    cpu::sum_of_squares(&e, &g2, &mut total).unwrap();
    let want_sq: f64 = g1f.iter().chain(&g2f).map(|v| v * v).sum();
    assert!((total[0] as f64 - want_sq).abs() < 1e-4 * want_sq, "{} vs {want_sq}", total[0]);
    let (mut c1, mut c2) = (g1.clone(), g2.clone());
    cpu::clip_by_global_norm(&e, &mut c1, &total, 1.0).unwrap();
    cpu::clip_by_global_norm(&e, &mut c2, &total, 1.0).unwrap();
    let scale = 1.0 / (want_sq.sqrt() + 1e-6);
    assert_close("clipped", &widen(&c1), &g1f.iter().map(|v| v * scale).collect::<Vec<_>>(), tolerance::<T>());
    let norm_after: f64 = widen(&c1).iter().chain(&widen(&c2)).map(|v| v * v).sum::<f64>().sqrt();
    assert!((norm_after - 1.0).abs() < 3.0 * tolerance::<T>(), "norm after clipping {norm_after}");

    // Two AdamW steps, the second with a gradient scale.
    let hyper = AdamW { learning_rate: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 };
    let (mut m, mut v) = (vec![0.0f32; n], vec![0.0f32; n]);
    let (mut mf, mut vf) = (vec![0.0f64; n], vec![0.0f64; n]);
    for (step, (g, gf, scale)) in [(&g1, &g1f, 1.0f32), (&g2, &g2f, 0.5)].into_iter().enumerate() {
        let t = step as i32 + 1;
        cpu::adamw(&e, &mut params, g, &mut m, &mut v, hyper, t as u32, scale).unwrap();
        for i in 0..n {
            let g = gf[i] * scale as f64;
            mf[i] = 0.9 * mf[i] + 0.1 * g;
            vf[i] = 0.999 * vf[i] + 0.001 * g * g;
            let (mh, vh) = (mf[i] / (1.0 - 0.9f64.powi(t)), vf[i] / (1.0 - 0.999f64.powi(t)));
            pf[i] -= 1e-2 * (mh / (vh.sqrt() + 1e-8) + 0.1 * pf[i]);
            // The kernel stores params as T: follow its rounding.
            pf[i] = T::from_f32(pf[i] as f32).to_f32() as f64;
        }
    }
    assert_close("adamw params", &widen(&params), &pf, tolerance::<T>());
    assert_close("adamw m", &m.iter().map(|&x| x as f64).collect::<Vec<_>>(), &mf, 1e-4);
}

#[test]
fn optimiser_and_clipping_match_f64() {
    // 300: the element-wise AdamW kernel; 304 (a multiple of 8): the packed one.
    for n in [300, 304] {
        optimiser::<f32>(n);
        optimiser::<bf16>(n);
        optimiser::<f16>(n);
    }
}

/// AdamW's packed kernel (8 elements a thread, lengths that are multiples of 8) gives the same
/// bits as the element-wise one (other lengths): 304 elements against the first 304 of 305.
fn adamw_packed_and_element_wise_agree<T: Element>() {
    let e = executor();
    let hyper = AdamW { learning_rate: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 };
    let (params, _) = input::<T>(305, 41, 1.0);
    let (grads, _) = input::<T>(305, 42, 3.0);
    let (m0, _) = input::<f32>(305, 43, 0.1);
    let v0: Vec<f32> = input::<f32>(305, 44, 0.1).0.iter().map(|v| v * v).collect();
    let (mut p_long, mut m_long, mut v_long) = (params.clone(), m0.clone(), v0.clone());
    cpu::adamw(&e, &mut p_long, &grads, &mut m_long, &mut v_long, hyper, 3, 0.5).unwrap();
    let (mut p, mut m, mut v) = (params[..304].to_vec(), m0[..304].to_vec(), v0[..304].to_vec());
    cpu::adamw(&e, &mut p, &grads[..304], &mut m, &mut v, hyper, 3, 0.5).unwrap();
    assert_eq!(widen(&p), widen(&p_long[..304]), "params");
    assert_eq!(m, m_long[..304], "m");
    assert_eq!(v, v_long[..304], "v");
}

#[test]
fn adamw_packed_kernel_gives_the_element_wise_kernels_bits() {
    adamw_packed_and_element_wise_agree::<f32>();
    adamw_packed_and_element_wise_agree::<bf16>();
    adamw_packed_and_element_wise_agree::<f16>();
}

/// The packed layer norm takes mean and variance from one block reduction of the sums of `x -
/// shift` and `(x - shift)^2` (`shift` the row's first value). Rows far from zero (1000 plus
/// values of spread 1, where the unshifted one-pass variance loses every digit in f32), one
/// whose first value is an outlier, and the fused residual form must still match f64.
#[test]
fn packed_layernorm_statistics_hold_with_large_offsets() {
    // 512: the 8-columns-a-thread kernel; 2048: the 16-columns-a-thread one (plain form).
    for cols in [512, 2048] {
        let e = executor();
        let shape = Rows { rows: 3, cols };
        let n = shape.len();
        let (noise, _) = input::<f32>(n, 31, 1.0);
        let mut x: Vec<f32> = noise.iter().map(|v| 1000.0 + v).collect();
        x[shape.cols] = -20.0 + x[shape.cols + 1];
        for v in &mut x[2 * shape.cols..] {
            *v -= 31000.0;
        }
        let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let (w, wf) = input::<f32>(shape.cols, 32, 1.5);
        let (b, bf) = input::<f32>(shape.cols, 33, 0.5);
        let (mut out, mut mean, mut rstd) = (vec![0.0f32; n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
        cpu::layernorm(&e, &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, EPS).unwrap();
        let (want, want_mean, want_rstd) = layernorm_ref(&xf, &wf, &bf, shape.cols, EPS as f64);
        assert_close("mean", &widen(&mean), &want_mean, 1e-6);
        assert_close("rstd", &widen(&rstd), &want_rstd, 1e-4);
        assert_close("out", &widen(&out), &want, 1e-3);
        // The fused form: x = (x - 1) + 1 through the residual add.
        let (left, right): (Vec<f32>, Vec<f32>) = x.iter().map(|&v| (v - 1.0, 1.0)).unzip();
        let sum_f: Vec<f64> = left.iter().zip(&right).map(|(a, b)| (a + b) as f64).collect();
        let mut sum = vec![0.0f32; n];
        cpu::add_layernorm(&e, &left, &right, &w, &b, &mut out, &mut sum, &mut mean, &mut rstd, shape, EPS).unwrap();
        let (want, want_mean, want_rstd) = layernorm_ref(&sum_f, &wf, &bf, shape.cols, EPS as f64);
        assert_close("add_layernorm mean", &widen(&mean), &want_mean, 1e-6);
        assert_close("add_layernorm rstd", &widen(&rstd), &want_rstd, 1e-4);
        assert_close("add_layernorm out", &widen(&out), &want, 1e-3);
    }
}

#[test]
fn wrong_shapes_are_refused_before_launch_and_name_the_operand() {
    let e = executor();
    let x = vec![1.0f32; SHAPE.len()];
    let short = vec![1.0f32; SHAPE.cols - 1];
    let (mut out, mut rstd) = (vec![7.0f32; SHAPE.len()], vec![7.0f32; SHAPE.rows]);
    let err = cpu::rmsnorm(&e, &x, &short, &mut out, &mut rstd, SHAPE, EPS).unwrap_err();
    match &err {
        KernelsError::Shape { operand, got, .. } => assert_eq!((*operand, *got), ("weight", SHAPE.cols - 1)),
        other => panic!("expected a shape error, got {other}"),
    }
    assert!(err.to_string().contains("`weight`") && err.to_string().contains("cols 40"), "{err}");
    assert!(out.iter().all(|&v| v == 7.0), "nothing ran");
    let err = cpu::rmsnorm(&e, &x, &x[..SHAPE.cols], &mut out, &mut rstd[..2], SHAPE, EPS).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "rstd", .. }), "{err}");
    let err = cpu::rmsnorm(&e, &x, &x[..SHAPE.cols], &mut out, &mut rstd, Rows { rows: 3, cols: 0 }, EPS).unwrap_err();
    assert!(matches!(err, KernelsError::Unsupported { parameter: "cols", .. }), "{err}");
    let err = cpu::cross_entropy(&e, &x, &[0u32; 2], &mut [0.0; 3], &mut out, SHAPE, 1.0).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "targets", .. }), "{err}");
    let mut g = vec![1.0f32; 4];
    let err = cpu::adamw(
        &e,
        &mut g,
        &[0.0; 4],
        &mut [0.0; 4],
        &mut [0.0; 3],
        AdamW { learning_rate: 1.0, beta1: 0.9, beta2: 0.9, eps: 0.0, weight_decay: 0.0 },
        1,
        1.0,
    )
    .unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "v", .. }), "{err}");
    let rope = Rope { tokens: 1, heads: 1, head_dim: 8, rotary_dim: 5, max_positions: 1 };
    let err = cpu::rotary_embedding(&e, &[0.0f32; 8], &[0], &[0.0; 2], &[0.0; 2], &mut [0.0; 8], rope, false).unwrap_err();
    assert!(matches!(err, KernelsError::Unsupported { parameter: "rotary_dim", .. }), "{err}");
}

/// The packed kernels (a block per row, 8 columns per thread, 16-byte accesses), taken for
/// widths that are multiples of 8 from 256 to 8192: 256 (one whole warp per row) and 320 (40
/// threads: a partial second warp in the block reductions), against the same `f64`
/// references. Misaligned views (one element in) take the element-wise fallback inside the
/// same kernels and must give the same values.
#[test]
fn packed_rows_match_f64() {
    for cols in [256, 320] {
        let shape = Rows { rows: 3, cols };
        norms_forward::<f32>(shape);
        norms_forward::<bf16>(shape);
        norms_forward::<f16>(shape);
        norms_backward::<f32>(shape);
        norms_backward::<bf16>(shape);
        norms_backward::<f16>(shape);
        softmax_and_cross_entropy::<f32>(Rows { rows: 4, cols });
        softmax_and_cross_entropy::<bf16>(Rows { rows: 4, cols });
        softmax_and_cross_entropy::<f16>(Rows { rows: 4, cols });
    }
}

/// Session 14 (2): at the widths the host gives a kernel compiled for one block
/// (`reqntid`: RMSNorm at 768 and 1024 columns, 96 and 128 threads; softmax and the fused
/// residual RMSNorm at 4096, 512 threads) the rows match `f64`, and a misaligned view (the
/// element path inside the same kernels) gives the 16-byte path's bits.
#[test]
fn s14_reqntid_row_kernels_match_f64_and_misaligned_views() {
    for cols in [768, 1024, 4096] {
        norms_forward::<f32>(Rows { rows: 2, cols });
        norms_forward::<bf16>(Rows { rows: 2, cols });
        softmax_and_cross_entropy::<bf16>(Rows { rows: 4, cols });
    }
    norms_forward::<f16>(Rows { rows: 2, cols: 768 });
    softmax_and_cross_entropy::<f32>(Rows { rows: 4, cols: 4096 });
    let e = executor();
    for cols in [768, 1024, 4096] {
        let shape = Rows { rows: 2, cols };
        let n = shape.len();
        let (x, _) = input::<bf16>(n + 1, 31, 2.0);
        let (res, _) = input::<bf16>(n + 1, 32, 1.0);
        let (w, _) = input::<bf16>(cols, 33, 1.5);
        let mut rstd = vec![0.0f32; shape.rows];
        let (mut a, mut b) = (vec![bf16::default(); n + 1], vec![bf16::default(); n + 1]);
        let (mut sa, mut sb) = (vec![bf16::default(); n + 1], vec![bf16::default(); n + 1]);
        let aligned = x[1..].to_vec();
        let mut shifted = vec![bf16::default(); n + 1];
        shifted[1..].copy_from_slice(&aligned);
        let res0 = res[1..].to_vec();
        cpu::rmsnorm(&e, &aligned, &w, &mut a[..n], &mut rstd, shape, EPS).unwrap();
        cpu::rmsnorm(&e, &shifted[1..], &w, &mut b[1..], &mut rstd, shape, EPS).unwrap();
        assert_eq!(widen(&a[..n]), widen(&b[1..]), "rmsnorm at {cols}: the element path differs from the 16-byte path");
        cpu::softmax(&e, &aligned, &mut a[..n], shape).unwrap();
        cpu::softmax(&e, &shifted[1..], &mut b[1..], shape).unwrap();
        assert_eq!(widen(&a[..n]), widen(&b[1..]), "softmax at {cols}: the element path differs from the 16-byte path");
        cpu::add_rmsnorm(&e, &aligned, &res0, &w, &mut a[..n], &mut sa[..n], &mut rstd, shape, EPS).unwrap();
        cpu::add_rmsnorm(&e, &shifted[1..], &res0, &w, &mut b[1..], &mut sb[1..], &mut rstd, shape, EPS).unwrap();
        assert_eq!(widen(&a[..n]), widen(&b[1..]), "add_rmsnorm at {cols}: the element path differs from the 16-byte path");
        assert_eq!(widen(&sa[..n]), widen(&sb[1..]), "add_rmsnorm sum at {cols}: the element path differs from the 16-byte path");
    }
}

/// RMSNorm at widths the 16-columns-a-thread kernel takes (2048: 128 threads a row; 8192: 512,
/// its launch bounds) matches `f64`, and a misaligned view (the element-wise path inside the
/// same kernel) gives the aligned view's bits.
#[test]
fn rmsnorm_16_columns_a_thread_matches_f64_and_misaligned_views() {
    for cols in [2048, 8192] {
        let shape = Rows { rows: 2, cols };
        assert!(ferrocuda_kernels::rows::rmsnorm_rows16(shape.rows, shape.cols).is_some(), "{cols} columns take the 16-column kernel");
        norms_forward::<f32>(shape);
        norms_forward::<bf16>(shape);
        norms_forward::<f16>(shape);
    }
    assert!(ferrocuda_kernels::rows::rmsnorm_rows16(2, 768).is_none(), "768 columns keep the 8-column kernel");
    let e = executor();
    let shape = Rows { rows: 2, cols: 2048 };
    let n = shape.len();
    let (x, _) = input::<bf16>(n + 1, 31, 2.0);
    let (w, _) = input::<bf16>(shape.cols, 32, 1.5);
    let (mut a, mut b) = (vec![bf16::default(); n + 1], vec![bf16::default(); n + 1]);
    let mut rstd = vec![0.0f32; shape.rows];
    let x0 = x[1..].to_vec();
    cpu::rmsnorm(&e, &x0, &w, &mut a[..n], &mut rstd, shape, EPS).unwrap();
    cpu::rmsnorm(&e, &x[1..], &w, &mut b[1..], &mut rstd, shape, EPS).unwrap();
    assert_eq!(widen(&a[..n]), widen(&b[1..]), "rmsnorm (16 columns a thread): the element-wise fallback differs from the 16-byte path");
}

/// `a` copied to a vector that starts one element into an allocation (never 16-byte aligned
/// when the allocation is): the view the kernels' element-by-element paths take.
fn misaligned<T: Element>(a: &[T]) -> Vec<T> {
    let mut v = vec![T::default(); a.len() + 1];
    v[1..].copy_from_slice(a);
    v
}

/// Issue 31: the 16-column layer norm and the packed rotary embedding choose their path once
/// per launch (16-byte accesses only, or element accesses only in rolled loops, which keep the
/// fast path's register count). Every input misaligned in turn, both give the 16-byte path's
/// bits.
fn sixteen_byte_and_element_paths_agree<T: Element>() {
    let e = executor();
    let shape = Rows { rows: 2, cols: 2048 };
    let n = shape.len();
    let (x, _) = input::<T>(n, 41, 2.0);
    let (w, _) = input::<T>(shape.cols, 42, 1.5);
    let (b, _) = input::<T>(shape.cols, 43, 0.5);
    let run = |x: &[T], w: &[T], b: &[T]| {
        let (mut out, mut mean, mut rstd) = (vec![T::default(); n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
        cpu::layernorm(&e, x, w, b, &mut out, &mut mean, &mut rstd, shape, EPS).unwrap();
        (widen(&out), mean, rstd)
    };
    let aligned = run(&x, &w, &b);
    let (xm, wm, bm) = (misaligned(&x), misaligned(&w), misaligned(&b));
    for (which, got) in [("x", run(&xm[1..], &w, &b)), ("weight", run(&x, &wm[1..], &b)), ("bias", run(&x, &w, &bm[1..]))] {
        assert!(got == aligned, "layernorm (16 columns a thread), {which} misaligned: the element path differs from the 16-byte path");
    }

    let rope = Rope { tokens: 3, heads: 2, head_dim: 64, rotary_dim: 48, max_positions: 8 };
    let n = rope.tokens * rope.heads * rope.head_dim;
    let (x, _) = input::<T>(n, 44, 2.0);
    let half = rope.rotary_dim / 2;
    let cos: Vec<f32> = (0..rope.max_positions * half).map(|i| (i as f32 * 0.37).cos()).collect();
    let sin: Vec<f32> = (0..rope.max_positions * half).map(|i| (i as f32 * 0.37).sin()).collect();
    let positions = [0u32, 5, 9];
    let run = |x: &[T], cos: &[f32], sin: &[f32], inverse: bool| {
        let mut out = vec![T::default(); n];
        cpu::rotary_embedding(&e, x, &positions, cos, sin, &mut out, rope, inverse).unwrap();
        widen(&out)
    };
    let (xm, cm, sm) = (misaligned(&x), misaligned(&cos), misaligned(&sin));
    for inverse in [false, true] {
        let aligned = run(&x, &cos, &sin, inverse);
        assert!(aligned[2 * rope.heads * rope.head_dim].is_nan(), "position 9 is past the tables: NaN");
        for (which, got) in [("x", run(&xm[1..], &cos, &sin, inverse)), ("cos", run(&x, &cm[1..], &sin, inverse)), ("sin", run(&x, &cos, &sm[1..], inverse))] {
            // NaN != NaN: compare the bits.
            let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&aligned), "rotary embedding (8 elements a thread), {which} misaligned, inverse {inverse}: the element path differs");
        }
    }
}

#[test]
fn i31_layernorm16_and_rotary_element_paths_give_the_16_byte_paths_bits() {
    sixteen_byte_and_element_paths_agree::<f32>();
    sixteen_byte_and_element_paths_agree::<bf16>();
    sixteen_byte_and_element_paths_agree::<f16>();
}

fn packed_misaligned<T: Element>() {
    let e = executor();
    let shape = Rows { rows: 2, cols: 256 };
    let n = shape.len();
    let (x, _) = input::<T>(n + 1, 21, 2.0);
    let (w, _) = input::<T>(shape.cols + 1, 22, 1.5);
    let (mut a, mut b) = (vec![T::default(); n + 1], vec![T::default(); n + 1]);
    let mut rstd = vec![0.0f32; shape.rows];
    // The same values at two offsets: one of them is not 16-byte aligned.
    let (x0, x1): (Vec<T>, Vec<T>) = (x[1..].to_vec(), x[1..].to_vec());
    let (w0, wm) = (w[1..].to_vec(), misaligned(&w[1..]));
    cpu::rmsnorm(&e, &x0, &w0, &mut a[..n], &mut rstd, shape, EPS).unwrap();
    let mut shifted = vec![T::default(); n + 1];
    shifted[1..].copy_from_slice(&x1);
    cpu::rmsnorm(&e, &shifted[1..], &w0, &mut b[1..], &mut rstd, shape, EPS).unwrap();
    assert_eq!(widen(&a[..n]), widen(&b[1..]), "rmsnorm: the element-wise fallback (x misaligned) differs from the 16-byte path");
    // The kernels choose their path once a launch (issue 31): a misaligned weight alone
    // takes the element path too.
    cpu::rmsnorm(&e, &x0, &wm[1..], &mut b[1..], &mut rstd, shape, EPS).unwrap();
    assert_eq!(widen(&a[..n]), widen(&b[1..]), "rmsnorm: the element-wise fallback (weight misaligned) differs from the 16-byte path");
    cpu::softmax(&e, &x0, &mut a[..n], shape).unwrap();
    cpu::softmax(&e, &shifted[1..], &mut b[1..], shape).unwrap();
    assert_eq!(widen(&a[..n]), widen(&b[1..]), "softmax: the element-wise fallback differs from the 16-byte path");
    cpu::gelu(&e, &x0, &mut a[..n]).unwrap();
    cpu::gelu(&e, &shifted[1..], &mut b[1..]).unwrap();
    assert_eq!(widen(&a[..n]), widen(&b[1..]), "gelu: the element-wise fallback differs from the 16-byte path");
}

/// Session 14: the fused residual RMSNorm chooses its path once a launch (16-byte loads of `x`,
/// the residual and the weight issued together, or element loads in rolled loops): each input
/// misaligned in turn gives the 16-byte path's bits, for `out`, `sum` and `rstd`.
fn add_rmsnorm_paths_agree<T: Element>() {
    let e = executor();
    let shape = Rows { rows: 3, cols: 256 };
    let n = shape.len();
    let ((x, _), (r, _), (w, _)) = (input::<T>(n, 41, 2.0), input::<T>(n, 42, 1.0), input::<T>(shape.cols, 43, 1.5));
    let run = |x: &[T], r: &[T], w: &[T]| {
        let (mut out, mut sum, mut rstd) = (vec![T::default(); n], vec![T::default(); n], vec![0.0f32; shape.rows]);
        cpu::add_rmsnorm(&e, x, r, w, &mut out, &mut sum, &mut rstd, shape, EPS).unwrap();
        let bits = |v: &[T]| widen(v).iter().map(|f| f.to_bits()).collect::<Vec<u64>>();
        (bits(&out), bits(&sum), rstd.iter().map(|v| v.to_bits()).collect::<Vec<u32>>())
    };
    let aligned = run(&x, &r, &w);
    let (xm, rm, wm) = (misaligned(&x), misaligned(&r), misaligned(&w));
    for (which, got) in [("x", run(&xm[1..], &r, &w)), ("residual", run(&x, &rm[1..], &w)), ("weight", run(&x, &r, &wm[1..]))] {
        assert!(got == aligned, "add_rmsnorm, {which} misaligned: the element path differs from the 16-byte path");
    }
}

#[test]
fn s14_add_rmsnorm_element_path_gives_the_16_byte_paths_bits() {
    add_rmsnorm_paths_agree::<f32>();
    add_rmsnorm_paths_agree::<bf16>();
    add_rmsnorm_paths_agree::<f16>();
}

#[test]
fn packed_kernels_give_the_same_values_on_misaligned_views() {
    packed_misaligned::<f32>();
    packed_misaligned::<bf16>();
    packed_misaligned::<f16>();
}

/// The fused norm backward reads `dout`, `x` and `dresidual` as 16-byte vectors when all are
/// aligned (its pipelined walk) and element by element otherwise: both give the same bits,
/// for layer norm (dx, dweight, dbias, with a residual gradient) and RMSNorm (dx, dweight).
fn fused_backward_misaligned<T: Element>() {
    let e = executor();
    // 20 rows of 256: the fused kernel with 3 blocks, so the walk has several steps.
    let shape = Rows { rows: 20, cols: 256 };
    assert_eq!(ferrocuda_kernels::rows::fused_backward_blocks(shape), Some(3));
    let n = shape.len();
    let (x, _) = input::<T>(n, 31, 2.0);
    let (w, _) = input::<T>(shape.cols, 32, 1.5);
    let (b, _) = input::<T>(shape.cols, 33, 0.5);
    let (dout, _) = input::<T>(n, 34, 1.0);
    let (dres, _) = input::<T>(n, 35, 1.0);
    let (mut out, mut mean, mut rstd) = (vec![T::default(); n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
    cpu::layernorm(&e, &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, EPS).unwrap();
    // `dout` one element into a longer buffer: not 16-byte aligned.
    let mut shifted = vec![T::default(); n + 1];
    shifted[1..].copy_from_slice(&dout);
    let run = |dout: &[T]| {
        let (mut dx, mut dw, mut db) = (vec![T::default(); n], vec![0.0f32; shape.cols], vec![0.0f32; shape.cols]);
        cpu::layernorm_backward(&e, dout, &x, &w, &mean, &rstd, Some(&dres), &mut dx, &mut dw, &mut db, shape).unwrap();
        let (mut rdx, mut rdw) = (vec![T::default(); n], vec![0.0f32; shape.cols]);
        cpu::rmsnorm_backward(&e, dout, &x, &w, &rstd, Some(&dres), &mut rdx, &mut rdw, shape).unwrap();
        (widen(&dx), dw, db, widen(&rdx), rdw)
    };
    let aligned = run(&dout);
    let misaligned = run(&shifted[1..]);
    assert!(aligned == misaligned, "the fused backward's element-wise fallback differs from its 16-byte path");
}

#[test]
fn fused_norm_backward_gives_the_same_bits_on_misaligned_views() {
    fused_backward_misaligned::<f32>();
    fused_backward_misaligned::<bf16>();
    fused_backward_misaligned::<f16>();
}

/// `sum_of_squares` takes the packed kernel (16-byte loads, one atomic a block) for lengths
/// that are multiples of 8 and the element-wise one otherwise; both against `f64`, on a
/// length that spans several blocks' grid-stride steps.
#[test]
fn sum_of_squares_packed_and_element_wise_match_f64() {
    let e = executor();
    for n in [40960usize, 4096 + 5, 8] {
        let (g, gf) = input::<bf16>(n, 41, 3.0);
        let mut total = [0.0f32];
        cpu::sum_of_squares(&e, &g, &mut total).unwrap();
        let want: f64 = gf.iter().map(|v| v * v).sum();
        assert!((total[0] as f64 - want).abs() < 1e-5 * want, "n {n}: {} vs {want}", total[0]);
    }
    // A view one element in, of a length that is a multiple of 8: the packed kernel's
    // element-by-element path.
    let (g, gf) = input::<bf16>(40961, 42, 3.0);
    let mut total = [0.0f32];
    cpu::sum_of_squares(&e, &g[1..], &mut total).unwrap();
    let want: f64 = gf[1..].iter().map(|v| v * v).sum();
    assert!((total[0] as f64 - want).abs() < 1e-5 * want, "misaligned: {} vs {want}", total[0]);
}

/// Layer norm's 16-columns-a-thread kernel (taken for widths that are multiples of 16 from 2048):
/// 2048 (128 threads) and 2064 (129: a partial last warp in the block reduction) against
/// `f64`, and the same bits from a misaligned view of `x` (its element-wise path).
#[test]
fn layernorm_sixteen_columns_a_thread_matches_f64() {
    for cols in [2048, 2064] {
        norms_forward::<f32>(Rows { rows: 2, cols });
        norms_forward::<bf16>(Rows { rows: 2, cols });
    }
    let e = executor();
    let shape = Rows { rows: 2, cols: 2048 };
    let n = shape.len();
    let (x, _) = input::<bf16>(n, 51, 2.0);
    let (w, _) = input::<bf16>(shape.cols, 52, 1.5);
    let (b, _) = input::<bf16>(shape.cols, 53, 0.5);
    let mut shifted = vec![bf16::default(); n + 1];
    shifted[1..].copy_from_slice(&x);
    let run = |x: &[bf16]| {
        let (mut out, mut mean, mut rstd) = (vec![bf16::default(); n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
        cpu::layernorm(&e, x, &w, &b, &mut out, &mut mean, &mut rstd, shape, EPS).unwrap();
        (widen(&out), mean, rstd)
    };
    assert!(run(&x) == run(&shifted[1..]), "layernorm: the element-wise path differs from the 16-byte path");
}

/// Session 15: the packed rotary kernel views the tables as chunks of 8 `f32` cut once a launch
/// to their common length, and reads a chunk's four 16-byte words behind one bounds check. A
/// launch whose tables hold fewer rows than `max_positions` (the host refuses one; the kernel
/// must stay in bounds) gives NaN for a position past them, as for one past `max_positions`,
/// in the 16-byte path and in the element path (x misaligned) alike, bit for bit; the other
/// tokens as with whole tables. One block of 256 for 320 chunks: threads walk two chunks, as
/// on the library's grid of at most 4096 blocks at large sizes.
#[test]
fn s15_rotary_packed_short_tables_give_nan_in_both_paths() {
    use ferrocuda_host::LaunchConfig;
    use ferrocuda_kernels_device::{RopeShape, for_bf16};
    use std::num::NonZeroU32;
    let e = executor();
    let shape = Rope { tokens: 40, heads: 2, head_dim: 32, rotary_dim: 32, max_positions: 8 };
    let (n, half) = (shape.tokens * shape.heads * shape.head_dim, shape.rotary_dim / 2);
    let (x, _) = input::<bf16>(n, 31, 2.0);
    let positions: Vec<u32> = (0..shape.tokens as u32).map(|t| t * 3 % 8).collect();
    let cos: Vec<f32> = (0..shape.max_positions * half).map(|i| (i as f32 * 0.01).cos()).collect();
    let sin: Vec<f32> = (0..shape.max_positions * half).map(|i| (i as f32 * 0.01).sin()).collect();
    let mut whole = vec![bf16::default(); n];
    cpu::rotary_embedding(&e, &x, &positions, &cos, &sin, &mut whole, shape, false).unwrap();
    // Tables of 4 rows (positions 4..8 are past them); `max_positions` still 8.
    let rope = RopeShape { heads: 2, head_dim: 32, rotary_dim: 32, max_positions: 8, inverse: 0 };
    let (head_chunks, heads) = (NonZeroU32::new(4).unwrap(), NonZeroU32::new(2).unwrap());
    let run = |x: &[bf16]| {
        let mut out = vec![bf16::default(); n];
        for_bf16::rotary_embedding_packed::launch_cpu(
            &e,
            LaunchConfig::new(1, 256),
            x,
            &positions,
            &cos[..4 * half],
            &sin[..4 * half],
            &mut out,
            head_chunks,
            heads,
            rope,
        )
        .unwrap();
        out
    };
    let xm = misaligned(&x);
    let bits = |v: &[bf16]| v.iter().map(|b| b.to_bits()).collect::<Vec<u16>>();
    let (vectors, elements) = (run(&x), run(&xm[1..]));
    assert_eq!(bits(&vectors), bits(&elements), "the element path differs from the 16-byte path");
    let row = shape.heads * shape.head_dim;
    for (t, &p) in positions.iter().enumerate() {
        let (got, want) = (&vectors[t * row..(t + 1) * row], &whole[t * row..(t + 1) * row]);
        if p >= 4 {
            assert!(got.iter().all(|v| v.to_f32().is_nan()), "token {t} (position {p}, past the tables) must be NaN");
        } else {
            assert_eq!(bits(got), bits(want), "token {t} (position {p})");
        }
    }
}
